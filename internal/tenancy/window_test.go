package tenancy

import (
	"errors"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
)

var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

func at(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }

// twoZones: eastus zone 1 has 2 H100 machines (z1-n0000, z1-n0001), zone
// 2 has one (z2-n0000).
func twoZones(t *testing.T) *fleet.Fleet {
	t.Helper()
	g := []fleet.GroupSpec{{SKU: "Standard_ND96isr_H100_v5", Count: 2}}
	f, err := fleet.Build(fleet.Spec{Regions: []fleet.RegionSpec{{Name: "eastus", Zones: []fleet.ZoneSpec{
		{Name: "1", Blocks: []fleet.BlockSpec{{Name: "z1", Nodes: g}}},
		{Name: "2", Blocks: []fleet.BlockSpec{{Name: "z2", Nodes: []fleet.GroupSpec{{SKU: "Standard_ND96isr_H100_v5", Count: 1}}}}},
	}}}}, fleet.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func res(name, zone string, count int, start, end time.Time, nodes ...fleet.NodeID) Reservation {
	return Reservation{Name: name, Region: "eastus", Zone: zone, SKU: "Standard_ND96isr_H100_v5", Count: count, Start: start, End: end, Nodes: nodes}
}

func TestCheckCalendar(t *testing.T) {
	f := twoZones(t)
	all := func(*fleet.Node) bool { return true }
	var none time.Time
	for _, tc := range []struct {
		name   string
		r      Reservation
		others []Reservation
		usable func(*fleet.Node) bool
		ok     bool
	}{
		{"empty calendar", res("r", "", 3, at(10), at(12)), nil, all, true},
		{"more than the region", res("r", "", 4, at(10), at(12)), nil, all, false},
		{"overlap, too many", res("r", "", 2, at(10), at(12)), []Reservation{res("o", "", 2, at(11), at(13))}, all, false},
		{"overlap, fits", res("r", "", 1, at(10), at(12)), []Reservation{res("o", "", 2, at(11), at(13))}, all, true},
		{"back to back", res("r", "", 3, at(10), at(12)), []Reservation{res("o", "", 3, at(12), at(14)), res("p", "", 3, none, at(10))}, all, true},
		{"expired rival", res("r", "", 3, none, at(2)), []Reservation{res("o", "", 3, none, t0)}, all, true},
		{"open-ended rival overlaps", res("r", "", 1, at(100), at(101)), []Reservation{res("o", "", 3, none, none)}, all, false},
		{"other SKU or region", res("r", "", 3, at(1), at(2)), []Reservation{{Name: "o", Region: "westus", SKU: "Standard_ND96isr_H100_v5", Count: 3}}, all, true},
		{"zone too small", res("r", "2", 2, at(1), at(2)), nil, all, false},
		{"zone fits", res("r", "1", 2, at(1), at(2)), []Reservation{res("o", "", 1, at(1), at(2))}, all, true},
		{"zoned demand over its zone", res("r", "1", 1, at(1), at(2)), []Reservation{res("o", "1", 2, at(1), at(2))}, all, false},
		// A bound rival holds its own machines: zone 1's two, so a zone 1
		// reservation finds none though the region has one free.
		{"bound rival takes the zone", res("r", "1", 1, at(1), at(2)), []Reservation{res("o", "", 2, none, none, "z1-n0000", "z1-n0001")}, all, false},
		{"bound rival elsewhere", res("r", "2", 1, at(1), at(2)), []Reservation{res("o", "", 2, none, none, "z1-n0000", "z1-n0001")}, all, true},
		{"partitioned machines serve none", res("r", "", 2, at(1), at(2)), nil, func(n *fleet.Node) bool { return n.Zone == "2" }, false},
	} {
		err := CheckCalendar(&tc.r, tc.others, f, tc.usable, t0)
		if tc.ok != (err == nil) {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
		var ce *CalendarError
		if err != nil && (!errors.Is(err, ErrCalendarFull) || !errors.Is(err, ErrInsufficientCapacity) || !errors.As(err, &ce) || ce.Name != "r") {
			t.Errorf("%s: %v is not a CalendarError for r", tc.name, err)
		}
	}
}

func TestReservationState(t *testing.T) {
	r := res("r", "", 1, at(2), at(4))
	for _, tc := range []struct {
		now      time.Time
		state    State
		bindDue  bool
		upcoming bool // with machines
	}{
		{t0, StateScheduled, false, true},
		{at(2).Add(-BindLead), StateScheduled, true, true},
		{at(2), StateActive, true, false},
		{at(4), StateExpired, false, false},
	} {
		if got := r.State(tc.now); got != tc.state {
			t.Errorf("State(%v) = %s, want %s", tc.now, got, tc.state)
		}
		if got := r.BindDue(tc.now); got != tc.bindDue {
			t.Errorf("BindDue(%v) = %v, want %v", tc.now, got, tc.bindDue)
		}
		bound := r
		bound.Nodes = []fleet.NodeID{"z1-n0000"}
		if r.Upcoming(tc.now) || bound.Upcoming(tc.now) != tc.upcoming {
			t.Errorf("Upcoming(%v): unbound %v, bound %v; want false, %v", tc.now, r.Upcoming(tc.now), bound.Upcoming(tc.now), tc.upcoming)
		}
	}
	if open := res("r", "", 1, time.Time{}, time.Time{}); open.State(t0) != StateActive || !open.BindDue(t0) {
		t.Error("a reservation without window is Active and due at once")
	}
}
