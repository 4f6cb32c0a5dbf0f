package server

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// Bounds on a reservation's window (see docs/server.md, reservations):
// capacity may be booked up to maxReservationLead ahead (start), for at
// most maxReservationWindow (end - start; a reservation without end is
// open-ended, as before). A start in the past means now.
const (
	maxReservationLead   = 5 * 366 * 24 * time.Hour
	maxReservationWindow = 366 * 24 * time.Hour
)

// checkWindow validates a requested window at now, naming the field.
func checkWindow(start, end, now time.Time) error {
	from := start
	if from.IsZero() || from.Before(now) {
		from = now
	}
	switch {
	case !start.IsZero() && start.Sub(now) > maxReservationLead:
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "start", "start %s is more than %v ahead (the most a reservation may be booked in advance)", start.UTC().Format(time.RFC3339), maxReservationLead)
	case end.IsZero():
		return nil
	case !end.After(start):
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "end", "end must be after start")
	case !end.After(now):
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "end", "end %s is in the past", end.UTC().Format(time.RFC3339))
	case end.Sub(from) > maxReservationWindow:
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "end", "the window is %v long, more than the most a reservation may last (%v)", end.Sub(from).Round(time.Second), maxReservationWindow)
	}
	return nil
}

// checkCalendar refuses (409 InsufficientCapacity) a reservation (new, or
// grown to its new count) that does not fit the capacity calendar for its
// window: the other reservations and the bookings (the planned holds, see
// plannedBookings). Partitioned machines serve no reservation.
func checkCalendar(wd *world, res *store.Reservation, bookings []tenancy.Booking, now time.Time) error {
	r := reservationModel(res)
	others := otherReservations(wd, res)
	part := wd.partitioned()
	usable := func(n *fleet.Node) bool { _, p := part[n.ID]; return !p }
	return tenancy.CheckCalendarWith(&r, others, bookings, wd.Fleet, usable, now)
}

// bindReservation chooses the machines of res for its window (all or
// nothing, see tenancy.Bind), skipping those of the other reservations
// whose windows overlap it.
func bindReservation(wd *world, res *store.Reservation, count int, now time.Time) ([]fleet.NodeID, error) {
	tr := reservationModel(res)
	tr.Name, tr.Count, tr.Nodes = res.Name, count, nil
	return tenancy.Bind(&tr, wd.Fleet, wd.nodeUse(res, now))
}

// nodeUse tells reservation binding how each node is used for res's
// window. A node is reserved when another reservation overlapping res in
// time holds it; blocking when non-preemptible work of another tenant runs
// there that is not expected to end by res's start (or by now, for a
// reservation that starts now). No reservation is bound to a partitioned
// node, whoever owns the partition (as internal/config binds them).
func (w *world) nodeUse(res *store.Reservation, now time.Time) func(*fleet.Node) tenancy.NodeUse {
	partitioned := w.partitioned()
	self := reservationModel(res)
	reserved := map[fleet.NodeID]bool{}
	for _, r := range w.Reservations {
		if r.Key() == res.Key() {
			continue
		}
		if o := reservationModel(r); !o.Overlaps(&self) || o.State(now) == tenancy.StateExpired {
			continue
		}
		for _, n := range r.Nodes {
			reserved[n] = true
		}
	}
	by := res.Start
	if by.Before(now) {
		by = now
	}
	busy := map[fleet.NodeID]bool{}
	blocking := map[fleet.NodeID]bool{}
	for _, x := range w.Workloads {
		if x.Running == nil {
			continue
		}
		rt := x.Spec.ExpectedRuntime
		endsInTime := rt > 0 && !x.Running.StartedAt.Add(rt).After(by) && by.After(now)
		for _, r := range x.Running.Replicas {
			busy[r.Node] = true
			if !x.Spec.Preemptible && x.Tenant != res.Tenant && !endsInTime {
				blocking[r.Node] = true
			}
		}
	}
	down := map[fleet.NodeID]bool{}
	for _, id := range w.Down {
		down[id] = true
	}
	return func(n *fleet.Node) tenancy.NodeUse {
		_, part := partitioned[n.ID]
		return tenancy.NodeUse{Reserved: reserved[n.ID], Partitioned: part, Down: down[n.ID], Busy: busy[n.ID], Blocking: blocking[n.ID]}
	}
}

// bindApproaching chooses machines for every reservation whose window
// opens within tenancy.BindLead and that has fewer than its count, and
// stores them (the cycle calls it, on the leader only, before running the
// core). A reservation that cannot be bound whole now is topped up with
// what is free and retried when the store changes (not on every cycle: an
// attempt that bound nothing remembers the revision it saw); each binding
// is a ReservationBound event. It reports whether it changed anything.
func (s *Server) bindApproaching(ctx context.Context, now time.Time) bool {
	var rev, due int64
	err := s.st.View(ctx, func(tx store.ReadTx) error {
		rev = tx.Revision()
		rs, err := store.List[store.Reservation](tx, "")
		for _, r := range rs {
			if m := reservationModel(r); len(r.Nodes) < r.Count && m.BindDue(now) {
				due++
			}
		}
		return err
	})
	if err != nil || due == 0 || (rev == s.bindIdle.rev.Load() && due == s.bindIdle.due.Load()) {
		return false // nothing due, or nothing changed since an attempt that bound nothing
	}
	changed := false
	err = s.st.Update(ctx, func(tx store.WriteTx) error {
		wd, err := loadWorld(tx, s.cat.Load(), true)
		if err != nil {
			return err
		}
		for _, r := range wd.Reservations {
			if m := reservationModel(r); len(r.Nodes) >= r.Count || !m.BindDue(now) {
				continue
			}
			missing := r.Count - len(r.Nodes)
			ids, err := bindReservation(wd, r, missing, now)
			short := err != nil
			if short {
				ids = bindSome(wd, r, missing, now)
			}
			if len(ids) == 0 {
				continue
			}
			r.Nodes = append(r.Nodes, ids...)
			if err := store.Put(tx, r, r.Meta.Revision); err != nil {
				return err
			}
			msg := fmt.Sprintf("bound %d machines for the window from %s", len(ids), r.Start.UTC().Format(time.RFC3339))
			if short {
				msg += fmt.Sprintf(" (%d of %d; the rest when free)", len(r.Nodes), r.Count)
			}
			if err := store.AppendEvent(tx, &store.Event{Time: now, Type: store.EventReservationBound, Object: store.ReservationObject(r.Key()), Tenant: r.Tenant, Message: msg}); err != nil {
				return err
			}
			changed = true
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("scheduler: binding reservations", "err", err)
		}
		return false
	}
	if !changed {
		s.bindIdle.rev.Store(rev)
		s.bindIdle.due.Store(due)
	}
	return changed
}

// bindAttempt remembers the last reservation binding that bound nothing:
// the store revision and how many reservations were due then.
type bindAttempt struct{ rev, due atomic.Int64 }

// bindSome binds as many of want machines as are available now (fewer
// than want, since Bind refused all of them): Bind succeeds exactly for
// counts up to what is available, so a binary search finds it.
func bindSome(wd *world, r *store.Reservation, want int, now time.Time) []fleet.NodeID {
	var best []fleet.NodeID
	lo, hi := 1, want-1
	for lo <= hi {
		mid := (lo + hi) / 2
		if ids, err := bindReservation(wd, r, mid, now); err == nil {
			best, lo = ids, mid+1
		} else {
			hi = mid - 1
		}
	}
	return best
}

// reservationState is the API's state of a stored reservation at now.
func reservationState(r *store.Reservation, now time.Time) string {
	m := reservationModel(r)
	return string(m.State(now))
}

// windowText describes a reservation's window for events ("" when it
// has none).
func windowText(r *store.Reservation) string {
	switch {
	case r.Start.IsZero() && r.End.IsZero():
		return ""
	case r.End.IsZero():
		return " from " + r.Start.UTC().Format(time.RFC3339)
	case r.Start.IsZero():
		return " until " + r.End.UTC().Format(time.RFC3339)
	}
	return " from " + r.Start.UTC().Format(time.RFC3339) + " to " + r.End.UTC().Format(time.RFC3339)
}
