package sim

import (
	"math"
	"testing"
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
