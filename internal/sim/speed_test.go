package sim

import (
	"reflect"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/examples"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/policy/effects"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestMeasureFromSame checks, at every step of a busy run, that the metric
// values read from the policy sample's totals (measureFrom, what a run
// uses) are bit for bit those of measure's own scan of the jobs.
func TestMeasureFromSame(t *testing.T) {
	sc, err := LoadScenario("")
	if err != nil {
		t.Fatal(err)
	}
	for _, strategy := range []string{"dynamic"} { // the strategies with policies
		s := newSimFor(t, sc, strategy, 12*time.Hour)
		if s.pol == nil {
			t.Fatalf("%s has no policies", strategy)
		}
		steps, busy := 0, 0
		s.afterStep = func() {
			var scan, fromTotals metricValues
			s.measure(&scan)
			_, tot := effects.SampleTotals(s.runtimeWorld(), s.pol.tenants, nil)
			s.measureFrom(&fromTotals, tot)
			if !reflect.DeepEqual(scan, fromTotals) {
				t.Fatalf("%s at %v: measure %+v, measureFrom %+v", strategy, s.now, scan, fromTotals)
			}
			steps++
			if scan.utilization > 0 && scan.pendingGPUs > 0 && len(scan.tenantUtil) > 1 {
				busy++
			}
		}
		s.Run()
		if busy < steps/2 {
			t.Fatalf("%s: only %d of %d steps had work running and pending in several tenants", strategy, busy, steps)
		}
	}
}

// TestTallySameAsScan checks, at every step of busy runs, that the policy
// sample from the run's GPU tally (what a run uses) is bit for bit the
// scan of every live job (effects.SampleTotals), observations and the
// metric values read from the totals both.
func TestTallySameAsScan(t *testing.T) {
	sc, err := LoadScenario("")
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range []uint64{1, 7} {
		st, err := LoadStrategy(examples.FS, "strategies/dynamic")
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(sc, st, Options{Seed: seed, Duration: 36 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		steps, tallied := 0, 0
		s.afterStep = func() {
			steps++
			world := s.runtimeWorld()
			wantObs, wantTot := effects.SampleTotals(world, s.pol.tenants, nil)
			gotObs, gotTot := s.sample(world)
			if _, ok := s.tally.totals(); ok {
				tallied++
			}
			if !reflect.DeepEqual(gotObs, wantObs) {
				t.Fatalf("seed %d at %v: observations\n got %+v\nwant %+v", seed, s.now, gotObs, wantObs)
			}
			var got, want metricValues
			s.measureFrom(&got, gotTot)
			s.measureFrom(&want, wantTot)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d at %v: metric values %+v, scan %+v", seed, s.now, got, want)
			}
		}
		s.Run()
		if tallied < steps {
			t.Fatalf("seed %d: the tally was exact at %d of %d steps only", seed, tallied, steps)
		}
	}
}

// TestTallyInexactScans checks that a job whose GPUs are not a multiple
// of an eighth of a GPU turns the tally off (the run scans) while it lives.
func TestTallyInexactScans(t *testing.T) {
	tl := newGPUTally(nil)
	j := &job{w: &workload.Workload{Spec: workload.Spec{Name: "x", Tenant: "a", GPUs: 100, Replicas: 1}}}
	tl.track(j)
	if _, ok := tl.totals(); ok {
		t.Fatal("a job of 0.1 GPU left the tally exact")
	}
	j.done = true
	tl.track(j)
	tot, ok := tl.totals()
	if !ok {
		t.Fatal("the tally stayed inexact after the job ended")
	}
	if v := tot.Pending(policy.Cluster); v != 0 {
		t.Fatalf("pending %v after the job ended", v)
	}
}
