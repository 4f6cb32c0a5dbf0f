package tenancy

import (
	"errors"
	"fmt"
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
// reservations or bookings (planned starts) at some instant of its window.
var ErrCalendarFull = errors.New("tenancy: capacity calendar full for the reservation's window")

// CalendarError names the first instant of the window at which the
// reservation does not fit, and the numbers.
type CalendarError struct {
	Name      string
	At        time.Time // the instant (the window's start, or another claim's)
	Zone      string    // the zone short of machines, "" for the region
	Wanted    int       // machines it and the claims competing with it then ask of that scope
	Available int       // machines that can serve them there
}

func (e *CalendarError) Error() string {
	where := "the region"
	if e.Zone != "" {
		where = "zone " + e.Zone
	}
	return fmt.Sprintf("%v: reservation %q: at %s, %d machines wanted in %s by it and the reservations and planned starts overlapping it, %d available",
		ErrCalendarFull, e.Name, e.At.UTC().Format(time.RFC3339), e.Wanted, where, e.Available)
}

// Unwrap makes errors.Is(err, ErrCalendarFull) and
// errors.Is(err, ErrInsufficientCapacity) true.
func (e *CalendarError) Unwrap() []error { return []error{ErrCalendarFull, ErrInsufficientCapacity} }

// CheckCalendar checks that r fits the capacity calendar from now on: at
// every instant of its window, the usable machines of its region can
// serve r and every reservation of others active then (bound ones on
// their own machines, unbound ones by count, a zoned one only in its
// zone). It is CheckCalendarWith without bookings (no planned holds: the
// config loader's case). others must not include r.
func CheckCalendar(r *Reservation, others []Reservation, f *fleet.Fleet, usable func(*fleet.Node) bool, now time.Time) error {
	return CheckCalendarWith(r, others, nil, f, usable, now)
}
