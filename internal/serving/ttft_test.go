package serving

import (
	"testing"
	"time"
)

// The coding assistant's calibration: on H100 with 95% of each prompt in
// the per-user context cache, users in the serving region see a time to
// first token p99 near 50 ms when replicas keep up (the mission's
// uncontended figure), and past 200 ms when the same load gets 10% fewer
// replicas than it needs.
func TestCodingAssistantTTFT(t *testing.T) {
	sizes := codeSizes(t)
	p := h100(t)
	p.ContextCacheHit = 0.95
	full, err := ProfileDist(p, sizes)
	if err != nil {
		t.Fatal(err)
	}
	first, err := ProfileFirstTokenDist(p, sizes)
	if err != nil {
		t.Fatal(err)
	}
	if full.MeanOccupancy() != first.MeanOccupancy() || full.OccupancySCV() != first.OccupancySCV() {
		t.Fatalf("first-token and full distributions have different occupancy: %v, %v", full.MeanOccupancy(), first.MeanOccupancy())
	}
	user := func(in StepInput) time.Duration {
		r := first.Step(in)
		return MixQuantile([]Part{{Weight: 1, Shift: UserAccessRTT, Resp: &r.Response}}, 0.99)
	}
	const c = 200
	rate := Rate(0.8 * float64(first.Capacity(c)))
	calm := user(StepInput{Rate: rate, Replicas: c, Step: time.Minute})
	off, err := ProfileDist(h100(t), sizes)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("occupancy %v (cache off: %v); TTFT p99 at 80%% load %v", full.MeanOccupancy(), off.MeanOccupancy(), calm)
	if calm < 40*time.Millisecond || calm > 60*time.Millisecond {
		t.Errorf("uncontended TTFT p99 %v, want about 50 ms", calm)
	}
	// Contention: the same load on replicas with 5% less capacity than it
	// needs builds a backlog within the first step.
	short := int(float64(rate)/float64(first.Capacity(1))/1.05) + 0
	r := first.Step(StepInput{Rate: rate, Replicas: short, Step: time.Minute, MaxWait: 30 * time.Second})
	hot := MixQuantile([]Part{{Weight: 1, Shift: UserAccessRTT, Resp: &r.Response}}, 0.99)
	t.Logf("TTFT p99 on %d replicas instead of %d: %v", short, c, hot)
	if hot < 200*time.Millisecond {
		t.Errorf("contended TTFT p99 %v, want past 200 ms", hot)
	}
}
