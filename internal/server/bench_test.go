package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/store"
)

// BenchmarkSubmit measures durable submissions over loopback HTTP with 64
// concurrent clients, the scheduler loop running: every submission is
// acknowledged only after its commit is fsynced (commits are grouped).
// It reports submissions/s and latency percentiles.
//
//	go test ./internal/server -run XXX -bench Submit -benchtime 20000x
func BenchmarkSubmit(b *testing.B) {
	clients := benchClients()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.OpenBolt(filepath.Join(b.TempDir(), "arbiter.db"), &store.BoltOptions{MaxBatchDelay: 2 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	c, err := config.Parse("bench.yaml", []byte(benchConfig))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := Seed(ctx, st, c, time.Now()); err != nil {
		b.Fatal(err)
	}
	s, err := New(ctx, Options{Store: st, AdminToken: testAdmin, RateLimit: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	var loop sync.WaitGroup
	loop.Add(1)
	go func() {
		defer loop.Done()
		if os.Getenv("NOLOOP") == "" {
			s.Run(ctx)
		}
	}()
	admin := client.New(hs.URL, testAdmin)
	tok, err := admin.CreateToken(ctx, "acme", "bench")
	if err != nil {
		b.Fatal(err)
	}
	cl := client.New(hs.URL, tok.Secret)
	// The work is real: one submission goes through and is stored.
	if _, err := cl.Submit(ctx, "acme", api.WorkloadSpec{Name: "warmup", GPUs: 1000, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				_, err := cl.Submit(ctx, "acme", api.WorkloadSpec{Name: fmt.Sprintf("j%d", i), GPUs: 1000, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}, Preemptible: true})
				lat[i] = time.Since(t0)
				if err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d submissions failed", f)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "subs/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(0.999), "p99.9-ms")
	cancel()
	loop.Wait()
}

// benchConfig: 100 machines (800 A100 GPUs) and one tenant without limits.
const benchConfig = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 100}]
tenants:
  - name: acme
`

// benchClients is 64 unless ARBITER_BENCH_CLIENTS says otherwise.
func benchClients() int {
	if n, err := strconv.Atoi(os.Getenv("ARBITER_BENCH_CLIENTS")); err == nil && n > 0 {
		return n
	}
	return 64
}
