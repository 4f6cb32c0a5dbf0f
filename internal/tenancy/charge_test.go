package tenancy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
)

func lim(n int) *resource.MilliGPU { m := resource.GPUs(n); return &m }

// chargeTree: org (A100 all regions, limit 20) > team (A100 eastus limit
// 8, A100 all regions limit 4).
func chargeTree(t *testing.T) *Tree {
	t.Helper()
	tree, err := NewTree([]TenantSpec{
		{Name: "org", Quota: []QuotaSpec{{Flavor: "A100-80G", Limit: lim(20)}}},
		{Name: "team", Parent: "org", Quota: []QuotaSpec{
			{Flavor: "A100-80G", Region: "eastus", Limit: lim(8)},
			{Flavor: "A100-80G", Limit: lim(4)},
			{Flavor: "T4"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func TestChargedEveryMatchingEntryOnThePath(t *testing.T) {
	tree := chargeTree(t)
	team, _ := tree.Lookup("team")
	got := tree.Charged(team, Key{Model: "A100-80G", Region: "eastus"})
	want := []Ref{{1, 0}, {1, 1}, {0, 0}} // eastus and all-regions entries of team, then org
	if len(got) != len(want) {
		t.Fatalf("Charged = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Charged = %v, want %v", got, want)
		}
	}
	if got := tree.Charged(team, Key{Model: "A100-80G", Region: "westus2"}); len(got) != 2 {
		t.Errorf("westus2: Charged = %v, want the all-regions entries of team and org", got)
	}
	if got := tree.Charged(team, Key{Model: "H100-80G", Region: "eastus"}); len(got) != 0 {
		t.Errorf("H100: Charged = %v, want none", got)
	}
}

func TestChargeReservationsActiveOnly(t *testing.T) {
	tree := chargeTree(t)
	cat := fleet.Builtin()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	rs := []Reservation{
		{Name: "now", Owner: "team", Region: "eastus", SKU: "Standard_ND96amsr_A100_v4", Count: 1},
		{Name: "later", Owner: "team", Region: "eastus", SKU: "Standard_ND96amsr_A100_v4", Count: 1, Start: now.Add(time.Hour)},
		{Name: "ghost", Owner: "nobody", Region: "eastus", SKU: "Standard_ND96amsr_A100_v4", Count: 1},
	}
	l := NewLedger(tree)
	tree.ChargeReservations(l, rs, cat, now)
	if l[1][0] != resource.GPUs(8) || l[1][1] != resource.GPUs(8) || l[0][0] != resource.GPUs(8) || l[1][2] != 0 {
		t.Errorf("ledger = %v, want 8 GPUs on team's eastus and all-regions A100 entries and org's", l)
	}
}

func TestOverlaps(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	tests := []struct {
		a, b Reservation
		want bool
	}{
		{Reservation{}, Reservation{}, true},
		{Reservation{Start: h(0), End: h(2)}, Reservation{Start: h(1), End: h(3)}, true},
		{Reservation{Start: h(0), End: h(1)}, Reservation{Start: h(1), End: h(3)}, false},
		{Reservation{End: h(1)}, Reservation{Start: h(2)}, false},
		{Reservation{Start: h(5)}, Reservation{End: h(6)}, true},
	}
	for i, tc := range tests {
		if got := tc.a.Overlaps(&tc.b); got != tc.want {
			t.Errorf("%d: a.Overlaps(b) = %v, want %v", i, got, tc.want)
		}
		if got := tc.b.Overlaps(&tc.a); got != tc.want {
			t.Errorf("%d: b.Overlaps(a) = %v, want %v", i, got, tc.want)
		}
	}
}

func TestAdmitReservation(t *testing.T) {
	tree, err := NewTree([]TenantSpec{{Name: "t", Quota: []QuotaSpec{{Flavor: "H100-80G", Region: "eastus", Limit: lim(16)}}}})
	if err != nil {
		t.Fatal(err)
	}
	cat := fleet.Builtin()
	h100 := func(name string, n int) Reservation {
		return Reservation{Name: name, Owner: "t", Region: "eastus", SKU: "Standard_ND96isr_H100_v5", Count: n}
	}
	running := NewLedger(tree)
	r1 := h100("r1", 2) // 16 GPUs: exactly the limit
	if err := tree.AdmitReservation(&r1, nil, running, cat); err != nil {
		t.Fatalf("first 16 GPUs: %v", err)
	}
	r2 := h100("r2", 3)
	err = tree.AdmitReservation(&r2, []Reservation{r1}, running, cat)
	var ol *OverLimitError
	if !errors.As(err, &ol) || !errors.Is(err, ErrOverLimit) || ol.Reserved != resource.GPUs(16) || ol.Asks != resource.GPUs(24) {
		t.Fatalf("r2 = %v, want an OverLimitError with 16 reserved and 24 asked", err)
	}
	for _, want := range []string{"tenant t", "limit 16", "16 reserved", "24 asked", "= 40"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// Running work outside reservations counts too.
	tree.ChargeUse(running, "t", Key{Model: "H100-80G", Region: "eastus"}, resource.GPUs(8))
	r3 := h100("r3", 2)
	if err := tree.AdmitReservation(&r3, nil, running, cat); !errors.Is(err, ErrOverLimit) {
		t.Errorf("16 reserved with 8 running = %v, want ErrOverLimit", err)
	}
	// A reservation that ends before the other starts does not overlap.
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	early, late := h100("early", 2), h100("late", 1)
	early.End, late.Start = t0, t0
	if err := tree.AdmitReservation(&late, []Reservation{early}, NewLedger(tree), cat); err != nil {
		t.Errorf("disjoint in time: %v", err)
	}
}
