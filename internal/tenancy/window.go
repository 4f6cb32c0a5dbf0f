package tenancy

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
)

// Time-window reservations, as cloud capacity blocks and future
// reservations promise them: the capacity is admitted against the
// capacity calendar when the reservation is created (all or nothing for
// its window), but machines are chosen only when the window approaches
// (BindLead before Start). Between binding and Start the reservation is
// Scheduled with machines: others may use them only with work expected to
// end before Start, or preemptible work that leaves within the honour
// window; from Start to End it is Active; after End, Expired.

// BindLead is how long before its Start a future reservation's machines
// are chosen (Reservation.BindDue). Until then it holds no machines, only
// its place in the capacity calendar.
const BindLead = time.Hour

// State is where a reservation is in its window.
type State string

// The states of a reservation.
const (
	StateScheduled State = "Scheduled" // before Start
	StateActive    State = "Active"    // in [Start, End)
	StateExpired   State = "Expired"   // at or after End
)

// State returns the reservation's state at now.
func (r *Reservation) State(now time.Time) State {
	switch {
	case !r.End.IsZero() && !now.Before(r.End):
		return StateExpired
	case !r.Start.IsZero() && now.Before(r.Start):
		return StateScheduled
	}
	return StateActive
}

// BindDue reports whether r's machines should be chosen at now: its window
// opens within BindLead and has not ended.
func (r *Reservation) BindDue(now time.Time) bool {
	return r.State(now) != StateExpired && (r.Start.IsZero() || !now.Before(r.Start.Add(-BindLead)))
}

// Upcoming reports whether r holds machines before its window opens: it is
// bound and Scheduled at now. Its machines are lent only to work that will
// be gone by Start (see package sched).
func (r *Reservation) Upcoming(now time.Time) bool {
	return len(r.Nodes) > 0 && r.State(now) == StateScheduled
}

// ErrCalendarFull is returned (wrapped in a *CalendarError) when the
// machines that can serve a reservation are all promised to other
// reservations at some instant of its window.
var ErrCalendarFull = errors.New("tenancy: capacity calendar full for the reservation's window")

// CalendarError names the first instant of the window at which the
// reservation does not fit, and the numbers.
type CalendarError struct {
	Name      string
	At        time.Time // the instant (the window's start, or another reservation's)
	Zone      string    // the zone short of machines, "" for the region
	Wanted    int       // machines the reservations active then ask of that scope
	Available int       // machines that can serve them there
}

func (e *CalendarError) Error() string {
	where := "the region"
	if e.Zone != "" {
		where = "zone " + e.Zone
	}
	return fmt.Sprintf("%v: reservation %q: at %s, %d machines wanted in %s by it and the reservations overlapping it, %d available",
		ErrCalendarFull, e.Name, e.At.UTC().Format(time.RFC3339), e.Wanted, where, e.Available)
}

// Unwrap makes errors.Is(err, ErrCalendarFull) and
// errors.Is(err, ErrInsufficientCapacity) true.
func (e *CalendarError) Unwrap() []error { return []error{ErrCalendarFull, ErrInsufficientCapacity} }

// CheckCalendar checks that r fits the capacity calendar from now on: at
// every instant of its window, the machines of its region and SKU that
// usable accepts can serve r and every reservation of others active then
// (bound ones on their own machines, unbound ones by count, a zoned one
// only in its zone). The instants checked are r's start and every start of
// another reservation inside r's window, where the set of active
// reservations grows. others must not include r.
func CheckCalendar(r *Reservation, others []Reservation, f *fleet.Fleet, usable func(*fleet.Node) bool, now time.Time) error {
	from := r.Start
	if from.IsZero() || from.Before(now) {
		from = now
	}
	window := Reservation{Start: from, End: r.End}
	var rivals []*Reservation
	instants := []time.Time{from}
	for i := range others {
		o := &others[i]
		if o.Region != r.Region || o.SKU != r.SKU || !o.Overlaps(&window) {
			continue
		}
		rivals = append(rivals, o)
		if o.Start.After(from) {
			instants = append(instants, o.Start)
		}
	}
	slices.SortFunc(instants, func(a, b time.Time) int { return a.Compare(b) })
	instants = slices.Compact(instants)
	var nodes []*fleet.Node
	for _, n := range f.Nodes {
		if r.Region == n.Region && r.SKU == n.SKU.Name && usable(n) {
			nodes = append(nodes, n)
		}
	}
	for _, at := range instants {
		if err := fitsAt(r, rivals, nodes, at); err != nil {
			return err
		}
	}
	return nil
}

// fitsAt checks one instant: the bound reservations active at it keep
// their machines; r and the unbound ones must fit the rest, each zone's
// zoned demand within its zone and the whole demand within the region
// (Hall's condition for zone sets nested in the region).
func fitsAt(r *Reservation, rivals []*Reservation, nodes []*fleet.Node, at time.Time) error {
	taken := map[fleet.NodeID]bool{}
	wantZone := map[string]int{}
	want := 0
	demand := func(o *Reservation) {
		want += o.Count
		if o.Zone != "" {
			wantZone[o.Zone] += o.Count
		}
	}
	demand(r)
	for _, o := range rivals {
		if !o.Active(at) {
			continue
		}
		if len(o.Nodes) == 0 {
			demand(o)
			continue
		}
		for _, id := range o.Nodes {
			taken[id] = true
		}
	}
	free, freeZone := 0, map[string]int{}
	for _, n := range nodes {
		if !taken[n.ID] {
			free++
			freeZone[n.Zone]++
		}
	}
	zones := make([]string, 0, len(wantZone))
	for z := range wantZone {
		zones = append(zones, z)
	}
	slices.Sort(zones)
	for _, z := range zones {
		if wantZone[z] > freeZone[z] {
			return &CalendarError{Name: r.Name, At: at, Zone: z, Wanted: wantZone[z], Available: freeZone[z]}
		}
	}
	if want > free {
		return &CalendarError{Name: r.Name, At: at, Wanted: want, Available: free}
	}
	return nil
}
