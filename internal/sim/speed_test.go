package sim

import (
	"reflect"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy/effects"
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
