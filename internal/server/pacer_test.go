package server

import (
	rtmetrics "runtime/metrics"
	"testing"
	"time"
)

// TestPacerRestsOnlyUnderContention: the loop rests three times a cycle's
// CPU time while more than 1% of the goroutine wake-ups of the last period
// waited over a millisecond for a CPU, and not at all while fewer did; a
// first period, or no histogram, rests as the loop always did.
func TestPacerRestsOnlyUnderContention(t *testing.T) {
	// Buckets as the runtime's: lower bounds, the last +Inf; 1 ms falls
	// in the third.
	buckets := []float64{0, 1e-6, 1e-3, 1, 1e300}
	counts := []uint64{0, 0, 0, 0}
	h := &rtmetrics.Float64Histogram{Buckets: buckets, Counts: counts}
	p := &pacer{read: func() *rtmetrics.Float64Histogram { return h }}
	const cost = 40 * time.Millisecond
	step := func(short, long uint64, want time.Duration) {
		t.Helper()
		counts[1] += short
		counts[2] += long
		if got := p.rest(cost); got != want {
			t.Errorf("%d short and %d long waits: rest %v, want %v", short, long, got, want)
		}
	}
	step(0, 0, 3*cost)    // the first read: no period yet
	step(1000, 0, 0)      // no goroutine waited for a CPU
	step(990, 10, 0)      // exactly 1%: not more
	step(989, 11, 3*cost) // more than 1%
	step(0, 0, 0)         // nothing woke up
	step(100, 100, 3*cost)
	counts[3] += 5 // waits of over a second count as long too
	step(0, 0, 3*cost)
	p.read = func() *rtmetrics.Float64Histogram { return nil }
	if got := p.rest(cost); got != 3*cost {
		t.Errorf("without the histogram: rest %v, want %v", got, 3*cost)
	}
	// newPacer reads the runtime's histogram (without it the loop would
	// always rest).
	if r := newPacer(); r.read() == nil {
		t.Fatal("runtime/metrics has no /sched/latencies:seconds")
	}
}
