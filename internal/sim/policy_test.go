package sim

import (
	"testing"
	"testing/fstest"
	"time"

	"github.com/arbiterhq/arbiter/examples"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestOperatorsRulesInContention runs the dynamic strategy (the operators'
// two rules) over the contention scenario and checks that each rule fires
// for the reason it states and does what it says.
func TestOperatorsRulesInContention(t *testing.T) {
	sc, err := LoadScenario("")
	if err != nil {
		t.Fatal(err)
	}
	st, err := LoadStrategy(examples.FS, "strategies/dynamic")
	if err != nil {
		t.Fatal(err)
	}
	days := 8
	s, err := New(sc, st, Options{Seed: 1, Duration: time.Duration(days) * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var capChecks, batchChecks int
	var capSince time.Time
	s.afterStep = func() {
		// While ai_training_priority holds, developer instances stay within
		// 30% of what they had when it fired (from the first cycle after
		// it fired: the core enforces caps, as on the server), and batch
		// jobs are low priority and preemptible in the core's input.
		var limit float64
		found := false
		for _, c := range s.pol.eff.Limits {
			if c.Target.Name == "developer_instances" {
				limit, found = float64(c.Limit)/resource.PerGPU, true
			}
		}
		if !found {
			capSince = time.Time{}
			return
		}
		if capSince.IsZero() {
			capSince = s.now
		}
		if s.now.Sub(capSince) <= s.sc.Cycle {
			return
		}
		capChecks++
		if got := classGPUs(s, "developer_instances"); got > limit+1e-9 {
			t.Errorf("%v: developer_instances hold %.0f GPUs, cap %.0f", s.now, got, limit)
		}
		for _, j := range s.jobs {
			if !j.done && j.class == "batch_jobs" {
				batchChecks++
				if w, _ := s.pol.eff.Override(j.w); w.Priority != workload.PriorityLow || !w.Preemptible {
					t.Errorf("%v: batch job %s is %v preemptible=%v while migrated to the low-priority pool", s.now, j.w.Name, w.Priority, w.Preemptible)
				}
			}
		}
	}
	s.Run()
	var sla, training int
	for _, f := range s.Firings() {
		if f.Event != policy.EventFired {
			continue
		}
		// A firing's effect is its own rule's (reallocate puts no cap).
		for _, c := range f.Caps {
			if c.Hold.Rule != f.Rule {
				t.Errorf("%v: %s fired with the effect of rule %s: %s", f.Time, f.Rule, c.Hold.Rule, f.Effect)
			}
		}
		switch f.Rule {
		case "customer_sla_protection":
			sla++
			if f.Effect != "" {
				t.Errorf("%v: customer_sla_protection (a priority) with the effect %s", f.Time, f.Effect)
			}
			v := f.Values[0]
			if v.Metric != policy.MetricP95Latency || v.Value <= 0.150 || v.Held < 5*time.Minute {
				t.Errorf("customer_sla_protection fired on %v", f.Values)
			}
			if f.Recovered == 0 {
				continue // p99 was under its SLO at the firing
			}
			if f.Recovered < 0 {
				t.Errorf("%v: inference p99 %v never returned under its SLO %v", f.Time, f.WorstP99, f.SLO)
			} else {
				t.Logf("%v: p95 %.0f ms for %v; p99 %v > SLO %v, back under it after %v", f.Time, v.Value*1000, v.Held, f.WorstP99, f.SLO, f.Recovered)
			}
		case "ai_training_priority":
			training++
			v := f.Values[0]
			if v.Metric != policy.MetricUtilization || v.Value <= 0.85 {
				t.Errorf("ai_training_priority fired on %v", f.Values)
			}
			t.Logf("%v: utilization %.1f%%: %s", f.Time, v.Value*100, f.Effect)
			if len(f.Caps) != 1 || f.Caps[0].Target.Name != "developer_instances" {
				t.Errorf("%v: ai_training_priority fired with caps %+v, want one on developer_instances", f.Time, f.Caps)
			}
		}
	}
	if sla == 0 || training == 0 {
		t.Fatalf("in %d days: customer_sla_protection fired %d times, ai_training_priority %d times; both should", days, sla, training)
	}
	if capChecks == 0 || batchChecks == 0 {
		t.Fatalf("scale_down never checked (%d steps, %d batch jobs)", capChecks, batchChecks)
	}
	t.Logf("%d SLA firings, %d training-priority firings, cap held over %d steps", sla, training, capChecks)
}

// TestMigrateToRegion: a migrate action to a region moves the class's
// running jobs there (the core evicts those running elsewhere; they are
// placed again in the region) and keeps new ones there while in force.
func TestMigrateToRegion(t *testing.T) {
	sc, err := LoadScenario("")
	if err != nil {
		t.Fatal(err)
	}
	migrateBatch(t, sc, "region:centralus", migrating)
}

// TestMigrateToPool: in a fleet whose nodes carry pool labels, a migrate
// to a pool confines the class to that pool's nodes, as the server does.
func TestMigrateToPool(t *testing.T) {
	sc, err := LoadScenario("")
	if err != nil {
		t.Fatal(err)
	}
	// Label every centralus node "spare"; batch jobs accept centralus.
	for ri := range sc.Fleet.Regions {
		r := &sc.Fleet.Regions[ri]
		if r.Name != "centralus" {
			continue
		}
		for zi := range r.Zones {
			for bi := range r.Zones[zi].Blocks {
				for gi := range r.Zones[zi].Blocks[bi].Nodes {
					r.Zones[zi].Blocks[bi].Nodes[gi].Labels = map[string]string{"pool": "spare"}
				}
			}
		}
	}
	migrateBatch(t, sc, "pool:spare", migrating)
}

// migrateBatch runs a day of sc with a rule that, after 6 hours, migrates
// batch_jobs to dest (centralus or a pool of its nodes), and checks that
// batch jobs ran outside centralus before and, from three 5-minute cycles
// after the rule is in force (evicted in one, placed again in the next),
// only in it.
func migrateBatch(t *testing.T, sc *Scenario, dest string, inForce func(*Sim) bool) {
	t.Helper()
	fsys := fstest.MapFS{
		"s/move.yaml": {Data: []byte("name: move\ndescription: batch moves after 6h\npolicies: move-policy.yaml\n")},
		"s/move-policy.yaml": {Data: []byte(`policies:
  - name: move_batch
    when: {metric: utilization, of: cluster, above: 1%, for: 6h}
    then:
      - {type: migrate, target: class:batch_jobs, destination: ` + dest + `}
`)},
	}
	st, err := LoadStrategy(fsys, "s/move")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sc, st, Options{Seed: 1, Duration: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, checked := 0, 0
	var since time.Time
	s.afterStep = func() {
		if !inForce(s) {
			for _, j := range s.jobs {
				if !j.done && j.class == "batch_jobs" && j.w.Running != nil && j.w.Running.Region != "centralus" {
					elsewhere++
				}
			}
			return
		}
		if since.IsZero() {
			since = s.now
		}
		if s.now.Sub(since) < 15*time.Minute {
			return
		}
		for _, j := range s.jobs {
			if !j.done && j.class == "batch_jobs" && j.w.Running != nil {
				checked++
				if j.w.Running.Region != "centralus" {
					t.Errorf("%v: batch job %s runs in %s while migrated to %s", s.now, j.w.Name, j.w.Running.Region, dest)
				}
			}
		}
	}
	s.Run()
	if elsewhere == 0 || checked == 0 {
		t.Fatalf("batch jobs seen outside centralus before the rule: %d; checked after: %d; want both > 0", elsewhere, checked)
	}
}

// migrating reports whether a migrate is in force in s.
func migrating(s *Sim) bool { return s.pol.eff.Any() }

// classGPUs is the GPUs the running jobs of a class hold.
func classGPUs(s *Sim, class string) float64 {
	var g float64
	for _, j := range s.jobs {
		if !j.done && j.w.Running != nil && j.class == class {
			g += float64(j.gpus()) / resource.PerGPU
		}
	}
	return g
}
