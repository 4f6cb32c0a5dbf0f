package server

import (
	"fmt"
	"math"
	"net/http"
	"slices"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// pushable are the metrics policies read that only the outside world can
// measure; the server samples utilization and pending GPUs itself.
var pushable = []policy.Metric{policy.MetricP50Latency, policy.MetricP95Latency, policy.MetricP99Latency,
	policy.MetricQueueWait, policy.MetricSpotPrice, policy.MetricCapacityFailureRate}

const maxSamples = 1000

// pushMetrics takes measurements for the policies (admin): each sample is
// recorded at the server's time of arrival in the windows policies read.
func (s *Server) pushMetrics(w http.ResponseWriter, r *http.Request) error {
	if err := requireAdmin(r); err != nil {
		return err
	}
	var req api.MetricSamples
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if len(req.Samples) == 0 || len(req.Samples) > maxSamples {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "samples", "send 1 to %d samples, got %d", maxSamples, len(req.Samples))
	}
	type sample struct {
		m policy.Metric
		t policy.Target
		v float64
	}
	in := make([]sample, len(req.Samples))
	for i, x := range req.Samples {
		field := func(f string) string { return fmt.Sprintf("samples[%d].%s", i, f) }
		m, err := policy.ParseMetric(x.Metric)
		if err != nil {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field("metric"), "%v", err)
		}
		if !slices.Contains(pushable, m) {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field("metric"), "the server measures %s itself; push one of p50_latency, p95_latency, p99_latency, queue_wait, spot_price, capacity_failure_rate", m)
		}
		t, err := policy.ParseTarget(x.Target)
		if err != nil {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field("target"), "%v", err)
		}
		if t.Kind == policy.TargetUnresolved {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field("target"), "write the target's kind, e.g. service:%s", x.Target)
		}
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) || x.Value < 0 {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field("value"), "want a finite value of at least 0, got %v", x.Value)
		}
		in[i] = sample{m, t, x.Value}
	}
	now := s.now()
	pr := s.policies
	pr.mu.Lock()
	for _, x := range in {
		pr.windows.ObserveMetric(x.m, x.t, now, x.v)
	}
	pr.mu.Unlock()
	writeJSON(w, http.StatusOK, api.MetricsAccepted{Accepted: len(in)})
	return nil
}

// reprioritize returns the scheduler's workloads with the priority the
// set_priority actions in force give them (pending and running alike, as
// the simulator does), and whether any action applied. Matched workloads
// are copied; the others are shared.
func (pr *policyRunner) reprioritize(ws []*workload.Workload) ([]*workload.Workload, bool) {
	var acts []policy.Action
	pr.mu.Lock()
	for _, n := range sortedKeys(pr.active) {
		for _, a := range pr.active[n] {
			if a.Action.Type == policy.ActionSetPriority {
				acts = append(acts, a.Action)
			}
		}
	}
	pr.mu.Unlock()
	if len(acts) == 0 {
		return ws, false
	}
	out := ws
	copied := false
	for i, x := range ws {
		prio, ok := x.Priority, false
		for _, a := range acts { // later policies and rules win
			if targets(a.Target, x) {
				prio, ok = workload.Priority(a.Priority-1), true
			}
		}
		if !ok || prio == x.Priority {
			continue
		}
		if !copied {
			out, copied = slices.Clone(ws), true
		}
		c := *x
		c.Priority = prio
		out[i] = &c
	}
	return out, true
}

// targets reports whether a policy target names workload x: its tenant;
// its class (kind, priority class or "class" label); its "service" label;
// or a selector its labels satisfy.
func targets(t policy.Target, x *workload.Workload) bool {
	switch t.Kind {
	case policy.TargetTenant:
		return x.Tenant == t.Name
	case policy.TargetClass:
		return x.Kind.String() == t.Name || x.Priority.String() == t.Name || x.Labels["class"] == t.Name
	case policy.TargetService:
		return x.Labels["service"] == t.Name
	case policy.TargetSelector:
		for k, v := range t.Labels() {
			if x.Labels[k] != v {
				return false
			}
		}
		return true
	}
	return false
}

// drained returns the nodes the drain actions in force take out of
// service: those of a pool ("pool" label) or a region. The scheduler
// treats them as down (their work is evicted, they take none).
func (pr *policyRunner) drained(w *world) []fleet.NodeID {
	var acts []policy.Action
	pr.mu.Lock()
	for _, n := range sortedKeys(pr.active) {
		for _, a := range pr.active[n] {
			if a.Action.Type == policy.ActionDrain {
				acts = append(acts, a.Action)
			}
		}
	}
	pr.mu.Unlock()
	var out []fleet.NodeID
	for _, n := range w.Nodes {
		for _, a := range acts {
			if (a.Target.Kind == policy.TargetPool && n.Labels["pool"] == a.Target.Name) ||
				(a.Target.Kind == policy.TargetRegion && n.Region == a.Target.Name) {
				out = append(out, n.ID)
				break
			}
		}
	}
	return out
}
