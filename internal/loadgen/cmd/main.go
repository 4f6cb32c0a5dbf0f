// Command loadgen runs loadgen.OpenLoop against an Arbiter server from its
// own process, as real clients would (BenchmarkSubmitAtRate runs it with
// ARBITER_BENCH_PROCESS=1). It prints one JSON line: failures, elapsed
// time and each latency.
package main

import (
	"encoding/json"
	"flag"
	"os"

	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/loadgen"
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
	r := loadgen.OpenLoop(*rate, *n, *clients, func(i int) error { return loadgen.Submit(cl, *tenant, i) })
	// The raw latencies: the benchmark computes the percentiles as it
	// does for its in-process runs.
	us := make([]int64, len(r.Latency))
	for i, l := range r.Latency {
		us[i] = l.Microseconds()
	}
	json.NewEncoder(os.Stdout).Encode(loadgen.Output{Failed: r.Failed, Elapsed: r.Elapsed.Seconds(), LatencyUS: us})
}
