package store

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkBatchPut measures durable grouped commits: 64 writers each
// putting a workload and an event per call.
func BenchmarkBatchPut(b *testing.B) {
	st, err := OpenBolt(filepath.Join(b.TempDir(), "a.db"), &BoltOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < benchWriters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				err := st.Batch(ctx, func(tx WriteTx) error {
					if err := Put(tx, job("t", fmt.Sprint("j", i)), MustNotExist); err != nil {
						return err
					}
					return AppendEvent(tx, &Event{Type: "WorkloadSubmitted", Object: fmt.Sprint(i)})
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "puts/s")
	s := st.db.Stats()
	b.ReportMetric(float64(b.N)/float64(max(1, s.TxStats.GetWrite())), "puts/write")
}

const benchWriters = 64
