package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// BenchmarkSubmitIdempotencyKey compares durable submissions with and
// without an Idempotency-Key (32 clients, closed loop, the same server
// set-up as BenchmarkSubmit): what recording the key in the submission's
// transaction costs.
//
//	go test ./internal/server -run XXX -bench SubmitIdempotencyKey -benchtime 20000x -count 2
func BenchmarkSubmitIdempotencyKey(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		b.Run(fmt.Sprintf("key=%v", keyed), func(b *testing.B) {
			cl, done := benchServer(b)
			defer done()
			lat := make([]time.Duration, b.N)
			var next, failed atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range 32 {
				wg.Go(func() {
					for {
						i := int(next.Add(1)) - 1
						if i >= b.N {
							return
						}
						key := ""
						if keyed {
							key = fmt.Sprintf("bench-key-%d", i)
						}
						t0 := time.Now()
						_, err := cl.SubmitWithKey(context.Background(), "acme", key, api.WorkloadSpec{Name: fmt.Sprintf("j%d", i), GPUs: 1000,
							Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}, Preemptible: true})
						lat[i] = time.Since(t0)
						if err != nil {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			reportLatency(b, lat, failed.Load(), elapsed)
		})
	}
}
