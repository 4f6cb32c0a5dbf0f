package store

import (
	"fmt"
	"path/filepath"
	"slices"
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

// BenchmarkCommit measures one writer's durable commits, one small workload
// each: the floor under every acknowledged write on this disk (bbolt
// writes the pages, fdatasyncs, writes the meta page and fdatasyncs
// again). It reports latency percentiles; run it beside CPU load to see
// what the load does to the disk path:
//
//	go test ./internal/store -run XXX -bench Commit -benchtime 3000x
func BenchmarkCommit(b *testing.B) {
	st, err := OpenBolt(filepath.Join(b.TempDir(), "a.db"), &BoltOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		err := st.Update(ctx, func(tx WriteTx) error { return Put(tx, job("t", fmt.Sprint("j", i)), MustNotExist) })
		lat[i] = time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	for _, p := range []float64{0.5, 0.99, 0.999} {
		b.ReportMetric(float64(lat[int(p*float64(len(lat)-1))].Microseconds())/1000, fmt.Sprintf("p%g-ms", p*100))
	}
}
