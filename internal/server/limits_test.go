package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/config"
)

// wantErr checks an error answer's status, code and field.
func wantErr(t *testing.T, what string, err error, status int, code, field string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Errorf("%s: %v, want %d %s naming %q", what, err, status, code, field)
		return
	}
	if ae.Status != status || ae.Code != code || ae.Field != field {
		t.Errorf("%s: %d %s field %q (%s), want %d %s field %q", what, ae.Status, ae.Code, ae.Field, ae.Message, status, code, field)
	}
}

// TestQueuedLimit (issue 12, item 14): a tenant's live workloads are
// bounded (with a per-tenant override); cancelling makes room; the
// limit holds under concurrent submissions.
func TestQueuedLimit(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1, Limits: config.Limits{WorkloadsQueued: 3,
		Tenants: map[string]config.TenantLimits{"fabrikam": {WorkloadsQueued: 20}}}})
	c := h.tenant("contoso")
	for i := range 3 {
		if _, err := c.Submit(h.ctx, "contoso", spec(fmt.Sprint("w", i), 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Submit(h.ctx, "contoso", spec("w3", 1, 1))
	wantErr(t, "fourth workload", err, http.StatusConflict, api.CodeLimitExceeded, "limits.workloads_queued")
	if _, err := c.Cancel(h.ctx, "contoso", "w0"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(h.ctx, "contoso", spec("w3", 1, 1)); err != nil {
		t.Fatalf("after a cancel: %v", err)
	}

	f := h.tenant("fabrikam")
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for i := range 60 {
		wg.Go(func() {
			_, err := f.Submit(h.ctx, "fabrikam", spec(fmt.Sprint("c", i), 1, 1))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
			} else if apiCode(err) == api.CodeLimitExceeded {
				refused++
			} else {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok != 20 || refused != 40 {
		t.Fatalf("concurrent submissions: %d accepted, %d refused; want 20 and 40", ok, refused)
	}
}

// TestCountLimits: reservations per tenant and policies in all.
func TestCountLimits(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1, Limits: config.Limits{Reservations: 1, Policies: 1}})
	c := h.tenant("contoso")
	if _, err := c.CreateReservation(h.ctx, "contoso", api.ReservationRequest{Name: "r0", SKU: "Standard_ND96isr_H100_v5", Capacity: 1, Region: "eastus"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateReservation(h.ctx, "contoso", api.ReservationRequest{Name: "r1", SKU: "Standard_ND96isr_H100_v5", Capacity: 1, Region: "eastus"})
	wantErr(t, "second reservation", err, http.StatusConflict, api.CodeLimitExceeded, "limits.reservations")

	rules := "policies:\n  - name: p\n    when: {metric: utilization, of: cluster, above: 99%}\n    then:\n      - {type: notify, channel: ops, message: hot}\n"
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "one", Source: rules}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "one", Source: rules}); err != nil {
		t.Fatalf("replacing a policy at the limit: %v", err)
	}
	_, err = h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "two", Source: rules})
	wantErr(t, "second policy", err, http.StatusConflict, api.CodeLimitExceeded, "limits.policies")
}

// TestFieldLimits: every size limit refuses with 400 naming its field
// and the limit; node labels are bounded on registration and update.
func TestFieldLimits(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1, Limits: config.Limits{EnvBytes: 100, ArgvBytes: 100, Args: 4, EnvVars: 2, DirBytes: 10, Labels: 2, LabelValueBytes: 8, PolicyBytes: 50}})
	c := h.tenant("contoso")
	withCmd := func(cmd api.Command) api.WorkloadSpec {
		s := spec("x", 1, 1)
		s.Command = &cmd
		return s
	}
	withLabels := func(l map[string]string) api.WorkloadSpec {
		s := spec("x", 1, 1)
		s.Labels = l
		return s
	}
	for _, tc := range []struct {
		name  string
		spec  api.WorkloadSpec
		field string
		limit string
	}{
		{"argv bytes", withCmd(api.Command{Argv: []string{strings.Repeat("a", 101)}}), "command.argv", "argv_bytes"},
		{"args", withCmd(api.Command{Argv: []string{"a", "b", "c", "d", "e"}}), "command.argv", "args"},
		{"env vars", withCmd(api.Command{Argv: []string{"a"}, Env: map[string]string{"A": "1", "B": "2", "C": "3"}}), "command.env", "env_vars"},
		{"env bytes", withCmd(api.Command{Argv: []string{"a"}, Env: map[string]string{"A": strings.Repeat("x", 100)}}), "command.env", "env_bytes"},
		{"dir", withCmd(api.Command{Argv: []string{"a"}, Dir: "a/very/long/dir"}), "command.dir", "dir_bytes"},
		{"labels", withLabels(map[string]string{"a": "1", "b": "2", "c": "3"}), "labels", "labels"},
		{"label value", withLabels(map[string]string{"a": "123456789"}), "labels.a", "label_value_bytes"},
		{"label key", withLabels(map[string]string{strings.Repeat("k", 64): "1"}), "labels", "label_key_bytes"},
	} {
		_, err := c.Submit(h.ctx, "contoso", tc.spec)
		wantErr(t, tc.name, err, http.StatusBadRequest, api.CodeInvalid, tc.field)
		if err != nil && !strings.Contains(err.Error(), "limits."+tc.limit) {
			t.Errorf("%s: %v does not name limits.%s", tc.name, err, tc.limit)
		}
	}
	_, err := c.Submit(h.ctx, "contoso", withLabels(map[string]string{"bad key": "1"}))
	wantErr(t, "label key syntax", err, http.StatusBadRequest, api.CodeInvalid, "labels")

	_, err = h.admin.RegisterNode(h.ctx, api.NodeRegistration{ID: "n1", Region: "eastus", Block: "b", SKU: "Standard_ND96isr_H100_v5", Labels: map[string]string{"a": "1", "b": "2", "c": "3"}})
	wantErr(t, "node labels", err, http.StatusBadRequest, api.CodeInvalid, "labels")
	_, err = h.admin.RegisterNode(h.ctx, api.NodeRegistration{ID: "n1", Region: "eastus", Block: "b", SKU: "Standard_ND96isr_H100_v5", Labels: map[string]string{"a\n": "1"}})
	wantErr(t, "node label key", err, http.StatusBadRequest, api.CodeInvalid, "labels")
	bad := map[string]string{"pool": "123456789"}
	_, err = h.admin.UpdateNode(h.ctx, "eastus-eus-a-0", api.NodeUpdate{Labels: &bad})
	wantErr(t, "node label update", err, http.StatusBadRequest, api.CodeInvalid, "labels.pool")

	_, err = h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "big", Source: strings.Repeat("#", 51)})
	wantErr(t, "policy source", err, http.StatusBadRequest, api.CodeInvalid, "source")
}

// TestQueuedBytesLimit: a tenant's live workloads are bounded in bytes
// too, so that few large ones cannot fill the server's memory.
func TestQueuedBytesLimit(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1, Limits: config.Limits{QueuedBytes: 100_000}})
	c := h.tenant("contoso")
	big := func(name string) api.WorkloadSpec {
		s := spec(name, 1, 1)
		s.Command = &api.Command{Argv: []string{"run", strings.Repeat("a", 30_000)}}
		return s
	}
	for i := range 3 {
		if _, err := c.Submit(h.ctx, "contoso", big(fmt.Sprint("b", i))); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Submit(h.ctx, "contoso", big("b3"))
	wantErr(t, "fourth large workload", err, http.StatusConflict, api.CodeLimitExceeded, "limits.queued_bytes")
	if _, err := c.Submit(h.ctx, "contoso", spec("small", 1, 1)); err != nil {
		t.Fatalf("a small one still fits: %v", err)
	}
}
