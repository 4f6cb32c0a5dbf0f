package sim

import (
	"math"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/examples"
	"github.com/arbiterhq/arbiter/internal/config"
)

// TestCostReportConservesAllocation: the cost report the simulator
// meters (cost.csv) counts every GPU-hour the run allocated, no more, for
// each strategy; cost never exceeds the list cost.
func TestCostReportConservesAllocation(t *testing.T) {
	for _, name := range []string{"static", "hybrid"} {
		r := runShort(t, name, 1, 1)
		got, want := r.Cost.Total.GPUHours, r.AllocatedGPUHours
		if want <= 0 || math.Abs(got-want) > 1e-6*want+0.01 {
			t.Errorf("%s: metered %.4f GPU-hours, allocated %.4f", name, got, want)
		}
		if r.Cost.Total.Cost <= 0 || r.Cost.Total.Cost > r.Cost.Total.ListCost+1e-6 || len(r.Cost.Rows) == 0 {
			t.Errorf("%s: cost %.2f, list %.2f, %d rows", name, r.Cost.Total.Cost, r.Cost.Total.ListCost, len(r.Cost.Rows))
		}
	}
}

// TestCostReportPricePlans: a scenario's metering section prices its cost
// report: a 20% discount for every tenant takes a fifth off the cost and
// leaves the GPU-hours and the list cost.
func TestCostReportPricePlans(t *testing.T) {
	run := func(m *config.MeteringSpec) *StrategyResult {
		t.Helper()
		sc, err := LoadScenario("")
		if err != nil {
			t.Fatal(err)
		}
		sc.Metering = m
		if m != nil && m.Plans == nil {
			for _, tn := range sc.Tenants {
				m.Plans = append(m.Plans, config.PlanSpec{Tenant: tn.Name, Discount: "20%"})
			}
		}
		st, err := LoadStrategy(examples.FS, "strategies/static")
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(sc, st, Options{Seed: 1, Duration: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return s.Run()
	}
	base, off := run(nil), run(&config.MeteringSpec{})
	b, o := base.Cost.Total, off.Cost.Total
	if b.Cost <= 0 || math.Abs(o.Cost-0.8*b.Cost) > 1e-6*b.Cost || math.Abs(o.GPUHours-b.GPUHours) > 1e-9*b.GPUHours || math.Abs(o.ListCost-b.ListCost) > 1e-9*b.ListCost {
		t.Errorf("with 20%% off: %+v; without: %+v", o, b)
	}
}
