package server

import (
	rtmetrics "runtime/metrics"
	"time"
)

// pacer decides how long the scheduler loop rests after a cycle. A cycle
// takes a CPU for its whole run; while the process's goroutines (the
// API's handlers) wait for a CPU, the loop rests three times the last
// cycle's CPU time, so that cycles take at most a quarter of the time
// the API could use; while none wait, resting only makes submissions
// wait for placement, so the loop rests only MinInterval. Contention is
// read from the Go scheduler itself: the share of goroutine wake-ups in
// the last period that waited longer than contendedWait for a CPU
// (runtime/metrics' /sched/latencies:seconds).
type pacer struct {
	read func() *rtmetrics.Float64Histogram
	last []uint64 // the histogram's counts at the last read
}

const (
	// contendedWait is a wait for a CPU that counts as contention: a
	// goroutine that waits longer was ready to run and had no CPU.
	contendedWait = time.Millisecond
	// contendedShare is the share of wake-ups waiting longer than
	// contendedWait at which the loop rests (in thousandths).
	contendedShare = 10
	// paceFactor is the rest, in multiples of the last cycle's CPU
	// time, while the process is contended.
	paceFactor = 3
)

func newPacer() *pacer {
	s := []rtmetrics.Sample{{Name: "/sched/latencies:seconds"}}
	return &pacer{read: func() *rtmetrics.Float64Histogram {
		rtmetrics.Read(s)
		if s[0].Value.Kind() != rtmetrics.KindFloat64Histogram {
			return nil
		}
		return s[0].Value.Float64Histogram()
	}}
}

// rest is how long to rest after a cycle that cost cost of CPU time.
func (p *pacer) rest(cost time.Duration) time.Duration {
	if p.contended() {
		return paceFactor * cost
	}
	return 0
}

// contended reports whether more than contendedShare thousandths of the
// goroutine wake-ups since the last call waited longer than contendedWait
// for a CPU. Without the histogram it says yes: the loop then rests as
// it always did.
func (p *pacer) contended() bool {
	h := p.read()
	if h == nil || len(h.Counts) == 0 || len(h.Buckets) != len(h.Counts)+1 {
		return true
	}
	if len(p.last) != len(h.Counts) {
		p.last = make([]uint64, len(h.Counts))
		copy(p.last, h.Counts)
		return true // no period yet
	}
	var all, long uint64
	for i, n := range h.Counts {
		d := n - p.last[i]
		all += d
		if h.Buckets[i] >= contendedWait.Seconds() { // the bucket's lower bound
			long += d
		}
	}
	copy(p.last, h.Counts)
	return all > 0 && long*1000 > all*contendedShare
}
