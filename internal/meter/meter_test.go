package meter

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// rec is a record of tenant's work of kind on milli GPUs over [t0+from,
// t0+to) (to 0: open) at unit USD per GPU-hour (list twice that).
func rec(tenant, kind string, milli resource.MilliGPU, from, to time.Duration, unit float64) Record {
	r := Record{Workload: tenant + "/w", Tenant: tenant, Kind: kind, Region: "eastus", SKU: "S", GPUs: milli, Start: t0.Add(from),
		UnitPrice: unit, ListPrice: 2 * unit, Charge: ChargeBorrowed}
	if to != 0 {
		r.End = t0.Add(to)
	}
	return r
}

// TestAggregateClipsToWindow: records are clipped to [since, until), open
// ones run to until, groups come in key order and add up to the total.
func TestAggregateClipsToWindow(t *testing.T) {
	h := time.Hour
	recs := []Record{
		rec("a", "batch", 2000, 0, 2*h, 1),       // 2 GPUs × 1 h inside
		rec("a", "training", 500, 0, 0, 4),       // open: 0.5 × 3 h
		rec("b", "batch", 1000, -5*h, -2*h, 100), // before the window
		rec("b", "batch", 8000, 3*h, 10*h, 1),    // 8 × 1 h inside
		rec("a", "batch", 1000, 4*h, 5*h, 1),     // after the window
	}
	since, until := t0.Add(h), t0.Add(4*h)
	got := Aggregate(recs, since, until, []Dim{DimTenant, DimKind})
	want := Report{Since: since, Until: until, GroupBy: []string{"tenant", "kind"}, Rows: []Row{
		{Keys: []string{"a", "batch"}, GPUHours: 2, Cost: 2, ListCost: 4, Records: 1},
		{Keys: []string{"a", "training"}, GPUHours: 1.5, Cost: 6, ListCost: 12, Records: 1},
		{Keys: []string{"b", "batch"}, GPUHours: 8, Cost: 8, ListCost: 16, Records: 1},
	}, Total: Row{Keys: []string{}, GPUHours: 11.5, Cost: 16, ListCost: 32, Records: 3}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("report (-want +got):\n%s", d)
	}
	var tb bytes.Buffer
	if err := got.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tb.String(), "TOTAL") || !strings.Contains(tb.String(), "11.500") {
		t.Errorf("table without its total:\n%s", tb.String())
	}
}

// TestAggregateAgainstNaive: random records grouped by up to six
// dimensions match a naive sum keyed by the joined values (seeded).
func TestAggregateAgainstNaive(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	dims := []Dim{DimTenant, DimKind, DimRegion, DimSKU, DimModel, DimCharge, DimClass}
	for round := range 20 {
		by := dims[:1+rng.IntN(len(dims))]
		var recs []Record
		for range 200 {
			r := rec(fmt.Sprint("t", rng.IntN(3)), []string{"batch", "training"}[rng.IntN(2)], resource.MilliGPU(500*(1+rng.IntN(8))),
				time.Duration(rng.IntN(48))*time.Hour, time.Duration(rng.IntN(96))*time.Hour, float64(rng.IntN(5)))
			if !r.End.IsZero() && r.End.Before(r.Start) {
				r.End = time.Time{}
			}
			r.Region, r.SKU, r.Class = []string{"eastus", "westus2"}[rng.IntN(2)], fleet.SKUName(fmt.Sprint("s", rng.IntN(2))), []string{"", "x"}[rng.IntN(2)]
			r.Charge = Charge(1 + rng.IntN(4))
			recs = append(recs, r)
		}
		since, until := t0.Add(12*time.Hour), t0.Add(60*time.Hour)
		naive := map[string]float64{}
		for _, r := range recs {
			var ks []string
			for _, d := range by {
				ks = append(ks, dimValue(&r, d))
			}
			naive[strings.Join(ks, "|")] += r.GPUHours(since, until) * r.UnitPrice
		}
		rep := Aggregate(recs, since, until, by)
		for _, row := range rep.Rows {
			k := strings.Join(row.Keys, "|")
			if d := naive[k] - row.Cost; d > 1e-9 || d < -1e-9 {
				t.Fatalf("seed %d round %d: group %s costs %.6f, naive %.6f", seed, round, k, row.Cost, naive[k])
			}
			delete(naive, k)
		}
		for k, v := range naive {
			if v != 0 {
				t.Fatalf("seed %d round %d: group %s (%.6f) missing from the report", seed, round, k, v)
			}
		}
	}
}

// TestParsersRefuseBadInput: bad dimensions, durations and windows are
// refused naming the flag.
func TestParsersRefuseBadInput(t *testing.T) {
	now := t0
	for _, s := range []string{"tenant,colour", "tenant,,kind", "tenant,tenant", "TENANT"} {
		if _, err := ParseGroupBy("--group-by", s); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--group-by") {
			t.Errorf("ParseGroupBy(%q): %v, want ErrInvalid naming --group-by", s, err)
		}
	}
	if by, err := ParseGroupBy("--group-by", "tenant, kind,region,sku"); err != nil || len(by) != 4 || by[3] != DimSKU {
		t.Errorf("ParseGroupBy: %v %v", by, err)
	}
	for _, s := range []string{"", "yesterday", "-3d", "3x", "2026-02-30", "1e9d", "d", "NaNd", "Infd", "-1h"} {
		if _, err := ParseTime("--since", s, now); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--since") {
			t.Errorf("ParseTime(%q): %v, want ErrInvalid naming --since", s, err)
		}
	}
	for s, want := range map[string]time.Time{"30d": now.AddDate(0, 0, -30), "1w": now.AddDate(0, 0, -7), "90m": now.Add(-90 * time.Minute),
		"2025-12-01": time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC), "2025-12-01T10:00:00Z": time.Date(2025, 12, 1, 10, 0, 0, 0, time.UTC)} {
		if got, err := ParseTime("--since", s, now); err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %s, %v; want %s", s, got, err, want)
		}
	}
	if err := Window(now, now); err == nil || !strings.Contains(err.Error(), "since") {
		t.Errorf("an empty window: %v", err)
	}
}

// TestChargeAndPrices: how runs are charged and priced.
func TestChargeAndPrices(t *testing.T) {
	a := &workload.Assignment{}
	if c := ChargeOf(workload.PrioritySpot, &workload.Assignment{OnReservation: true}); c != ChargeSpot {
		t.Errorf("spot on a reservation: %s", c)
	}
	if c := ChargeOf(workload.PriorityHigh, &workload.Assignment{OnReservation: true, Within: true}); c != ChargeReservation {
		t.Errorf("on a reservation: %s", c)
	}
	if c := ChargeOf(workload.PriorityHigh, &workload.Assignment{Within: true}); c != ChargeGuarantee {
		t.Errorf("within: %s", c)
	}
	if c := ChargeOf(workload.PriorityLow, a); c != ChargeBorrowed {
		t.Errorf("borrowed: %s", c)
	}
	cat := fleet.Builtin()
	sku, _ := cat.SKU("Standard_ND96amsr_A100_v4")
	p := Prices{Catalog: cat, Spot: map[SpotKey]float64{{Model: "A100-80G", Region: "eastus"}: 1.5}}
	od := cat.PriceIn(sku, "westeurope")
	for _, c := range []struct {
		charge     Charge
		region     string
		unit, list float64
	}{
		{ChargeBorrowed, "westeurope", od.OnDemand / 8, od.OnDemand / 8},
		{ChargeGuarantee, "westeurope", od.OnDemand / 8, od.OnDemand / 8},
		{ChargeReservation, "westeurope", od.Reserved1Y / 8, od.OnDemand / 8},
		{ChargeSpot, "westeurope", od.Spot / 8, od.OnDemand / 8}, // no live price there: the catalog's
		{ChargeSpot, "eastus", 1.5, cat.PriceIn(sku, "eastus").OnDemand / 8},
	} {
		u, l := p.Unit(sku, c.region, c.charge)
		if u != c.unit || l != c.list {
			t.Errorf("%s in %s: %.4f (list %.4f), want %.4f (list %.4f)", c.charge, c.region, u, l, c.unit, c.list)
		}
	}
	for _, c := range []Charge{ChargeGuarantee, ChargeBorrowed, ChargeReservation, ChargeSpot} {
		var back Charge
		b, _ := c.MarshalText()
		if err := back.UnmarshalText(b); err != nil || back != c {
			t.Errorf("%s round trip: %s %v", c, back, err)
		}
	}
	var bad Charge
	if err := bad.UnmarshalText([]byte("free")); err == nil {
		t.Error("charge \"free\" accepted")
	}
}

// TestFOCUSExport: the CSV has the FOCUS 1.0 columns and one row per
// record in the window, clipped; the JSON has the same rows.
func TestFOCUSExport(t *testing.T) {
	recs := []Record{rec("a", "batch", 2000, 0, 2*time.Hour, 3), rec("b", "batch", 1000, 5*time.Hour, 0, 1)}
	recs[0].Charge, recs[0].Path, recs[0].Class = ChargeSpot, []string{"org", "a"}, "research"
	since, until := t0.Add(time.Hour), t0.Add(6*time.Hour)
	var b bytes.Buffer
	if err := WriteFOCUSCSV(&b, recs, since, until); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(FOCUSColumns(), rows[0]); d != "" {
		t.Errorf("header (-want +got):\n%s", d)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want a header and 2", len(rows))
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	r := rows[1]
	for c, want := range map[string]string{"ChargePeriodStart": "2026-01-01T01:00:00Z", "ChargePeriodEnd": "2026-01-01T02:00:00Z", "PricingCategory": "Dynamic",
		"PricingQuantity": "2", "EffectiveCost": "6", "ListCost": "12", "ListUnitPrice": "6", "SubAccountId": "a", "BillingPeriodStart": "2026-01-01T00:00:00Z",
		"BillingPeriodEnd": "2026-02-01T00:00:00Z", "ResourceId": "a/w/0"} {
		if r[col[c]] != want {
			t.Errorf("%s = %q, want %q", c, r[col[c]], want)
		}
	}
	var tags map[string]string
	if err := json.Unmarshal([]byte(r[col["Tags"]]), &tags); err != nil || tags["arbiter.tenant_path"] != "org/a" || tags["arbiter.class"] != "research" || tags["arbiter.charge"] != "spot" {
		t.Errorf("tags %v (%v)", tags, err)
	}
	if open := rows[2]; open[col["ChargePeriodEnd"]] != "2026-01-01T06:00:00Z" || !strings.Contains(open[col["Tags"]], `"arbiter.open":"true"`) {
		t.Errorf("the open record's row %v: want it to end at until, tagged open", open)
	}
	b.Reset()
	if err := WriteFOCUSJSON(&b, recs, since, until); err != nil {
		t.Fatal(err)
	}
	var js []FOCUS
	if err := json.Unmarshal(b.Bytes(), &js); err != nil || len(js) != 2 || js[0].BilledCost != 6 {
		t.Errorf("JSON export: %+v %v", js, err)
	}
}

// TestAggregateChunksMatchOne: the chunked, concurrent Aggregate gives
// the groups and totals of one aggregator over every record.
func TestAggregateChunksMatchOne(t *testing.T) {
	if testing.Short() {
		t.Skip("a million records")
	}
	recs := benchRecords(chunk + chunk/3)
	by := []Dim{DimTenant, DimRegion}
	since, until := t0.Add(24*time.Hour), t0.Add(20*24*time.Hour)
	got := Aggregate(recs, since, until, by)
	one := NewAggregator(since, until, by)
	for i := range recs {
		one.Add(&recs[i])
	}
	want := one.Report()
	if len(got.Rows) != len(want.Rows) || got.Total.Records != want.Total.Records {
		t.Fatalf("%d groups of %d records, want %d of %d", len(got.Rows), got.Total.Records, len(want.Rows), want.Total.Records)
	}
	for i, r := range got.Rows {
		w := want.Rows[i]
		if d := cmp.Diff(w.Keys, r.Keys); d != "" || r.Records != w.Records || !closeTo(r.Cost, w.Cost) || !closeTo(r.GPUHours, w.GPUHours) {
			t.Fatalf("group %v: %+v, want %+v", w.Keys, r, w)
		}
	}
}

func closeTo(a, b float64) bool { d := a - b; return d < 1e-9*max(1, b) && d > -1e-9*max(1, b) }
