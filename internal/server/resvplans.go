package server

import (
	"time"

	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// Planned holds on the capacity calendar (docs/server.md, Time-window
// reservations). The core holds capacity for a pending workload's planned
// start (sched.Pending.Planned) from that start on; a reservation is
// admitted only if it fits beside those holds, so that a reservation
// never takes the machines a standing plan waits for. The holds are the
// last cycle's (whyIndex), of the workloads still pending when the
// reservation is asked for; a workload that has started, ended or been
// cancelled since holds nothing.

// plannedBookings returns the last cycle's planned holds of the workloads
// pending in wd, as bookings of the capacity calendar.
func (s *Server) plannedBookings(wd *world) []tenancy.Booking {
	idx := s.why.Load()
	if idx == nil {
		return nil // no cycle yet: no plans
	}
	var out []tenancy.Booking
	for _, x := range wd.Workloads {
		if x.State != store.StatePending || x.Running != nil {
			continue
		}
		if p, ok := idx.Pending(x.Key()); ok && p.Planned != nil {
			out = append(out, plannedBooking(p.Planned, s.expectedRuntime(x)))
		}
	}
	return out
}

// plannedBooking is the calendar's booking for a planned start: the nodes
// the plan holds GPUs on (a reservation takes whole machines, so a
// machine with any GPU held is not free for one) of the plan's GPU model
// in its region, in its block for a gang, from the planned start for the
// workload's expected runtime (open-ended when that is unknown: the core
// does not expect it to end). Plans of single-node work that the core
// puts on one machine each book a machine of their own: the count errs on
// the side of the plan (PlannedStart does not say which machines).
func plannedBooking(pl *sched.PlannedStart, runtime time.Duration) tenancy.Booking {
	b := tenancy.Booking{Region: pl.Region, Model: pl.Flavor, Block: pl.Block, Machines: pl.Nodes, Start: pl.Start}
	if runtime > 0 {
		b.End = pl.Start.Add(runtime)
	}
	return b
}
