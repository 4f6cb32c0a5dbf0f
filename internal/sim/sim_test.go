package sim

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/examples"
)

// scenarioSim is a simulation of the scenario text under the default
// strategy, seed 1, over the scenario's own duration.
func scenarioSim(t *testing.T, file, src string) (*Sim, *Scenario) {
	t.Helper()
	sc, err := ParseScenario(file, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	st, err := LoadStrategy(examples.FS, "strategies/default")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sc, st, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s, sc
}

func runShort(t testing.TB, strategy string, days int, seed uint64) *StrategyResult {
	t.Helper()
	sc, err := LoadScenario("")
	if err != nil {
		t.Fatal(err)
	}
	st, err := LoadStrategy(examples.FS, "strategies/"+strategy)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sc, st, Options{Seed: seed, Duration: time.Duration(days) * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return s.Run()
}

func TestConservationAndEnds(t *testing.T) {
	for _, name := range []string{"static", "dynamic", "hybrid"} {
		r := runShort(t, name, 2, 1)
		// Allocated GPU-hours come from each run's start and end; idle
		// GPU-hours from per-step free capacity: two independent books.
		if got := r.AllocatedGPUHours + r.IdleGPUHours; math.Abs(got-r.CapacityGPUHours) > 1e-6*r.CapacityGPUHours {
			t.Errorf("%s: allocated %.2f + idle %.2f = %.2f GPU-h, capacity × time = %.2f", name, r.AllocatedGPUHours, r.IdleGPUHours, got, r.CapacityGPUHours)
		}
		if r.JobsEnded+r.JobsActiveAtEnd != r.JobsSubmitted {
			t.Errorf("%s: %d submitted, %d ended + %d active", name, r.JobsSubmitted, r.JobsEnded, r.JobsActiveAtEnd)
		}
		b, _ := json.MarshalIndent(r, "", " ")
		t.Logf("%s", b)
	}
}

func TestDeterministic(t *testing.T) {
	a, _ := json.Marshal(runShort(t, "hybrid", 1, 7))
	b, _ := json.Marshal(runShort(t, "hybrid", 1, 7))
	if !bytes.Equal(a, b) {
		t.Fatalf("same seed, different results:\n%s\n%s", a, b)
	}
}

// TestRoutingMethods: with priority routing every user goes to the first
// region while it is healthy, so the second region serves (almost) nothing;
// with performance routing each region serves its own users.
func TestRoutingMethods(t *testing.T) {
	served := func(routing string) [2]float64 {
		sc, err := LoadScenario("")
		if err != nil {
			t.Fatal(err)
		}
		sc.Services[0].Routing = routing
		sc.Generators = nil
		st, _ := LoadStrategy(examples.FS, "strategies/hybrid")
		s, err := New(sc, st, Options{Seed: 1, Duration: 6 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		var got [2]float64
		s.afterStep = func() {
			for i := range got {
				got[i] += s.services[0].results[i].Arrivals
			}
		}
		s.Run()
		return got
	}
	perf, prio := served("performance"), served("priority")
	if perf[1] < 0.3*(perf[0]+perf[1]) {
		t.Errorf("performance routing: westus2 served %.0f of %.0f requests", perf[1], perf[0]+perf[1])
	}
	if prio[1] > 0.05*(prio[0]+prio[1]) {
		t.Errorf("priority routing: westus2 served %.0f of %.0f requests", prio[1], prio[0]+prio[1])
	}
}

// TestNamedTrainingRuns: the flagship run is followed to the end of the
// scenario: never preempted and running, its progress is the time it ran
// over its runtime; preempted, its longest wait shows how long it starved.
func TestNamedTrainingRuns(t *testing.T) {
	for _, name := range []string{"hybrid", "dynamic"} {
		r := runShort(t, name, 3, 1)
		if len(r.TrainingJobs) != 1 {
			t.Fatalf("%s: training_jobs %+v, want the flagship alone", name, r.TrainingJobs)
		}
		tj := r.TrainingJobs[0]
		t.Logf("%s: %s; preemptions %d, longest wait %.1f h, lost %.0f GPU-h", name, tj, tj.Preemptions, tj.LongestWaitH, tj.LostGPUHours)
		if tj.Finished || tj.GPUs != 256 || tj.Progress <= 0 || tj.Progress >= 1 {
			t.Errorf("%s: %+v: want 256 GPUs, unfinished after 3 days, partly done", name, tj)
		}
		// Submitted at 1h with a 432h runtime: at most 71h of it can be done.
		if done := tj.Progress * 432; done > 71.05 { // progress is rounded to 4 digits
			t.Errorf("%s: progress %.4f is %.1f h of work in 71 h", name, tj.Progress, done)
		}
		if tj.Preemptions == 0 && tj.LongestWaitH < 1 {
			if done := tj.Progress * 432; done < 70 {
				t.Errorf("%s: never preempted and never waiting, yet only %.1f h done of 71", name, done)
			}
		}
		if tj.Preemptions > 0 && (len(tj.PreemptedBy) == 0 || tj.PreemptedBy[0].Hour <= 0 || tj.PreemptedBy[0].Reason == "" || !strings.Contains(tj.String(), "preempted at hour")) {
			t.Errorf("%s: preempted %d times, but preempted_by %+v and %q do not say when and by whom", name, tj.Preemptions, tj.PreemptedBy, tj.String())
		}
		if tj.Preemptions > 0 && tj.LongestWaitH <= 0 {
			t.Errorf("%s: preempted %d times with no wait", name, tj.Preemptions)
		}
	}
}

// TestOverflowIsTheLayer: a strategy without an overflow layer (static
// widens no class) overflows nothing, however often work lands on a
// later choice of its own list; hybrid's overflow is counted by
// destination.
func TestOverflowIsTheLayer(t *testing.T) {
	if r := runShort(t, "static", 2, 1); r.Overflows != 0 {
		t.Errorf("static: %d overflows (%v), want 0: it has no overflow layer", r.Overflows, r.OverflowByDestination)
	}
	r := runShort(t, "hybrid", 3, 1)
	n := 0
	for dest, c := range r.OverflowByDestination {
		n += c
		if !strings.HasSuffix(dest, "/centralus") && !strings.HasPrefix(dest, "H100-80G/") {
			t.Errorf("hybrid overflowed %d to %s, which the workloads list themselves", c, dest)
		}
	}
	if n != r.Overflows {
		t.Errorf("hybrid: %d overflows, %d by destination", r.Overflows, n)
	}
	t.Logf("hybrid, 3 days: %d overflows %v", r.Overflows, r.OverflowByDestination)
}
