package tenancy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
)

const h100 = fleet.SKUName("Standard_ND96isr_H100_v5")

// book is a booking of n H100 machines of eastus in [start, end).
func book(n int, start, end time.Time) Booking {
	return Booking{Region: "eastus", Model: "H100-80G", Machines: n, Start: start, End: end}
}

// TestCheckCalendarBookings: bookings (planned holds) count on the
// calendar like reservations, at the instants they start, for their
// window only, in the machines they match; the refusal names the first
// instant that does not fit and the numbers.
func TestCheckCalendarBookings(t *testing.T) {
	f := twoZones(t) // zone 1: z1-n0000, z1-n0001; zone 2: z2-n0000
	all := func(*fleet.Node) bool { return true }
	var none time.Time
	inBlock := func(b fleet.BlockID, n int, start time.Time) Booking {
		bk := book(n, start, none)
		bk.Block = b
		return bk
	}
	type refusal struct {
		at                int
		zone              string
		wanted, available int
	}
	for _, tc := range []struct {
		name     string
		r        Reservation
		others   []Reservation
		bookings []Booking
		refused  *refusal
	}{
		{"booking overlaps the window", res("r", "", 2, at(10), at(12)), nil, []Booking{book(2, at(11), at(15))}, &refusal{11, "", 4, 3}},
		{"booking from the window's start", res("r", "", 2, at(10), at(12)), nil, []Booking{book(2, at(10), at(11))}, &refusal{10, "", 4, 3}},
		{"booking starts at the window's end", res("r", "", 3, at(10), at(12)), nil, []Booking{book(3, at(12), at(15))}, nil},
		{"booking ends at the window's start", res("r", "", 3, at(10), at(12)), nil, []Booking{book(3, at(5), at(10))}, nil},
		{"booking overlaps but leaves room", res("r", "", 1, at(10), at(12)), nil, []Booking{book(2, at(11), at(15))}, nil},
		{"open-ended booking", res("r", "", 2, at(100), at(101)), nil, []Booking{book(2, at(5), none)}, &refusal{100, "", 4, 3}},
		{"open-ended reservation meets a late booking", res("r", "", 2, at(1), none), nil, []Booking{book(2, at(500), at(501))}, &refusal{500, "", 4, 3}},
		// Several instants: each booking alone leaves room for 1, both
		// never overlap, so 1 fits; 2 fail at the first booking's start.
		{"several instants, fits", res("r", "", 1, at(9), at(14)), nil, []Booking{book(2, at(10), at(11)), book(2, at(11), at(13))}, nil},
		{"several instants, first that fails", res("r", "", 2, at(9), at(14)), nil, []Booking{book(2, at(11), at(13)), book(2, at(10), at(11))}, &refusal{10, "", 4, 3}},
		{"booking and reservation together", res("r", "", 1, at(10), at(12)), []Reservation{res("o", "", 1, at(11), at(12))}, []Booking{book(1, at(11), at(12))}, nil},
		{"booking and reservation too many", res("r", "", 2, at(10), at(12)), []Reservation{res("o", "", 1, at(11), at(12))}, []Booking{book(1, at(11), at(12))}, &refusal{11, "", 4, 3}},
		// A gang's hold is in its block: zone 2's only machine.
		{"block booking takes the zone", res("r", "2", 1, at(1), at(2)), nil, []Booking{inBlock("z2", 1, at(1))}, &refusal{1, "2", 2, 1}},
		{"block booking elsewhere", res("r", "1", 2, at(1), at(2)), nil, []Booking{inBlock("z2", 1, at(1))}, nil},
		// An unzoned booking moves out of the zone the reservation needs.
		{"booking moves aside", res("r", "1", 2, at(1), at(2)), nil, []Booking{book(1, at(1), none)}, nil},
		{"booking of another model", res("r", "", 3, at(1), at(2)), nil, []Booking{{Region: "eastus", Model: "A100-80G", Machines: 3, Start: at(1)}}, nil},
		{"booking of another region", res("r", "", 3, at(1), at(2)), nil, []Booking{{Region: "westus", Model: "H100-80G", Machines: 3, Start: at(1)}}, nil},
		// A claim already short without r (zone 2 has 1 machine) does not
		// refuse r, which takes nothing it could have had.
		{"short rival refuses nobody else", res("r", "1", 2, at(1), at(2)), []Reservation{res("o", "2", 2, at(1), at(2))}, nil, nil},
		{"short booking refuses nobody else", res("r", "1", 2, at(1), at(2)), nil, []Booking{inBlock("z2", 3, at(1))}, nil},
	} {
		err := CheckCalendarWith(&tc.r, tc.others, tc.bookings, f, all, t0)
		if tc.refused == nil {
			if err != nil {
				t.Errorf("%s: %v, want it to fit", tc.name, err)
			}
			continue
		}
		var ce *CalendarError
		if !errors.As(err, &ce) || !errors.Is(err, ErrInsufficientCapacity) {
			t.Errorf("%s: %v, want a CalendarError", tc.name, err)
			continue
		}
		want := refusal{at: int(ce.At.Sub(t0) / time.Hour), zone: ce.Zone, wanted: ce.Wanted, available: ce.Available}
		if !ce.At.Equal(at(want.at)) || want != *tc.refused || ce.Name != "r" {
			t.Errorf("%s: %v, want refused %+v", tc.name, err, *tc.refused)
		}
	}
}

// TestCheckCalendarModelBooking: a booking by GPU model may use any SKU
// of the model; a reservation of one SKU fits while the booking can move
// to another, and is refused once a reservation of that other SKU leaves
// the booking only the first.
func TestCheckCalendarModelBooking(t *testing.T) {
	const small, big = fleet.SKUName("Standard_NC96ads_A100_v4"), fleet.SKUName("Standard_ND96amsr_A100_v4")
	f, err := fleet.Build(fleet.Spec{Regions: []fleet.RegionSpec{{Name: "eastus", Zones: []fleet.ZoneSpec{
		{Name: "1", Blocks: []fleet.BlockSpec{{Name: "b", Nodes: []fleet.GroupSpec{{SKU: small, Count: 1}, {SKU: big, Count: 1}}}}},
	}}}}, fleet.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	all := func(*fleet.Node) bool { return true }
	a100 := []Booking{{Region: "eastus", Model: "A100-80G", Machines: 1, Start: at(1)}}
	r := Reservation{Name: "r", Region: "eastus", SKU: big, Count: 1, Start: at(1), End: at(2)}
	if err := CheckCalendarWith(&r, nil, a100, f, all, t0); err != nil {
		t.Errorf("the booking can take the other SKU: %v", err)
	}
	rival := []Reservation{{Name: "o", Region: "eastus", SKU: small, Count: 1, Start: at(1), End: at(2)}}
	if err := CheckCalendarWith(&r, rival, nil, f, all, t0); err != nil {
		t.Errorf("a reservation of the other SKU alone leaves r its SKU: %v", err)
	}
	err = CheckCalendarWith(&r, rival, a100, f, all, t0)
	var ce *CalendarError
	if !errors.As(err, &ce) || ce.Wanted != 3 || ce.Available != 2 {
		t.Errorf("rival and booking take both machines: got %v, want 3 wanted, 2 available", err)
	}
}

// TestCalendarFlowHall checks the flow against Hall's condition on small
// random instances: every claim is served in full exactly when every set
// of claims wants no more machines than the machines any of them match;
// when not, shortfall names such a set (wanted > available).
func TestCalendarFlowHall(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var nodes []*fleet.Node
	sku := &fleet.SKU{Name: h100}
	for z := range 3 {
		for b := range 2 {
			for i := range 1 + (z+b)%3 {
				nodes = append(nodes, &fleet.Node{ID: fleet.NodeID(fmt.Sprintf("z%d-b%d-%d", z, b, i)), Region: "eastus", Zone: fmt.Sprint(z), Block: fleet.BlockID(fmt.Sprintf("z%db%d", z, b)), SKU: sku, Model: "H100-80G"})
			}
		}
	}
	classes, _ := classesOf(nodes)
	fl := newCalendarFlow(classes)
	for trial := range 500 {
		var claims []claimant
		for range 1 + rng.IntN(5) {
			// Claims match whole blocks (a class never splits).
			set := map[fleet.BlockID]bool{}
			for _, n := range nodes {
				if rng.IntN(3) == 0 {
					set[n.Block] = true
				}
			}
			claims = append(claims, claimant{want: 1 + rng.IntN(4), matches: func(n *fleet.Node) bool { return set[n.Block] }})
		}
		hall := true
		for mask := 1; mask < 1<<len(claims); mask++ {
			want, reach := 0, 0
			for _, n := range nodes {
				for c := range claims {
					if mask&(1<<c) != 0 && claims[c].matches(n) {
						reach++
						break
					}
				}
			}
			for c := range claims {
				if mask&(1<<c) != 0 {
					want += claims[c].want
				}
			}
			hall = hall && want <= reach
		}
		fl.reset(slices.Clone(classes)) // one flow for all trials: reset must leave nothing behind
		for _, c := range claims {
			fl.add(c.want, adjOf(classes, c.matches))
		}
		fl.serve()
		full := true
		for c := range claims {
			full = full && fl.served[c] == claims[c].want
		}
		if full != hall {
			t.Fatalf("trial %d: served in full %v, Hall's condition %v", trial, full, hall)
		}
		if !full {
			if w, a, _ := fl.shortfall(); w <= a {
				t.Fatalf("trial %d: shortfall %d wanted, %d available", trial, w, a)
			}
		}
	}
}

// BenchmarkCheckCalendarWith: a region of 64 blocks of 16 H100 machines
// (4 zones) and 16 of A100, 200 reservations of both SKUs (a quarter
// bound) and 16 planned holds, staggered so that the window meets them
// all, at 200 instants.
func BenchmarkCheckCalendarWith(b *testing.B) {
	const a100 = fleet.SKUName("Standard_ND96amsr_A100_v4")
	var zones []fleet.ZoneSpec
	for z := range 4 {
		var blocks []fleet.BlockSpec
		for k := range 20 {
			sku := h100
			if k >= 16 {
				sku = a100
			}
			blocks = append(blocks, fleet.BlockSpec{Name: fleet.BlockID(fmt.Sprintf("z%d-b%02d", z, k)), Nodes: []fleet.GroupSpec{{SKU: sku, Count: 16}}})
		}
		zones = append(zones, fleet.ZoneSpec{Name: fmt.Sprint(z + 1), Blocks: blocks})
	}
	f, err := fleet.Build(fleet.Spec{Regions: []fleet.RegionSpec{{Name: "eastus", Zones: zones}}}, fleet.Builtin())
	if err != nil {
		b.Fatal(err)
	}
	var others []Reservation
	next := 0
	for i := range 200 {
		sku, zone := h100, ""
		if i%4 == 3 {
			sku = a100
		}
		if i%3 == 0 {
			zone = fmt.Sprint(1 + i%4)
		}
		o := Reservation{Name: fmt.Sprint("o", i), Region: "eastus", Zone: zone, SKU: sku, Count: 2, Start: at(i), End: at(i + 10)}
		if i%4 == 1 { // bound: the next two machines of its SKU
			for len(o.Nodes) < 2 {
				if n := f.Nodes[next]; n.SKU.Name == sku {
					o.Nodes = append(o.Nodes, n.ID)
				}
				next++
			}
		}
		others = append(others, o)
	}
	var books []Booking
	for i := range 16 {
		books = append(books, Booking{Region: "eastus", Model: "H100-80G", Block: fleet.BlockID(fmt.Sprintf("z%d-b%02d", i%4, i)), Machines: 8, Start: at(12 * i)})
	}
	r := Reservation{Name: "r", Region: "eastus", SKU: h100, Count: 40, Start: at(0), End: at(210)}
	all := func(*fleet.Node) bool { return true }
	b.ResetTimer()
	for range b.N {
		if err := CheckCalendarWith(&r, others, books, f, all, t0); err != nil {
			b.Fatal(err)
		}
	}
}
