package sim

import (
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// busyRun runs a day of the default scenario under a policy file.
func busyRun(t *testing.T, rules string, seed uint64, afterStep func(*Sim)) *Sim {
	t.Helper()
	sc, err := LoadScenario("")
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{
		"s/busy.yaml":        {Data: []byte("name: busy\ndescription: busy utilization rules\npolicies: busy-policy.yaml\n")},
		"s/busy-policy.yaml": {Data: []byte(rules)},
	}
	st, err := LoadStrategy(fsys, "s/busy")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sc, st, Options{Seed: seed, Duration: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if afterStep != nil {
		s.afterStep = func() { afterStep(s) }
	}
	s.Run()
	return s
}

// TestBusyUtilizationRule: a rule keyed to busy_utilization is tested in
// the simulator: the run samples it from its model (each running job's
// GPUs at its kind's ratio, the rest idle), never above the allocation
// utilization, the rule fires on it, and the same seed gives the same
// firings.
func TestBusyUtilizationRule(t *testing.T) {
	const rules = `scheduling_policies:
  - name: busy
    conditions:
      - resource_type: gpu_cluster
        utilization_threshold: 30%
        utilization: busy
    actions:
      - type: notify
        message: the GPUs are busy
`
	steps := 0
	check := func(s *Sim) {
		if !s.pol.busy {
			t.Fatal("the run does not sample busy utilization for a rule that reads it")
		}
		// A naive model of the same thing: Σ ratio × GPUs over the fleet's GPUs.
		var busy, used, capacity float64
		for _, j := range s.jobs {
			if j.done || j.w.Running == nil {
				continue
			}
			g := float64(j.gpus()) / resource.PerGPU
			busy += g * s.busyRatio(j)
			used += g
		}
		for _, n := range s.pol.nodes {
			capacity += float64(n.GPUs)
		}
		obs := s.busySample(s.pol.nodes)
		if len(obs) == 0 || obs[0].Target != policy.Cluster || obs[0].Metric != policy.MetricBusyUtilization {
			t.Fatalf("%v: first observation %v, want the cluster's busy utilization", s.now, obs)
		}
		if d := obs[0].Value - busy/capacity; d > 1e-9 || d < -1e-9 {
			t.Fatalf("%v: busy utilization %v, the naive model %v", s.now, obs[0].Value, busy/capacity)
		}
		if obs[0].Value > used/capacity+1e-9 {
			t.Fatalf("%v: busy %v above allocation %v", s.now, obs[0].Value, used/capacity)
		}
		steps++
	}
	s := busyRun(t, rules, 1, check)
	if steps == 0 {
		t.Fatal("no step checked")
	}
	var fired []time.Time
	for _, f := range s.pol.firing {
		if f.Event != policy.EventFired {
			continue
		}
		fired = append(fired, f.Time)
		if v := f.Values[0]; v.Metric != policy.MetricBusyUtilization || v.Value <= 0.30 || v.Value > 1 {
			t.Errorf("%v: fired on %v, want busy_utilization over 30%%", f.Time, f.Values)
		}
	}
	if len(fired) == 0 {
		t.Fatal("the busy rule never fired in a day of the default scenario")
	}
	again := busyRun(t, rules, 1, nil)
	var fired2 []time.Time
	for _, f := range again.pol.firing {
		if f.Event == policy.EventFired {
			fired2 = append(fired2, f.Time)
		}
	}
	if d := cmp.Diff(fired, fired2); d != "" {
		t.Errorf("same seed, other firings (-first +second):\n%s", d)
	}
	t.Logf("%d busy firings in a day, first at %v", len(fired), fired[0])
}

// TestNoBusySampleWithoutBusyRule: a run whose policy does not read
// busy_utilization does not model it (its outputs stay those of before).
func TestNoBusySampleWithoutBusyRule(t *testing.T) {
	s := busyRun(t, `policies:
  - name: alloc
    when: {metric: utilization, above: 30%}
    then: [{type: notify, message: allocated}]
`, 1, nil)
	if s.pol.busy {
		t.Fatal("samples busy utilization for no rule")
	}
	if _, ok := s.pol.windows.Value(policy.Query{Metric: policy.MetricBusyUtilization, Target: policy.Cluster}); ok {
		t.Fatal("busy utilization in the windows of a run with no busy rule")
	}
}
