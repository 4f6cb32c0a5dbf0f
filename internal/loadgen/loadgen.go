// Package loadgen offers durable submissions to an Arbiter server at a
// fixed rate (open loop): each submission is due at its time whatever the
// answers do, and its latency counts from that moment, so a stall delays
// everything queued behind it (no coordinated omission). The submission
// benchmarks use it in their own process; cmd runs it in another.
package loadgen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// Submit submits the i-th workload of a run: 1 preemptible A100 GPU in
// eastus, named j<i>.
func Submit(cl *client.Client, tenant string, i int) error {
	_, err := cl.Submit(context.Background(), tenant, api.WorkloadSpec{Name: fmt.Sprintf("j%d", i), GPUs: 1000,
		Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}, Preemptible: true})
	return err
}

// Result is what an open-loop run measured, per submission in order.
type Result struct {
	Start   time.Time
	Elapsed time.Duration
	Failed  int64
	// Due is when each submission was due, from Start.
	Due []time.Duration
	// Latency counts from the due time to the answer.
	Latency []time.Duration
	// SendDelay is how late each was sent: all clients busy, or one
	// waiting for a CPU.
	SendDelay []time.Duration
}

// OpenLoop calls submit(i) for i in [0, n), the i-th due at i/rate seconds
// after the start, with at most clients in flight.
func OpenLoop(rate float64, n, clients int, submit func(i int) error) Result {
	r := Result{Due: make([]time.Duration, n), Latency: make([]time.Duration, n), SendDelay: make([]time.Duration, n)}
	for i := range r.Due {
		r.Due[i] = time.Duration(float64(i) / rate * float64(time.Second))
	}
	due := make(chan int, n)
	var failed atomic.Int64
	r.Start = time.Now()
	at := func(i int) time.Time { return r.Start.Add(r.Due[i]) }
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := range due {
				r.SendDelay[i] = time.Since(at(i))
				err := submit(i)
				r.Latency[i] = time.Since(at(i))
				if err != nil {
					failed.Add(1)
				}
			}
		})
	}
	for i := range n {
		if d := time.Until(at(i)); d > 0 {
			time.Sleep(d)
		}
		due <- i
	}
	close(due)
	wg.Wait()
	r.Elapsed, r.Failed = time.Since(r.Start), failed.Load()
	return r
}

// Output is the JSON line the loadgen command prints.
type Output struct {
	Failed    int64   `json:"failed"`
	Elapsed   float64 `json:"elapsed_s"`
	LatencyUS []int64 `json:"latency_us"` // per submission, in order
}

// ClosedLoop calls submit(i) for i in [0, n) from clients goroutines,
// each taking the next i as soon as its last call returns (as fast as
// the server answers), and returns the first error; after one, no new
// call starts.
func ClosedLoop(n, clients int, submit func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for !stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := submit(i); err != nil {
					once.Do(func() { first = err })
					stop.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return first
}
