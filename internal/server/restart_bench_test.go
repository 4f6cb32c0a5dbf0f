package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched/schedbench"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// BenchmarkRestartReady measures a restart over a store holding many
// queued workloads (ARBITER_BENCH_STORED, default 100,000; issue 19 asks
// about 1,000,000): the time from opening the store to a server that
// answers its API (open), and to the end of its first scheduling cycle
// over the whole queue (ready: every workload decided, the plan
// committed), and the heap the server holds after that cycle per queued
// workload. The queue is benchConfig's one tenant's: 1-GPU A100 work with
// a class label, written as submissions write it (the object and its
// event), in batches of 10,000.
//
//	ARBITER_BENCH_STORED=1000000 go test ./internal/server -run XXX -bench RestartReady -benchtime 1x
//
// ARBITER_BENCH_SPEC=mixed queues the mixed queue's specs instead
// (schedbench.Mixed's 50 tenants and 1,000 nodes).
// ARBITER_BENCH_CPUPROFILE=FILE profiles the first restart's CPU (the fill left
// out); ARBITER_BENCH_HEAPPROFILE=FILE writes the heap's profile after the first
// restart's cycle. ARBITER_BENCH_TENANT_BOUND is the scheduling option
// shapes_per_tenant (Options.Scheduling.TenantBound: 0, the default, is
// sched.DefaultTenantBound; -1 none).
func BenchmarkRestartReady(b *testing.B) {
	n := envInt("ARBITER_BENCH_STORED", 100_000)
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "arbiter.db")
	fillQueuedStore(b, path, n)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var open, ready time.Duration
	var heap uint64
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		stopProfile := startCPUProfile(b, os.Getenv("ARBITER_BENCH_CPUPROFILE"), i)
		t0 := time.Now()
		st, err := store.OpenBolt(path, &store.BoltOptions{MaxBatchDelay: time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		o := Options{Store: st, AdminToken: testAdmin, RateLimit: -1, Logger: slog.New(slog.DiscardHandler),
			Limits: config.Limits{WorkloadsQueued: 10_000_000, QueuedBytes: 1 << 40}}
		o.Scheduling.TenantBound, _ = strconv.Atoi(os.Getenv("ARBITER_BENCH_TENANT_BOUND"))
		s, err := New(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		open += time.Since(t0)
		s.Cycle(ctx)
		ready += time.Since(t0)
		stopProfile()
		b.StopTimer()
		if after := heapInUse(); after > before {
			heap += after - before
		}
		if f := os.Getenv("ARBITER_BENCH_HEAPPROFILE"); f != "" && i == 0 {
			writeHeapProfile(b, f)
		}
		runtime.KeepAlive(s)
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(open.Seconds()/float64(b.N), "s/open")
	b.ReportMetric(ready.Seconds()/float64(b.N), "s/ready")
	b.ReportMetric(float64(heap)/float64(b.N)/float64(n), "heap-B/workload")
	b.ReportMetric(float64(fi.Size())/float64(n), "disk-B/workload")
}

// startCPUProfile profiles the first restart into file, when one is
// named (the fill before it stays out), and returns what stops it.
func startCPUProfile(b *testing.B, file string, i int) func() {
	if file == "" || i > 0 {
		return func() {}
	}
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// writeHeapProfile writes the live heap's profile to file (go tool pprof
// -sample_index=inuse_space).
func writeHeapProfile(b *testing.B, file string) {
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// fillQueuedStore seeds benchConfig into a new store at path and queues n
// pending workloads in it, then closes it.
func fillQueuedStore(b *testing.B, path string, n int) {
	b.Helper()
	ctx := context.Background()
	st, err := store.OpenBolt(path, &store.BoltOptions{MaxBatchDelay: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	cfg, queue := benchConfig, func(i int) workload.Spec {
		return workload.Spec{Name: workload.ID(fmt.Sprintf("train-%07d", i)), Tenant: "acme", Kind: workload.KindBatch,
			Priority: workload.PriorityNormal, GPUs: resource.GPUs(1), Replicas: 1,
			Flavors: []fleet.ModelID{"A100-80G"}, Regions: []string{"eastus"}, Labels: map[string]string{"class": "batch"}}
	}
	if os.Getenv("ARBITER_BENCH_SPEC") == "mixed" {
		// The mixed queue's specs (schedbench.Mixed: 50 tenants, 1,000
		// nodes), with the defaults a submission fills (not through the API).
		m, err := schedbench.NewMixed(1000, 0, 1)
		if err != nil {
			b.Fatal(err)
		}
		cfg = m.Config()
		queue = func(int) workload.Spec {
			s := m.Draw(1)[0].Spec
			s.Defaults(true)
			return s
		}
	}
	c, err := config.Parse("bench.yaml", []byte(cfg))
	if err != nil {
		b.Fatal(err)
	}
	at := time.Now().UTC().Round(0)
	if _, err := Seed(store.Unfenced(ctx), st, c, at); err != nil {
		b.Fatal(err)
	}
	const batch = 10_000
	for lo := 0; lo < n; lo += batch {
		err := st.Update(store.Unfenced(ctx), func(tx store.WriteTx) error {
			for i := lo; i < min(n, lo+batch); i++ {
				spec := queue(i)
				obj := &store.Workload{Tenant: spec.Tenant, State: store.StatePending, SubmittedAt: at.Add(time.Duration(i) * time.Millisecond), Spec: spec}
				if err := store.Put(tx, obj, store.MustNotExist); err != nil {
					return err
				}
				if err := store.AppendEvent(tx, &store.Event{Time: obj.SubmittedAt, Type: store.EventWorkloadSubmitted,
					Object: store.WorkloadObject(obj.Key()), Tenant: obj.Tenant, ObjectRevision: obj.Meta.Revision}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
