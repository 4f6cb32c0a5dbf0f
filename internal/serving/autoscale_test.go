package serving

import (
	"testing"
	"time"
)

func TestAutoscalerNeeded(t *testing.T) {
	d, err := ProfileDist(h100(t), codeSizes(t))
	if err != nil {
		t.Fatal(err)
	}
	const slo = 6 * time.Second
	a, err := NewAutoscaler(d, AutoscalerConfig{SLO: slo})
	if err != nil {
		t.Fatal(err)
	}
	for _, rate := range []Rate{0.5, 5, 50, 350, 900, 3000} {
		c, feasible := a.Needed(rate)
		if !feasible {
			t.Fatalf("rate %v: infeasible", rate)
		}
		// The answer meets the SLO in the model and one fewer does not.
		at := func(c int) time.Duration {
			return d.Step(StepInput{Rate: rate, Replicas: c, Step: time.Minute}).P99
		}
		if p := at(c); p > slo {
			t.Errorf("rate %v: %d replicas give p99 %v > %v", rate, c, p, slo)
		}
		// (One fewer may be unstable, ρ ≥ 1, where a single step starting
		// empty understates the wait: only stable counts are compared.)
		if c > 1 && rate < d.Capacity(c-1) {
			if p := at(c - 1); p <= slo {
				t.Errorf("rate %v: %d replicas already give p99 %v", rate, c-1, p)
			}
		}
		t.Logf("rate %6.1f/s: %4d H100 replicas (ρ = %.2f)", float64(rate), c, float64(rate/d.Capacity(c)))
	}
	// A utilisation target caps ρ.
	u, _ := NewAutoscaler(d, AutoscalerConfig{SLO: slo, TargetUtilization: 0.8})
	if c, _ := u.Needed(900); float64(900/d.Capacity(c)) > 0.8 || float64(900/d.Capacity(c-1)) <= 0.8 {
		t.Errorf("utilisation target 0.8: %d replicas at 900/s", c)
	}
	if c, _ := a.Needed(0); c != 0 {
		t.Errorf("no load needs %d replicas", c)
	}
	// An SLO below the bare p99 latency is infeasible: the answer still
	// keeps queueing small.
	b, _ := NewAutoscaler(d, AutoscalerConfig{SLO: time.Second})
	c, feasible := b.Needed(100)
	if feasible || float64(Rate(100)/d.Capacity(c)) > 0.95 {
		t.Errorf("1 s SLO: feasible %v with %d replicas", feasible, c)
	}
}

func TestAutoscalerDecide(t *testing.T) {
	d, err := ProfileDist(h100(t), codeSizes(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := AutoscalerConfig{SLO: 6 * time.Second, MinReplicas: 2, MaxReplicas: 100, MaxScaleUp: 10, MaxScaleDown: 3, DownStabilization: 3}
	a, err := NewAutoscaler(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	need := func(r Rate) int { c, _ := a.Needed(r); return c }
	hi, lo := need(600), need(100)
	steps := []struct {
		rate Rate
		want func(cur int, got Decision) bool
		what string
	}{
		{600, func(cur int, got Decision) bool { return got.Replicas == cur+10 && got.Limited }, "scale up by at most 10"},
		{600, func(cur int, got Decision) bool { return got.Replicas == min(cur+10, hi) }, "keep climbing"},
		{100, func(cur int, got Decision) bool { return got.Replicas == cur }, "hold: recent recommendations were higher"},
		{100, func(cur int, got Decision) bool { return got.Replicas == cur }, "hold: the window still holds a 600/s recommendation"},
		{100, func(cur int, got Decision) bool { return got.Replicas == max(lo, cur-3) }, "scale down by at most 3"},
		{0, func(cur int, got Decision) bool { return got.Replicas >= cfg.MinReplicas }, "never below min"},
		{1e6, func(cur int, got Decision) bool { return got.Needed > 100 && got.Replicas <= 100 }, "never above max"},
	}
	cur := 2
	for i, s := range steps {
		got := a.Decide(cur, s.rate, 0)
		if !s.want(cur, got) {
			t.Fatalf("step %d (%s): from %d at %v/s got %+v (need at 600/s %d, 100/s %d)", i, s.what, cur, s.rate, got, hi, lo)
		}
		cur = got.Replicas
	}
	// A backlog adds capacity to drain it.
	b, _ := NewAutoscaler(d, AutoscalerConfig{SLO: 6 * time.Second, DrainTime: time.Minute})
	if x, y := b.Decide(10, 100, 0), b.Decide(10, 100, 6000); y.Needed <= x.Needed {
		t.Errorf("backlog of 6000 did not raise the need: %d vs %d", y.Needed, x.Needed)
	}
	for i, bad := range []AutoscalerConfig{{}, {SLO: time.Second, Quantile: 1}, {SLO: time.Second, TargetUtilization: 2}, {SLO: time.Second, MinReplicas: 5, MaxReplicas: 2}, {SLO: time.Second, MaxScaleUp: -1}} {
		if _, err := NewAutoscaler(d, bad); err == nil {
			t.Errorf("case %d: bad config accepted", i)
		}
	}
}

// BenchmarkAutoscalerDecide is one decision at a slowly varying load (the
// search starts from the previous answer), around 60 H100 replicas.
func BenchmarkAutoscalerDecide(b *testing.B) {
	d, err := ProfileDist(h100(b), codeSizes(b))
	if err != nil {
		b.Fatal(err)
	}
	a, _ := NewAutoscaler(d, AutoscalerConfig{SLO: 6 * time.Second, MaxScaleDown: 4, DownStabilization: 5})
	rates := make([]Rate, 64)
	for i := range rates {
		rates[i] = Rate(500 + 5*i)
	}
	if c, ok := a.Needed(rates[0]); c < 40 || !ok {
		b.Fatalf("needed %d", c)
	}
	b.ReportAllocs()
	i, cur := 0, 50
	for b.Loop() {
		cur = a.Decide(cur, rates[i&63], 0).Replicas
		i++
	}
}

// BenchmarkAutoscalerNeededCold is the replica search with no previous
// answer to start from.
func BenchmarkAutoscalerNeededCold(b *testing.B) {
	d, err := ProfileDist(h100(b), codeSizes(b))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		a := Autoscaler{cfg: AutoscalerConfig{SLO: 6 * time.Second, Quantile: 0.99}, d: d}
		a.Needed(700)
	}
}
