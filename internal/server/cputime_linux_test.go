package server

import (
	"crypto/sha256"
	"testing"
	"time"
)

// TestCPUCost: a cycle's cost is the CPU its own thread spent, so one
// that waits while another goroutine works costs far less than that work.
func TestCPUCost(t *testing.T) {
	work := func() {
		buf := make([]byte, 1<<20)
		for range 64 {
			sum := sha256.Sum256(buf)
			buf[0] = sum[0]
		}
	}
	busy := cpuCost(work)
	if busy <= 0 {
		t.Fatalf("a CPU-bound function cost %v", busy)
	}
	done := make(chan struct{})
	var worker time.Duration
	waited := cpuCost(func() {
		go func() {
			worker = cpuCost(work)
			close(done)
		}()
		<-done
	})
	if waited >= worker/2 {
		t.Errorf("waiting for %v of another goroutine's work cost %v of the waiter's CPU", worker, waited)
	}
}
