package server

import (
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestLatencyPolicyGivesPriority is the mission's example end to end
// through the API: "when the chat service's p95 is above 150 ms for a
// minute, give it priority". Latency is pushed by the service's owner
// (POST /v1/metrics); the rule fires only once the value has held for the
// minute; then the chat workload, low priority and waiting on a full
// fleet, preempts its own tenant's normal-priority batch work. The rule
// says it as set_priority, and as the architecture's reallocate.
func TestLatencyPolicyGivesPriority(t *testing.T) {
	for name, then := range map[string]string{
		"set_priority": "      - type: set_priority\n        target: service:chat\n        priority: high\n",
		"reallocate":   "      - type: reallocate\n        resources: [service:chat]\n        priority: high\n",
	} {
		t.Run(name, func(t *testing.T) { latencyPolicy(t, then) })
	}
}

func latencyPolicy(t *testing.T, then string) {
	tc := newTestClock()
	clock, advance := tc.Now, tc.Advance
	h := newHarness(t, testConfig, Options{Clock: clock, RateLimit: -1})
	con, fab := h.tenant("contoso"), h.tenant("fabrikam")

	// eastus A100 (32 GPUs) full: contoso's 16, fabrikam's 2×8 batch.
	if _, err := con.Submit(h.ctx, "contoso", spec("steady", 8, 2)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"batch-0", "batch-1"} {
		s := spec(n, 8, 1)
		s.Preemptible = true
		if _, err := fab.Submit(h.ctx, "fabrikam", s); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx)
	chat := spec("chat", 8, 1)
	chat.Priority, chat.Kind, chat.Labels = "low", "inference", map[string]string{"service": "chat"}
	if _, err := fab.Submit(h.ctx, "fabrikam", chat); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	state := func(name string) string {
		w, err := fab.Why(h.ctx, "fabrikam", name)
		if err != nil {
			t.Fatal(err)
		}
		return w.State
	}
	if s := state("chat"); s != "Pending" {
		t.Fatalf("chat is %s before the policy, want Pending", s)
	}

	rules := `policies:
  - name: chat_latency
    when:
      metric: p95_latency
      of: service:chat
      above: 150ms
      for: 1m
    then:
` + then
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "chat", Source: rules}); err != nil {
		t.Fatal(err)
	}
	push := func(v float64) {
		t.Helper()
		res, err := h.admin.PushMetrics(h.ctx, api.MetricSamples{Samples: []api.MetricSample{{Metric: "p95_latency", Target: "service:chat", Value: v}}})
		if err != nil || res.Accepted != 1 {
			t.Fatalf("push: %+v %v", res, err)
		}
	}
	// A tenant may not push; bad samples name the field.
	if _, err := fab.PushMetrics(h.ctx, api.MetricSamples{Samples: []api.MetricSample{{Metric: "p95_latency", Target: "service:chat", Value: 0.2}}}); apiCode(err) != api.CodeForbidden {
		t.Errorf("tenant push: %v, want Forbidden", err)
	}
	for _, c := range []struct {
		s     api.MetricSample
		field string
	}{
		{api.MetricSample{Metric: "p96_latency", Target: "service:chat"}, "samples[0].metric"},
		{api.MetricSample{Metric: "utilization", Target: "cluster"}, "samples[0].metric"},
		{api.MetricSample{Metric: "p95_latency", Target: "chat"}, "samples[0].target"},
		{api.MetricSample{Metric: "p95_latency", Target: "service:chat", Value: -1}, "samples[0].value"},
	} {
		_, err := h.admin.PushMetrics(h.ctx, api.MetricSamples{Samples: []api.MetricSample{c.s}})
		if ae, ok := err.(*api.Error); !ok || ae.Status != 400 || ae.Field != c.field {
			t.Errorf("push %+v: %v, want 400 naming %s", c.s, err, c.field)
		}
	}

	push(0.2)
	h.s.TickPolicies(h.ctx)
	h.s.Cycle(h.ctx)
	if s := state("chat"); s != "Pending" {
		t.Fatalf("chat is %s after p95 was high for an instant, want Pending (the rule wants a minute)", s)
	}
	advance(30 * time.Second)
	push(0.21)
	h.s.TickPolicies(h.ctx)
	advance(31 * time.Second)
	push(0.19)
	h.s.TickPolicies(h.ctx)
	fs, err := h.admin.Firings(h.ctx, "chat")
	if err != nil || len(fs) != 1 || fs[0].Event != "fired" {
		t.Fatalf("firings %+v %v, want the rule fired once", fs, err)
	}
	h.s.Cycle(h.ctx)
	if s := state("chat"); s != "Running" {
		t.Fatalf("chat is %s after the rule fired, want Running (it takes a batch job's GPUs)", s)
	}
	evicted := 0
	for _, n := range []string{"batch-0", "batch-1"} {
		if state(n) == "Pending" {
			evicted++
		}
	}
	if evicted != 1 {
		t.Errorf("%d batch jobs evicted, want 1", evicted)
	}
	if w, _ := con.Why(h.ctx, "contoso", "steady"); w.State != "Running" {
		t.Errorf("contoso's guaranteed work is %s; priority must not take another tenant's guarantee", w.State)
	}
}
