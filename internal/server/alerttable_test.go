package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/policy"
)

// TestAlertAndPolicySeeOneValue (issue 13): an alert and a policy on the
// same metric of the same target read the same value at the same tick,
// and so cross the same threshold at the same tick: utilization of eastus
// (sampled from the world by effects.Sample, one node down) and p95
// latency of the cluster (pushed). Before, alerts read their own
// Prometheus-derived series (gpu_allocation_ratio counted down nodes'
// GPUs as capacity) and knew no pushed metric.
func TestAlertAndPolicySeeOneValue(t *testing.T) {
	clk := newTestClock()
	hookURL, got := webhookSink(t)
	h := newHarness(t, testConfig, Options{Clock: clk.Now, RateLimit: -1})
	rules := `policies:
  - name: busy
    when: {metric: utilization, of: region:eastus, above: 40%}
    then:
      - {type: notify, message: eastus is busy}
  - name: slow
    when: {metric: p95_latency, of: cluster, above: 300ms}
    then:
      - {type: notify, message: chat is slow}
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "ops", Source: rules}); err != nil {
		t.Fatal(err)
	}
	alerts := `webhook: ` + hookURL + `
rules:
  - name: busy
    metric: utilization
    of: region:eastus
    aggregation: avg
    window: 1m
    frequency: 1m
    operator: ">"
    threshold: 0.4
  - name: slow
    metric: p95_latency
    of: cluster
    aggregation: avg
    window: 1m
    frequency: 1m
    operator: ">"
    threshold: 0.3
`
	if _, err := h.admin.ApplyAlerts(h.ctx, api.AlertsApply{File: "alerts.yaml", Source: alerts}); err != nil {
		t.Fatal(err)
	}
	// One eastus H100 machine is down: the table's utilization counts the
	// GPUs in service only.
	drained := true
	if _, err := h.admin.UpdateNode(h.ctx, "eus-h-n0001", api.NodeUpdate{Drained: &drained}); err != nil {
		t.Fatal(err)
	}
	tenants := []string{"contoso", "contoso", "fabrikam", "fabrikam", "fabrikam", "fabrikam"}
	clients := map[string]*client.Client{"contoso": h.tenant("contoso"), "fabrikam": h.tenant("fabrikam")}
	policyFired := map[string]int{} // rule -> minute
	alertFired := map[string]int{}
	for m := range 6 {
		// Each minute 8 more GPUs run in eastus and the service is
		// 80 ms slower.
		if _, err := clients[tenants[m]].Submit(h.ctx, tenants[m], spec(fmt.Sprintf("w%d", m), 8, 1)); err != nil {
			t.Fatal(err)
		}
		h.s.Cycle(h.ctx)
		lat := 0.1 + 0.08*float64(m)
		if _, err := h.admin.PushMetrics(h.ctx, api.MetricSamples{Samples: []api.MetricSample{{Metric: "p95_latency", Target: "cluster", Value: lat}}}); err != nil {
			t.Fatal(err)
		}
		h.s.TickPolicies(h.ctx)
		h.s.TickAlerts(h.ctx)

		for _, q := range []policy.Query{
			{Metric: policy.MetricUtilization, Target: policy.Target{Kind: policy.TargetRegion, Name: "eastus"}},
			{Metric: policy.MetricP95Latency, Target: policy.Cluster},
		} {
			h.s.policies.mu.Lock()
			pv, ok := h.s.policies.windows.Value(q)
			h.s.policies.mu.Unlock()
			av := alertValue(t, h, q.Metric.String())
			if !ok || av == nil || *av != pv {
				t.Fatalf("minute %d, %s: the policy reads %v (%v), the alert %v", m, q, pv, ok, av)
			}
		}
		fs, err := h.admin.Firings(h.ctx, "ops")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if _, ok := policyFired[f.Rule]; !ok && f.Event == "fired" {
				policyFired[f.Rule] = m
			}
		}
		for _, st := range h.s.alerts.out().Items {
			if _, ok := alertFired[st.Name]; !ok && st.State == "Fired" {
				alertFired[st.Name] = m
				<-got
			}
		}
		clk.Advance(time.Minute)
	}
	t.Logf("policy firings by minute %v, alert firings %v", policyFired, alertFired)
	for _, r := range []string{"busy", "slow"} {
		p, pok := policyFired[r]
		a, aok := alertFired[r]
		if !pok || !aok || p != a {
			t.Errorf("%s: the policy fired at minute %d (%v), the alert at %d (%v): want both, at the same tick", r, p, pok, a, aok)
		}
	}
}

// alertValue is the named alert rule's last value.
func alertValue(t *testing.T, h *harness, name string) *float64 {
	t.Helper()
	for _, st := range h.s.alerts.out().Items {
		if st.Metric == name {
			return st.LastValue
		}
	}
	t.Fatalf("no alert on %s", name)
	return nil
}
