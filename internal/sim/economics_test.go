package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/examples"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// The published Azure VM credit tiers (99.99% commitment).
func TestSLACreditTiers(t *testing.T) {
	for _, c := range []struct{ uptime, want float64 }{
		{1, 0}, {0.9999, 0}, {0.99989, 0.10}, {0.99, 0.10}, {0.98999, 0.25}, {0.95, 0.25}, {0.9499, 1}, {0, 1},
	} {
		if got := slaCreditShare(c.uptime); got != c.want {
			t.Errorf("uptime %v: credit %v, want %v", c.uptime, got, c.want)
		}
	}
}

// newTestSim is the contention scenario under static, not run: a world
// whose catalog and end time the economics read.
func newTestSim(t *testing.T) *Sim {
	t.Helper()
	sc, err := LoadScenario("")
	if err != nil {
		t.Fatal(err)
	}
	st, err := LoadStrategy(examples.FS, "strategies/static")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sc, st, Options{Seed: 1, Duration: 30 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func vmJob(s *Sim, class string, preemptible bool, prio workload.Priority) *job {
	w := &workload.Workload{Spec: workload.Spec{Name: workload.ID(class), Kind: workload.KindVM, Priority: prio, Preemptible: preemptible,
		GPUs: resource.GPUs(8), Replicas: 1, Flavors: []fleet.ModelID{"H100-80G"}, Regions: []string{"eastus"}}, SubmittedAt: s.sc.Start}
	return &job{w: w, class: class, customer: true, submitted: s.sc.Start, remaining: 10 * time.Hour, basePriority: prio, basePreempt: preemptible,
		baseRegions: []string{"eastus"}, declared: map[string]bool{"H100-80G/eastus": true}}
}

// Each line of the account, by hand: an ND H100 v5 in eastus is $98.32/h
// for 8 GPUs, $12.29 per GPU-hour on demand.
func TestEconomicsByHand(t *testing.T) {
	s := newTestSim(t)
	const perGPUH = 98.32 / 8
	at := func(h float64) time.Time { return s.sc.Start.Add(time.Duration(h * float64(time.Hour))) }
	var e econ

	// A refused SLA VM: 10 h × 8 GPUs lost, and a 100% credit of it.
	e.refused(s, vmJob(s, "enterprise_vms", false, workload.PriorityCritical))
	// A refused dev instance (preemptible: no SLA): lost revenue only.
	e.refused(s, vmJob(s, "developer_instances", true, workload.PriorityLow))
	lost := 2 * 10 * 8 * perGPUH
	if math.Abs(e.lost-lost) > 1e-6 || math.Abs(e.credits-lost/2) > 1e-6 {
		t.Fatalf("lost %.2f credits %.2f, want %.2f and %.2f", e.lost, e.credits, lost, lost/2)
	}

	// An SLA VM that ran 10 h, was preempted, waited 1 h and ran 9 h more:
	// uptime 19/20 = 95% → the 25% tier of its 20 h fee.
	vm := vmJob(s, "enterprise_vms", false, workload.PriorityCritical)
	vm.w.Running = &workload.Assignment{Flavor: "H100-80G", Region: "eastus"}
	e.ran(s, vm, at(0), at(10))
	vm.preempts = 1
	e.ran(s, vm, at(11), at(20))
	vm.done = true
	// Overflow: a job that lists H100/eastus placed by the overflow layer
	// on H100/centralus pays the price difference per GPU-hour.
	ov := vmJob(s, "batch_jobs", true, workload.PriorityLow)
	ov.overflowed = true
	ov.w.Running = &workload.Assignment{Flavor: "H100-80G", Region: "centralus"}
	e.ran(s, ov, at(0), at(2))
	// Internal training.
	tr := &job{w: &workload.Workload{Spec: workload.Spec{Kind: workload.KindTraining, GPUs: resource.GPUs(8), Replicas: 4, Flavors: []fleet.ModelID{"A100-80G"}}}, class: "training_jobs"}
	tr.w.Running = &workload.Assignment{Flavor: "A100-80G", Region: "eastus"}
	e.ran(s, tr, at(0), at(10))

	got := e.economics(s, 1234)
	credit := lost/2 + 0.25*20*8*perGPUH
	if math.Abs(got.SLACreditsUSD-math.Round(credit)) > 0.5 {
		t.Errorf("credits %v, want %.0f", got.SLACreditsUSD, credit)
	}
	here, _ := s.pricePerGPUHour("H100-80G", "centralus", false, false)
	if want := math.Round(2 * 8 * (here - perGPUH)); got.OverflowPremiumUSD != want || want == 0 {
		t.Errorf("overflow premium %v, want %v (centralus %.3f vs eastus %.3f per GPU-hour)", got.OverflowPremiumUSD, want, here, perGPUH)
	}
	if want := math.Round(320 * s.sc.Economics.InternalGPUHourUSD); got.InternalTrainingValueUSD != want || want == 0 {
		t.Errorf("internal training value %v, want %v", got.InternalTrainingValueUSD, want)
	}
	if want := math.Round(19 * 8 * perGPUH); got.RevenueByClassUSD["enterprise_vms"] != want {
		t.Errorf("enterprise revenue %v, want %v", got.RevenueByClassUSD["enterprise_vms"], want)
	}
	if got.FleetCostUSD != 1234 || !got.FleetCostConstant {
		t.Errorf("fleet cost %+v", got)
	}
}

// Over real runs: the economics differ between strategies where their
// outcomes do, the fleet's cost does not, revenue by class adds up to the
// revenue, and refusals cost what they would have paid.
func TestEconomicsDifferByStrategy(t *testing.T) {
	byName := map[string]*StrategyResult{}
	for _, name := range []string{"static", "hybrid"} {
		r := runShort(t, name, 1, 1)
		byName[name] = r
		e := r.Economics
		var sum float64
		for _, v := range e.RevenueByClassUSD {
			sum += v
		}
		if math.Abs(sum-e.RevenueUSD) > float64(len(e.RevenueByClassUSD)) || math.Abs(e.RevenueUSD-r.RevenueUSD) > 1 {
			t.Errorf("%s: classes sum to %.0f, revenue %.0f, old revenue %.0f", name, sum, e.RevenueUSD, r.RevenueUSD)
		}
		if e.FleetCostUSD != r.CostUSD || !e.FleetCostConstant {
			t.Errorf("%s: fleet cost %v, cost %v", name, e.FleetCostUSD, r.CostUSD)
		}
		if (r.CustomerCapacityFailures > 0) != (e.RevenueLostUSD > 0) {
			t.Errorf("%s: %d failures, %v lost", name, r.CustomerCapacityFailures, e.RevenueLostUSD)
		}
		if e.InternalTrainingValueUSD <= 0 {
			t.Errorf("%s: internal training value %v", name, e.InternalTrainingValueUSD)
		}
		t.Logf("%s: %+v", name, e)
	}
	a, b := byName["static"].Economics, byName["hybrid"].Economics
	if a.FleetCostUSD != b.FleetCostUSD {
		t.Errorf("fleet cost differs: %v vs %v", a.FleetCostUSD, b.FleetCostUSD)
	}
	if a.RevenueUSD == b.RevenueUSD || a.RevenueByClassUSD["batch_jobs"] == b.RevenueByClassUSD["batch_jobs"] {
		t.Errorf("static and hybrid earn the same: %+v", a)
	}
}

func TestEconomicsScenarioErrors(t *testing.T) {
	sc := strings.Replace(string(ContentionYAML()), "internal_gpu_hour_usd: 1.56", "internal_gpu_hour_usd: -1", 1)
	_, err := ParseScenario("s.yaml", []byte(sc))
	if err == nil || !strings.Contains(err.Error(), "economics.internal_gpu_hour_usd") {
		t.Errorf("negative internal price: %v", err)
	}
}
