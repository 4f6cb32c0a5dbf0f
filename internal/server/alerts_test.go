package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/alert"
	"github.com/arbiterhq/arbiter/internal/api"
)

// TestAlertsWebhook drives the alert evaluator with a pinned clock: a
// webhook on loopback receives a firing, then its resolution when the
// condition clears; the rules are applied and listed through the API.
func TestAlertsWebhook(t *testing.T) {
	tc := &testClock{now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	clock, advance := tc.Now, tc.Advance

	hookURL, got := webhookSink(t)

	h := newHarness(t, testConfig, Options{Clock: clock})
	ctx := h.ctx
	rules := `webhook: ` + hookURL + `/alerts?code=secret
rules:
  - name: contoso-pending
    description: contoso has work waiting
    metric: pending_gpus
    of: tenant:contoso
    aggregation: max
    window: 1m
    frequency: 1m
    operator: ">"
    threshold: 0
    severity: 1
  - name: a100-eastus-busy
    metric: utilization
    of: flavor:A100-80G
    aggregation: avg
    window: 1m
    frequency: 1m
    operator: ">="
    threshold: 0.3
    auto_mitigate: false
`
	if _, err := h.admin.ApplyAlerts(ctx, api.AlertsApply{File: "alerts.yaml", Source: rules}); err != nil {
		t.Fatal(err)
	}
	// A bad file is a 400 naming the field and line.
	_, err := h.admin.ApplyAlerts(ctx, api.AlertsApply{File: "bad.yaml", Source: strings.Replace(rules, "aggregation: max", "aggregation: median", 1)})
	if ae, ok := err.(*api.Error); !ok || ae.Status != 400 || ae.Field != "source.rules[0].aggregation" || !strings.Contains(ae.Message, "bad.yaml:3:5") {
		t.Fatalf("bad rules: %v", err)
	}

	contoso := h.tenant("contoso")
	// 16 GPUs run on A100 (a third of its 48); 64 more wait.
	if _, err := contoso.Submit(ctx, "contoso", spec("run", 8, 2)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(ctx)
	if _, err := contoso.Submit(ctx, "contoso", spec("wait", 8, 8)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(ctx)
	h.s.TickPolicies(ctx) // the policy metrics' samples (alerts read them as policies do)

	if n := h.s.TickAlerts(ctx); n != 2 {
		t.Fatalf("delivered %d notifications, want 2", n)
	}
	fired := map[string]alert.Payload{}
	for range 2 {
		p := <-got
		fired[p.Data.Essentials.AlertRule] = p
	}
	p := fired["contoso-pending"]
	es, c := p.Data.Essentials, p.Data.AlertContext.Condition
	if p.SchemaID != "azureMonitorCommonAlertSchema" || es.MonitorCondition != "Fired" || es.Severity != "Sev1" || !es.FiredDateTime.Equal(clock()) ||
		c.AllOf[0].MetricValue != 64 || c.AllOf[0].MetricName != "pending_gpus" || c.WindowSize != "PT1M" {
		t.Fatalf("firing payload %+v", p)
	}
	if v := fired["a100-eastus-busy"].Data.AlertContext.Condition.AllOf[0].MetricValue; v != 16.0/48 {
		t.Fatalf("A100 utilization = %v, want 1/3", v)
	}
	// Not due again within the frequency: nothing new, even if ticked.
	advance(30 * time.Second)
	if n := h.s.TickAlerts(ctx); n != 0 {
		t.Fatalf("evaluated before due: %d", n)
	}
	as, err := h.admin.Alerts(ctx)
	if err != nil || len(as.Items) != 2 || as.Items[0].State != "Fired" || as.Items[0].LastValue == nil || *as.Items[0].LastValue != 64 || as.File != "alerts.yaml" {
		t.Fatalf("alerts list %+v %v", as, err)
	}

	// The waiting work goes away; a minute later the window holds only
	// zeros and the pending alert resolves; the other does not auto-mitigate.
	if _, err := contoso.Cancel(ctx, "contoso", "wait"); err != nil {
		t.Fatal(err)
	}
	if _, err := contoso.Cancel(ctx, "contoso", "run"); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(ctx)
	h.s.TickPolicies(ctx)
	advance(31 * time.Second)
	// Due now, but the window (t0+1s, t0+61s] still holds the 64 sampled
	// at t0+30s: still fired.
	if n := h.s.TickAlerts(ctx); n != 0 {
		t.Fatalf("resolved while the window still breaches: %d", n)
	}
	advance(60 * time.Second)
	if n := h.s.TickAlerts(ctx); n != 1 {
		t.Fatalf("delivered %d at the resolution, want 1", n)
	}
	p = <-got
	es = p.Data.Essentials
	if es.AlertRule != "contoso-pending" || es.MonitorCondition != "Resolved" || es.ResolvedDateTime == nil || !es.ResolvedDateTime.Equal(clock()) ||
		!es.FiredDateTime.Equal(clock().Add(-121*time.Second)) {
		t.Fatalf("resolution payload %+v", p)
	}
	as, _ = h.admin.Alerts(ctx)
	if as.Items[0].State != "OK" || as.Items[1].State != "Fired" {
		t.Fatalf("states after resolution %+v", as.Items)
	}
	// Both changes are in the event log (admin only).
	ev, err := h.admin.Events(ctx, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range ev.Items {
		if strings.HasPrefix(e.Type, "Alert") {
			types = append(types, e.Type+":"+e.Object)
		}
	}
	want := "AlertRulesApplied:alerts AlertFired:alerts/contoso-pending AlertFired:alerts/a100-eastus-busy AlertResolved:alerts/contoso-pending"
	if strings.Join(types, " ") != want {
		t.Fatalf("alert events %v, want %s", types, want)
	}
	// The rules survive a restart of the server over the same store.
	s2, err := New(context.Background(), Options{Store: h.st, AdminToken: testAdmin, Logger: h.s.log})
	if err != nil {
		t.Fatal(err)
	}
	if o := s2.alerts.out(); len(o.Items) != 2 || o.Items[1].Name != "a100-eastus-busy" {
		t.Fatalf("after restart %+v", o)
	}
}

// TestAlertsSplit: a split rule alerts once per tenant through the
// webhook, each naming its tenant, and the API lists its instances.
func TestAlertsSplit(t *testing.T) {
	tc := newTestClock()
	clock, advance := tc.Now, tc.Advance
	hookURL, got := webhookSink(t)
	h := newHarness(t, testConfig, Options{Clock: clock, RateLimit: -1})
	rules := `webhook: ` + hookURL + `
rules:
  - name: waiting
    metric: pending_gpus
    of: "tenant:*"
    split: true
    aggregation: max
    window: 1m
    frequency: 1m
    operator: ">"
    threshold: 0
`
	if _, err := h.admin.ApplyAlerts(h.ctx, api.AlertsApply{File: "alerts.yaml", Source: rules}); err != nil {
		t.Fatal(err)
	}
	tenantOf := func(p alert.Payload) string {
		for _, d := range p.Data.AlertContext.Condition.AllOf[0].Dimensions {
			if d.Name == "tenant" {
				return d.Value
			}
		}
		return ""
	}
	// More than the fleet has: it waits.
	if _, err := h.tenant("contoso").Submit(h.ctx, "contoso", spec("big", 8, 8)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	h.s.TickPolicies(h.ctx)
	if n := h.s.TickAlerts(h.ctx); n != 1 {
		t.Fatalf("delivered %d, want contoso's firing only", n)
	}
	if p := <-got; tenantOf(p) != "contoso" || p.Data.Essentials.MonitorCondition != "Fired" {
		t.Fatalf("first firing: %+v", p.Data)
	}
	if _, err := h.tenant("fabrikam").Submit(h.ctx, "fabrikam", spec("big", 8, 8)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	h.s.TickPolicies(h.ctx)
	advance(time.Minute)
	if n := h.s.TickAlerts(h.ctx); n != 1 {
		t.Fatalf("delivered %d, want fabrikam's firing only (contoso's is already fired)", n)
	}
	if p := <-got; tenantOf(p) != "fabrikam" {
		t.Fatalf("second firing: %+v", p.Data)
	}
	as, err := h.admin.Alerts(h.ctx)
	// One instance per tenant the table measures: contoso and fabrikam
	// fired, their parent customers (nothing waits) OK at 0.
	if err != nil || len(as.Items) != 1 || !as.Items[0].Split || as.Items[0].State != "Fired" || len(as.Items[0].Instances) != 3 {
		t.Fatalf("alerts: %+v %v", as, err)
	}
	for _, in := range as.Items[0].Instances {
		want, v := "Fired", 64.0
		if in.Labels["tenant"] == "customers" {
			want, v = "OK", 0
		}
		if in.State != want || in.LastValue == nil || *in.LastValue != v {
			t.Errorf("instance %+v, want %s at %v", in, want, v)
		}
	}
}

// TestAlertsSurviveRestart: a fired alert stays fired across a restart of
// the server (no second firing while its condition holds) and resolves
// when the condition clears.
func TestAlertsSurviveRestart(t *testing.T) {
	tc := newTestClock()
	clock, advance := tc.Now, tc.Advance
	hookURL, got := webhookSink(t)
	h := newHarness(t, testConfig, Options{Clock: clock, RateLimit: -1})
	rules := `webhook: ` + hookURL + `
rules:
  - name: waiting
    metric: pending_gpus
    of: tenant:contoso
    aggregation: max
    window: 1m
    frequency: 1m
    operator: ">"
    threshold: 0
`
	if _, err := h.admin.ApplyAlerts(h.ctx, api.AlertsApply{File: "alerts.yaml", Source: rules}); err != nil {
		t.Fatal(err)
	}
	c := h.tenant("contoso")
	if _, err := c.Submit(h.ctx, "contoso", spec("big", 8, 8)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	h.s.TickPolicies(h.ctx)
	if n := h.s.TickAlerts(h.ctx); n != 1 {
		t.Fatalf("first server delivered %d, want the firing", n)
	}
	<-got

	// A new server on the same store: the alert is still fired.
	s2, err := New(h.ctx, Options{Store: h.st, AdminToken: testAdmin, Clock: clock, RateLimit: -1, Logger: h.s.log})
	if err != nil {
		t.Fatal(err)
	}
	s2.Cycle(h.ctx)
	s2.TickPolicies(h.ctx)
	advance(time.Minute)
	if n := s2.TickAlerts(h.ctx); n != 0 {
		t.Fatalf("restarted server delivered %d while the condition holds, want 0 (already fired)", n)
	}
	if st := s2.alerts.out(); len(st.Items) != 1 || st.Items[0].State != "Fired" {
		t.Fatalf("restarted server's alert: %+v", st.Items)
	}
	if _, err := c.Cancel(h.ctx, "contoso", "big"); err != nil {
		t.Fatal(err)
	}
	s2.Cycle(h.ctx)
	s2.TickPolicies(h.ctx)
	n := 0
	for i := 0; i < 3; i++ { // the window clears within a few evaluations
		advance(time.Minute)
		n += s2.TickAlerts(h.ctx)
	}
	if n != 1 {
		t.Fatalf("delivered %d once the condition cleared, want the resolution only", n)
	}
	if p := <-got; p.Data.Essentials.MonitorCondition != "Resolved" {
		t.Fatalf("got %+v, want Resolved", p.Data.Essentials)
	}
}
