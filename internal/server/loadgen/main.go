// Command loadgen offers durable submissions to an Arbiter server at a
// fixed rate from its own process, as real clients would (BenchmarkSubmitAtRate
// runs it with ARBITER_BENCH_PROCESS=1). Each submission's latency counts
// from the moment it was due, so a stall delays everything queued behind
// it. It prints one JSON line: failures, elapsed time and each latency.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

func main() {
	url := flag.String("url", "", "server URL")
	token := flag.String("token", "", "a tenant's token")
	tenant := flag.String("tenant", "acme", "the tenant")
	rate := flag.Float64("rate", 5000, "submissions per second")
	n := flag.Int("n", 10000, "submissions")
	clients := flag.Int("clients", 64, "at most this many in flight")
	flag.Parse()
	cl := client.New(*url, *token)
	lat := make([]time.Duration, *n)
	due := make(chan int, *n)
	var failed atomic.Int64
	start := time.Now()
	at := func(i int) time.Time { return start.Add(time.Duration(float64(i) / *rate * float64(time.Second))) }
	var wg sync.WaitGroup
	for w := 0; w < *clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range due {
				_, err := cl.Submit(context.Background(), *tenant, api.WorkloadSpec{Name: fmt.Sprintf("j%d", i), GPUs: 1000,
					Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}, Preemptible: true})
				lat[i] = time.Since(at(i))
				if err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	for i := 0; i < *n; i++ {
		if d := time.Until(at(i)); d > 0 {
			time.Sleep(d)
		}
		due <- i
	}
	close(due)
	wg.Wait()
	elapsed := time.Since(start)
	// The raw latencies: the benchmark computes the percentiles as it
	// does for its in-process runs.
	us := make([]int64, len(lat))
	for i, l := range lat {
		us[i] = l.Microseconds()
	}
	json.NewEncoder(os.Stdout).Encode(result{Failed: failed.Load(), Elapsed: elapsed.Seconds(), LatencyUS: us})
}

// result is what loadgen prints.
type result struct {
	Failed    int64   `json:"failed"`
	Elapsed   float64 `json:"elapsed_s"`
	LatencyUS []int64 `json:"latency_us"` // per submission, in order
}
