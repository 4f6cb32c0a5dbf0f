package meter

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// benchRecords makes n records of a month: 200 tenants, 4 kinds, 5
// regions, 12 SKUs, runs of up to a day, one in 50 still open.
func benchRecords(n int) []Record {
	rng := rand.New(rand.NewPCG(21, 21))
	var tenants, regions, skus, kinds []string
	for i := range 200 {
		tenants = append(tenants, fmt.Sprintf("tenant-%03d", i))
	}
	regions = []string{"eastus", "westus2", "centralus", "northeurope", "westeurope"}
	for i := range 12 {
		skus = append(skus, fmt.Sprintf("Standard_SKU_%02d", i))
	}
	kinds = []string{"batch", "vm", "training", "inference"}
	recs := make([]Record, n)
	month := 30 * 24 * time.Hour
	for i := range recs {
		t := tenants[rng.IntN(len(tenants))]
		start := t0.Add(time.Duration(rng.Int64N(int64(month))))
		r := Record{Workload: t + "/job", Replica: i % 8, Tenant: t, Kind: kinds[rng.IntN(4)], Region: regions[rng.IntN(5)],
			SKU: fleet.SKUName(skus[rng.IntN(12)]), Model: "A100-80G", GPUs: resource.MilliGPU(1000 * (1 + rng.IntN(8))),
			Start: start, Charge: Charge(1 + rng.IntN(4)), UnitPrice: 1 + rng.Float64()*3, ListPrice: 4}
		if rng.IntN(50) != 0 {
			r.End = start.Add(time.Duration(rng.Int64N(int64(24 * time.Hour))))
		}
		recs[i] = r
	}
	return recs
}

// BenchmarkReport10M is `arbiter cost report --group-by
// tenant,kind,region,sku` over 10 million records (the aggregation the
// command runs, on records already in memory).
func BenchmarkReport10M(b *testing.B) {
	n := 10_000_000
	if testing.Short() {
		n = 100_000
	}
	recs := benchRecords(n)
	by := []Dim{DimTenant, DimKind, DimRegion, DimSKU}
	since, until := t0, t0.Add(31*24*time.Hour)
	rep := Aggregate(recs, since, until, by)
	if rep.Total.Records != n || len(rep.Rows) < 1000 {
		b.Fatalf("report of %d records in %d groups, want %d in 1000 or more", rep.Total.Records, len(rep.Rows), n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Aggregate(recs, since, until, by)
	}
	b.ReportMetric(float64(n), "records")
	b.ReportMetric(float64(len(rep.Rows)), "groups")
}

// BenchmarkSummer10M is the server's part of `arbiter cost report
// --group-by tenant,kind,region,sku` without the store: 10 million stored
// records (AppendRecord's form, in memory) decoded in place and summed by
// a Summer (on GOMAXPROCS goroutines).
func BenchmarkSummer10M(b *testing.B) {
	n := 10_000_000
	if testing.Short() {
		n = 100_000
	}
	recs := benchRecords(n)
	stored := make([][]byte, n)
	for i := range recs {
		stored[i] = AppendRecord(nil, &recs[i])
	}
	recs = nil
	by := []Dim{DimTenant, DimKind, DimRegion, DimSKU}
	since, until := t0, t0.Add(31*24*time.Hour)
	report := func() Report {
		s := NewSummer(since, until, by, nil)
		for _, d := range stored {
			s.Add(d)
		}
		rep, err := s.Report()
		if err != nil {
			b.Fatal(err)
		}
		return rep
	}
	if rep := report(); rep.Total.Records != n || len(rep.Rows) < 1000 {
		b.Fatalf("report of %d records in %d groups, want %d in 1000 or more", rep.Total.Records, len(rep.Rows), n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		report()
	}
	b.ReportMetric(float64(n), "records")
}
