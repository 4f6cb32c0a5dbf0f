package sim

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// elasticScenario: one elastic training job (min 1, max 4 replicas of 8
// H100, 4 h of work at 1 replica) alone on 4 nodes, and at 1 h another
// tenant's job claiming two nodes of its guarantee for an hour.
const elasticScenario = `name: elastic
duration: 6h
cycle: 5m
fleet:
  regions:
    - name: eastus
      zones:
        - name: z1
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 4}]
tenants:
  - name: ml
    quota: [{flavor: H100-80G, region: eastus, limit: 32}]
  - name: prod
    quota: [{flavor: H100-80G, region: eastus, guaranteed: 16, limit: 16}]
generators:
  - {name: train, kind: training, tenant: ml, flavors: [H100-80G], regions: [eastus], count: 1, at: 0s,
     sizes: [{gpus: 8, replicas: 1, max_replicas: 4, weight: 1}], runtime_min: 4h, runtime_max: 4h}
  - {name: claim, tenant: prod, flavors: [H100-80G], regions: [eastus], count: 1, at: 1h,
     sizes: [{gpus: 8, replicas: 2, weight: 1}], runtime_min: 1h, runtime_max: 1h}
`

// TestElasticTraining: an elastic training job (opt-in, max_replicas)
// grows into the idle nodes, progresses as fast as its replicas allow,
// gives two nodes back to the guaranteed claim instead of being preempted,
// and so finishes long before the 4 h its work takes at its min; the
// books still balance, and the same seed gives the same results. Without
// max_replicas the same job takes its 4 h.
func TestElasticTraining(t *testing.T) {
	run := func(src string) (*StrategyResult, map[string]time.Duration, []int) {
		s, _ := scenarioSim(t, "elastic.yaml", src)
		seen := map[string]*job{}
		var sizes []int
		s.afterStep = func() {
			for _, j := range s.jobs {
				seen[j.class] = j
				if j.class == "train" && !j.done && j.w.Running != nil && (len(sizes) == 0 || sizes[len(sizes)-1] != len(j.w.Running.Replicas)) {
					sizes = append(sizes, len(j.w.Running.Replicas))
				}
			}
		}
		r := s.Run()
		done := map[string]time.Duration{}
		for c, j := range seen {
			if !j.completedAt.IsZero() {
				done[c] = j.completedAt.Sub(s.sc.Start)
			}
		}
		return r, done, sizes
	}
	r, done, sizes := run(elasticScenario)
	t.Logf("sizes %v, done %v", sizes, done)
	if got := r.AllocatedGPUHours + r.IdleGPUHours; math.Abs(got-r.CapacityGPUHours) > 1e-6*r.CapacityGPUHours {
		t.Errorf("allocated %.2f + idle %.2f GPU-h, capacity × time %.2f", r.AllocatedGPUHours, r.IdleGPUHours, r.CapacityGPUHours)
	}
	if len(sizes) < 3 || sizes[0] != 1 || sizes[1] != 4 || sizes[2] != 2 {
		t.Errorf("train's sizes %v: want 1, grown to 4, shrunk to 2 for the claim", sizes)
	}
	if r.Preemptions != 0 {
		t.Errorf("%d preemptions: the claim should have taken growth back", r.Preemptions)
	}
	// 5 min at 1 replica, 55 min at 4, then 2: 4 h of work done by ~1h10.
	if d, ok := done["train"]; !ok || d > 90*time.Minute || d < time.Hour {
		t.Errorf("train done at %v, want between 1h and 1h30", d)
	}
	if d, ok := done["claim"]; !ok || d > 2*time.Hour+10*time.Minute {
		t.Errorf("claim done at %v, want ~2h (placed at once)", d)
	}
	a, _ := json.Marshal(r)
	again, _, _ := run(elasticScenario)
	if b, _ := json.Marshal(again); !bytes.Equal(a, b) {
		t.Errorf("same scenario and seed, different results")
	}
	_, fixed, _ := run(strings.Replace(elasticScenario, ", max_replicas: 4", "", 1))
	if d := fixed["train"]; d < 4*time.Hour {
		t.Errorf("fixed train done at %v, want its 4 h", d)
	}
}

func TestElasticSizeValidation(t *testing.T) {
	bad := strings.Replace(elasticScenario, "max_replicas: 4", "max_replicas: 4, step: 2", 1)
	if _, err := ParseScenario("s.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "generators[0].sizes[0].step") {
		t.Errorf("step 2 from 1 to 4: %v, want a problem naming generators[0].sizes[0].step", err)
	}
	bad = strings.Replace(elasticScenario, "max_replicas: 4", "max_replicas: 0, step: 1", 1)
	if _, err := ParseScenario("s.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "sizes[0].max_replicas") {
		t.Errorf("max below min: %v", err)
	}
}
