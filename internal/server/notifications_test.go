package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestPolicyNotify: a rule's notify action is POSTed to the notification
// webhook when the rule fires and again when it reverts, in that order,
// and recorded in the admin's event log (not a tenant's); a dry-run rule
// sends nothing.
func TestPolicyNotify(t *testing.T) {
	got := make(chan Notification, 8)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n Notification
		b, _ := io.ReadAll(r.Body)
		if r.Method != "POST" || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &n) != nil {
			t.Errorf("webhook got %s %q", r.Method, b)
		}
		got <- n
	}))
	defer hook.Close()
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1, NotifyWebhook: hook.URL})
	c := h.tenant("contoso")
	if _, err := c.Submit(h.ctx, "contoso", spec("busy", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx) // 8 of 64 GPUs in use: 12.5%
	rules := `policies:
  - name: busy
    when: {metric: utilization, of: cluster, above: 10%}
    then:
      - {type: notify, channel: "#gpu-oncall", message: the cluster is busy}
    cooldown: 1m
  - name: rehearsal
    when: {metric: utilization, of: cluster, above: 10%}
    then:
      - {type: notify, message: should not be sent}
    dry_run: true
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "ops", Source: rules}); err != nil {
		t.Fatal(err)
	}
	receive := func(event string) {
		t.Helper()
		select {
		case n := <-got:
			if n.Policy != "ops" || n.Rule != "busy" || n.Event != event || n.Channel != "#gpu-oncall" ||
				n.Message != "the cluster is busy" || !strings.Contains(n.Reason, "utilization") {
				t.Errorf("notification %+v, want rule busy %s", n, event)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s notification", event)
		}
	}
	h.s.TickPolicies(h.ctx)
	receive("fired")

	if _, err := c.Cancel(h.ctx, "contoso", "busy"); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	h.s.TickPolicies(h.ctx)
	tc.Advance(61 * time.Second)
	h.s.TickPolicies(h.ctx)
	receive("reverted")

	evs, err := h.admin.Events(h.ctx, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, e := range evs.Items {
		if e.Type == "PolicyNotification" {
			texts = append(texts, e.Message)
		}
	}
	if len(texts) != 2 || !strings.Contains(texts[0], "the cluster is busy (#gpu-oncall, rule busy fired)") || !strings.Contains(texts[1], "reverted") {
		t.Errorf("PolicyNotification events %q, want fired then reverted", texts)
	}
	tevs, err := c.Events(h.ctx, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tevs.Items {
		if strings.HasPrefix(e.Type, "Policy") {
			t.Errorf("a tenant sees %+v", e)
		}
	}
	// Nothing else arrives: the dry-run rule sends nothing (its firings
	// were recorded by the same ticks, whose deliveries are done in order).
	h.s.policies.mu.Lock()
	last := h.s.policies.delivered
	h.s.policies.mu.Unlock()
	<-last
	select {
	case n := <-got:
		t.Errorf("unexpected notification %+v", n)
	default:
	}
}
