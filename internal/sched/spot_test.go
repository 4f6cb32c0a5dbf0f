package sched_test

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestSpotAdmission: spot work with a max price is placed only below 80%
// of it at a market price and at most at it at a policy's (firm) price;
// the reason names both prices. Work without a max price, or not spot,
// ignores the price.
func TestSpotAdmission(t *testing.T) {
	c, err := config.Parse("spot.yaml", []byte(`fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - {name: h, nodes: [{sku: Standard_ND96isr_H100_v5, count: 1}]}
tenants:
  - name: t
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		prio     workload.Priority
		max      float64
		price    float64
		firm     bool
		placed   bool
		contains string
	}{
		{"far above", workload.PrioritySpot, 0.01, 3.6875, false, false, "is $3.69/GPU-h, above max price $0.01"},
		{"within the headroom", workload.PrioritySpot, 4, 3.6875, false, false, "not below 80% of max price $4.00 (spot work starts only below $3.20/GPU-h)"},
		{"below the headroom", workload.PrioritySpot, 5, 3.6875, false, true, ""},
		{"firm at the max", workload.PrioritySpot, 4, 4, true, true, ""},
		{"firm above the max", workload.PrioritySpot, 4, 4.01, true, false, "is $4.01/GPU-h, above max price $4.00"},
		{"no max price", workload.PrioritySpot, 0, 100, false, true, ""},
		{"not spot", workload.PriorityNormal, 0.01, 100, false, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := c.Input()
			in.Now = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
			in.Workloads = []*workload.Workload{{Spec: workload.Spec{Name: "w", Tenant: "t", Priority: tc.prio, MaxPrice: tc.max,
				GPUs: resource.GPUs(1), Replicas: 1, Flavors: []fleet.ModelID{"H100-80G"}, Regions: []string{"eastus"}}}}
			in.SpotPrices = []sched.SpotPrice{{Model: "H100-80G", Region: "eastus", PerGPUHour: tc.price, Firm: tc.firm}}
			plan := sched.Schedule(in)
			if placed := len(plan.Placements) == 1; placed != tc.placed {
				t.Fatalf("placed %v, want %v (pending %+v)", placed, tc.placed, plan.Pending)
			}
			if !tc.placed && (len(plan.Pending) != 1 || plan.Pending[0].Code != sched.ReasonSpotPrice || !strings.Contains(plan.Pending[0].Reason, tc.contains)) {
				t.Fatalf("pending %+v, want SpotPrice saying %q", plan.Pending, tc.contains)
			}
		})
	}
}
