package spot

import (
	"math"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// testFleet is 2 H100 machines and 1 A100 machine in eastus.
func testFleet(t *testing.T) *fleet.Fleet {
	t.Helper()
	f, err := fleet.Build(fleet.Spec{Regions: []fleet.RegionSpec{{Name: "eastus", Zones: []fleet.ZoneSpec{{Name: "1", Blocks: []fleet.BlockSpec{
		{Name: "h", Nodes: []fleet.GroupSpec{{SKU: "Standard_ND96isr_H100_v5", Count: 2}}},
		{Name: "a", Nodes: []fleet.GroupSpec{{SKU: "Standard_ND96amsr_A100_v4", Count: 1}}},
	}}}}}}, fleet.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var h100 = Key{Model: "H100-80G", Region: "eastus"}

// TestTarget: the catalog's spot price up to the knee, linear to the
// on-demand price at full use, never beyond.
func TestTarget(t *testing.T) {
	p := fleet.Price{OnDemand: 98.32, Spot: 29.50}
	for _, tc := range []struct {
		util, want float64
	}{{0, 29.50 / 8}, {0.7, 29.50 / 8}, {0.85, (29.50 + (98.32-29.50)*0.5) / 8}, {1, 98.32 / 8}, {1.5, 98.32 / 8}} {
		if got := Target(p, 8, tc.util); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Target(util %v) = %v, want %v", tc.util, got, tc.want)
		}
	}
	if got := Target(p, 0, 0.5); got != 0 {
		t.Errorf("Target with no GPUs = %v, want 0", got)
	}
}

// TestRules: the headroom applies to market prices, not to firm ones;
// eviction is strictly above a positive max price.
func TestRules(t *testing.T) {
	if got := AdmitBound(4, false); got != 5 {
		t.Errorf("AdmitBound(4, market) = %v, want 5", got)
	}
	if got := AdmitBound(4, true); got != 4 {
		t.Errorf("AdmitBound(4, firm) = %v, want 4", got)
	}
	for _, tc := range []struct {
		price, max float64
		want       bool
	}{{4, 3.99, true}, {4, 4, false}, {4, 0, false}, {0.02, 0.01, true}} {
		if got := Evicts(tc.price, tc.max); got != tc.want {
			t.Errorf("Evicts(%v, %v) = %v, want %v", tc.price, tc.max, got, tc.want)
		}
	}
	spotW := &workload.Workload{Spec: workload.Spec{Priority: workload.PrioritySpot, MaxPrice: 1}}
	normal := &workload.Workload{Spec: workload.Spec{Priority: workload.PriorityNormal, MaxPrice: 1}}
	unbounded := &workload.Workload{Spec: workload.Spec{Priority: workload.PrioritySpot}}
	if !Bound(spotW) || Bound(normal) || Bound(unbounded) {
		t.Error("Bound: want only spot work with a max price")
	}
}

// TestMarketSteps: the first step quotes the target, later ones move a
// sixtieth of the way; a set price replaces the quote while the average
// goes on underneath.
func TestMarketSteps(t *testing.T) {
	f := testFleet(t)
	m := New(f)
	if len(m.Keys()) != 2 || m.Keys()[0] != h100 {
		t.Fatalf("keys %v, want H100 then A100 in eastus", m.Keys())
	}
	hi, _ := m.Index(h100)
	full := make([]int64, 2)
	full[hi] = 16 * resource.PerGPU
	m.Step(nil, nil)
	floor := 29.50 / 8
	if q := m.Quotes()[hi]; q.PerGPUHour != floor || q.Catalog != floor || q.Firm {
		t.Fatalf("first quote %+v, want the catalog price %v", q, floor)
	}
	m.Step(full, nil)
	want := floor + (98.32/8-floor)*Smoothing
	if got := m.Price(hi); math.Abs(got-want) > 1e-12 {
		t.Fatalf("after one full step: %v, want %v", got, want)
	}
	m.Step(full, map[Key]float64{h100: 9})
	if q := m.Quotes()[hi]; q.PerGPUHour != 9 || !q.Firm || q.Utilization != 1 {
		t.Fatalf("set price: %+v, want 9, firm, utilization 1", q)
	}
	m.Step(full, nil)
	if got := m.Price(hi); got <= want || got >= 98.32/8 {
		t.Fatalf("after the set price went: %v, want the average, between %v and %v", got, want, 98.32/8)
	}
}

// TestAdvanceIsSteps: advancing a market by n minutes is n steps with the
// same inputs, whole minutes only, and a clock going back steps nothing.
func TestAdvanceIsSteps(t *testing.T) {
	f := testFleet(t)
	a, b := New(f), New(f)
	hi, _ := a.Index(h100)
	used := make([]int64, 2)
	used[hi] = 15 * resource.PerGPU
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a.Advance(t0, used, nil)
	b.Step(used, nil)
	a.Advance(t0.Add(7*time.Minute+30*time.Second), used, nil)
	for range 7 {
		b.Step(used, nil)
	}
	if a.Price(hi) != b.Price(hi) {
		t.Fatalf("Advance 7.5 min = %v, 7 steps = %v", a.Price(hi), b.Price(hi))
	}
	a.Advance(t0.Add(8*time.Minute), used, nil) // the half minute left counts
	b.Step(used, nil)
	if a.Price(hi) != b.Price(hi) {
		t.Fatalf("Advance to 8 min = %v, 8 steps = %v", a.Price(hi), b.Price(hi))
	}
	before := a.Price(hi)
	a.Advance(t0, used, nil)
	if a.Price(hi) != before {
		t.Fatalf("clock back: %v, want %v", a.Price(hi), before)
	}
	a.Advance(t0, used, map[Key]float64{h100: 0.5})
	if q := a.Quotes()[hi]; q.PerGPUHour != 0.5 || !q.Firm {
		t.Fatalf("a set price between steps: %+v, want 0.5 at once", q)
	}
}

// TestUsedAndCarry: Used counts running replicas' milli-GPU by market;
// a market rebuilt for a changed fleet keeps the averages it had.
func TestUsedAndCarry(t *testing.T) {
	f := testFleet(t)
	m := New(f)
	n := f.Nodes[0].ID
	ws := []*workload.Workload{
		{Running: &workload.Assignment{Replicas: []workload.Replica{{Node: n, GPUs: []int{0, 1}, Milli: resource.PerGPU}}}},
		{Running: &workload.Assignment{Replicas: []workload.Replica{{Node: n, GPUs: []int{2}, Milli: 500}}}},
		{}, // pending
		{Running: &workload.Assignment{Replicas: []workload.Replica{{Node: "gone", GPUs: []int{0}, Milli: resource.PerGPU}}}},
	}
	hi, _ := m.Index(h100)
	if got := m.Used(f, ws); got[hi] != 2500 || got[1-hi] != 0 {
		t.Fatalf("Used = %v, want 2500 milli on H100", got)
	}
	full := []int64{16 * resource.PerGPU, 8 * resource.PerGPU}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.Advance(t0, nil, nil)
	m.Advance(t0.Add(30*time.Minute), full, nil)
	price := m.Price(hi)
	c := New(f).Carry(m)
	c.Advance(t0.Add(30*time.Minute), full, nil)
	if c.Price(hi) != price {
		t.Fatalf("carried market quotes %v, want %v", c.Price(hi), price)
	}
	c.Advance(t0.Add(31*time.Minute), full, nil)
	m.Advance(t0.Add(31*time.Minute), full, nil)
	if c.Price(hi) != m.Price(hi) {
		t.Fatalf("carried market steps to %v, the original to %v", c.Price(hi), m.Price(hi))
	}
}

// TestSaveRestoreContinues: a market restored from Save steps on exactly
// as the one that kept running (bit-identical quotes), instead of
// starting again at its target; invalid or unknown saved markets are
// ignored.
func TestSaveRestoreContinues(t *testing.T) {
	f := testFleet(t)
	run := New(f)
	if _, ok := run.Save(); ok {
		t.Fatal("Save before the first step")
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	full := run.Used(f, nil)
	for i := range full {
		full[i] = run.cap[i]
	}
	run.Advance(t0, make([]int64, len(full)), nil)
	for m := 1; m <= 30; m++ {
		run.Advance(t0.Add(time.Duration(m)*Step), full, nil)
	}
	saved, ok := run.Save()
	if !ok || len(saved.Markets) != len(run.Keys()) {
		t.Fatalf("Save: %+v %v", saved, ok)
	}
	bad := saved
	bad.Markets = append(append([]SavedMarket(nil), saved.Markets...),
		SavedMarket{Model: "nope", Region: "x", Price: 1}, SavedMarket{Model: saved.Markets[0].Model, Region: saved.Markets[0].Region, Price: math.NaN()})
	back := New(f).Restore(bad)
	for i := range run.Quotes() {
		if back.Quotes()[i] != run.Quotes()[i] {
			t.Fatalf("restored quote %+v, want %+v", back.Quotes()[i], run.Quotes()[i])
		}
	}
	fresh := New(f)
	for m := 31; m <= 40; m++ {
		now := t0.Add(time.Duration(m) * Step)
		run.Advance(now, full, nil)
		back.Advance(now, full, nil)
		fresh.Advance(now, full, nil)
	}
	for i := range run.Quotes() {
		if back.Quotes()[i] != run.Quotes()[i] {
			t.Errorf("after 10 steps: restored %+v, kept running %+v", back.Quotes()[i], run.Quotes()[i])
		}
		if fresh.Quotes()[i].PerGPUHour == run.Quotes()[i].PerGPUHour {
			t.Errorf("a fresh market quotes what the running one does: the test shows nothing")
		}
	}
	if New(f).Restore(Saved{Markets: saved.Markets}).started {
		t.Error("a state without a time restored")
	}
	if got := New(f).Restore(Saved{Last: t0, Markets: []SavedMarket{{Model: saved.Markets[0].Model, Region: saved.Markets[0].Region, Price: 2, Utilization: 1.5}}}); got.started {
		t.Error("a utilization above 1 restored")
	}
}
