package server

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/store"
)

// BenchmarkCostReport10M is `arbiter cost report --since <a month>
// --group-by tenant,kind,region,sku` end to end: GET /v1/cost-report on a
// live server (real handler over loopback HTTP) over a real bbolt store
// holding N usage records (10,000,000; ARBITER_BENCH_RECORDS to change)
// of a month: 200 tenants, 4 kinds, 5 regions, 12 SKUs, runs of up to a
// day, one in 50 still open, written by store.PutUsage in commits of
// 100,000. ARBITER_BENCH_USAGE_DB keeps the filled store at that path
// between runs (it is filled when it does not exist). It reports the
// store file's bytes per record.
//
//	go test ./internal/server -run XXX -bench CostReport10M -benchtime 3x -timeout 60m
func BenchmarkCostReport10M(b *testing.B) {
	n := 10_000_000
	if v := os.Getenv("ARBITER_BENCH_RECORDS"); v != "" {
		fmt.Sscan(v, &n)
	}
	path := os.Getenv("ARBITER_BENCH_USAGE_DB")
	if path == "" {
		path = filepath.Join(b.TempDir(), "arbiter.db")
	}
	_, statErr := os.Stat(path)
	st, err := store.OpenBolt(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if statErr != nil {
		fi, _ := os.Stat(path)
		empty := fi.Size()
		fillUsage(b, st, n, t0)
		fi, _ = os.Stat(path)
		b.Logf("filled %d records: %d bytes of file (%.0f a record)", n, fi.Size()-empty, float64(fi.Size()-empty)/float64(n))
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(context.Background(), Options{Store: st, AdminToken: testAdmin, Logger: slog.New(slog.DiscardHandler), Clock: func() time.Time { return t0.Add(40 * 24 * time.Hour) }})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	cl := client.New(hs.URL, testAdmin)
	since, until := t0, t0.Add(31*24*time.Hour)
	rep, err := cl.CostReport(context.Background(), since, until, "tenant,kind,region,sku", "")
	if err != nil {
		b.Fatal(err)
	}
	if rep.Total.Records != n || len(rep.Rows) < 1000 {
		b.Fatalf("report of %d records in %d groups, want %d in 1000 or more", rep.Total.Records, len(rep.Rows), n)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		if _, err := cl.CostReport(context.Background(), since, until, "tenant,kind,region,sku", ""); err != nil {
			b.Fatal(err)
		}
	}
	// CPU seconds (the process's, user and system) per report: the work,
	// apart from waiting for a shared machine's cores.
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(n), "records")
	b.ReportMetric(float64(len(rep.Rows)), "groups")
	b.ReportMetric(float64(fi.Size())/float64(n), "file-bytes/record")
}

// fillUsage writes n records of the month from t0, as the benchmark's
// doc says.
func fillUsage(b *testing.B, st store.Store, n int, t0 time.Time) {
	rng := rand.New(rand.NewPCG(21, 21))
	var tenants, skus []string
	for i := range 200 {
		tenants = append(tenants, fmt.Sprintf("tenant-%03d", i))
	}
	regions := []string{"eastus", "westus2", "centralus", "northeurope", "westeurope"}
	for i := range 12 {
		skus = append(skus, fmt.Sprintf("Standard_SKU_%02d", i))
	}
	kinds := []string{"batch", "vm", "training", "inference"}
	month := int64(30 * 24 * time.Hour)
	const per = 100_000
	for c := 0; c*per < n; c++ {
		err := st.Update(context.Background(), func(tx store.WriteTx) error {
			for i := c * per; i < min((c+1)*per, n); i++ {
				t := tenants[rng.IntN(len(tenants))]
				// Starts in time order, as a server writes them.
				start := t0.Add(time.Duration(month / int64(n) * int64(i)))
				r := meter.Record{Workload: fmt.Sprintf("%s/job-%07d", t, i/8), Replica: i % 8, Tenant: t, TenantRev: 7, Path: []string{"org", t},
					Kind: kinds[rng.IntN(4)], Class: "research", Region: regions[rng.IntN(5)], SKU: fleet.SKUName(skus[rng.IntN(12)]), Model: "A100-80G",
					Node: fleet.NodeID(fmt.Sprintf("node-%05d", rng.IntN(20000))), GPUs: resource.MilliGPU(1000 * (1 + rng.IntN(8))),
					Start: start, Charge: meter.Charge(1 + rng.IntN(4)), UnitPrice: 1 + rng.Float64()*3, ListPrice: 4, ContractedPrice: 3.2}
				if rng.IntN(50) != 0 {
					r.End = start.Add(time.Duration(rng.Int64N(int64(24 * time.Hour))))
				}
				if err := store.PutUsage(tx, &r); err != nil {
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

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
