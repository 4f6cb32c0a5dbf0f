package server

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestDeletedTenantLeavesNothing: a tenant's ended workloads (with
// command.env) and events do not come back when a tenant of the same name
// is created again; the admin keeps the events (admin-only), and other
// tenants' history stays.
func TestDeletedTenantLeavesNothing(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	ctx := h.ctx
	if _, err := h.admin.CreateTenant(ctx, api.Tenant{Name: "temp"}); err != nil {
		t.Fatal(err)
	}
	temp := h.tenant("temp")
	w := spec("job", 1, 1)
	w.Command = &api.Command{Argv: []string{"train"}, Env: map[string]string{"SECRET": "hunter2"}}
	if _, err := temp.Submit(ctx, "temp", w); err != nil {
		t.Fatal(err)
	}
	contoso := h.tenant("contoso")
	if _, err := contoso.Submit(ctx, "contoso", spec("keep", 1, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(ctx)
	if _, err := temp.Cancel(ctx, "temp", "job"); err != nil {
		t.Fatal(err)
	}
	if err := h.admin.DeleteTenant(ctx, "temp"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.CreateTenant(ctx, api.Tenant{Name: "temp"}); err != nil {
		t.Fatal(err)
	}
	again := h.tenant("temp")
	ws, err := again.Workloads(ctx, "temp", "")
	if err != nil || len(ws) != 0 {
		t.Fatalf("the new temp sees workloads %+v (%v)", ws, err)
	}
	if _, err := again.Workload(ctx, "temp", "job"); apiCode(err) != api.CodeNotFound {
		t.Fatalf("old job by name: %v, want NotFound", err)
	}
	ev, err := again.Events(ctx, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// Only the new tenant's own creation may show.
	if len(ev.Items) != 1 || ev.Items[0].Type != "TenantCreated" {
		t.Errorf("the new temp sees events %+v, want only its TenantCreated", ev.Items)
	}
	for _, e := range ev.Items {
		if strings.Contains(e.Object, "job") {
			t.Errorf("the new temp sees the old tenant's event %+v", e)
		}
	}
	// The admin keeps the audit trail, now admin-only.
	aev, err := h.admin.Events(ctx, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	kept := false
	for _, e := range aev.Items {
		if e.Object == "workloads/temp/job" {
			kept = true
			if e.Tenant != "" {
				t.Errorf("old event %+v still names the tenant", e)
			}
		}
	}
	if !kept {
		t.Error("the admin lost the old tenant's workload events")
	}
	all, err := h.admin.Workloads(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range all {
		if x.Tenant == "temp" {
			t.Errorf("the admin still sees %s/%s", x.Tenant, x.Name)
		}
	}
	if ws, _ := contoso.Workloads(ctx, "contoso", ""); len(ws) != 1 {
		t.Errorf("contoso's workloads: %d, want 1 (other tenants keep their history)", len(ws))
	}
	if ev, _ := contoso.Events(ctx, 0, 0, 1000); len(ev.Items) == 0 {
		t.Error("contoso's events are gone")
	}
}
