package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Planned starts and overruns as `why` shows them.
//
// The core's planned start (sched.Pending.Planned) names the running
// workloads whose expected ends it waits for, and they may be other
// tenants'. The core's Reason text names them all: it is shown to the
// admin only. A tenant's token gets the reason rebuilt from the blocker
// and the plan with only its own tenant's workloads named (the others
// counted), and the same in planned_after.

// nameShown returns which workloads the caller may see named in a
// planned start: the admin every one, a tenant token its own tenant's
// (the core's workload.ID is the store key "tenant/name"), anyone else
// none.
func nameShown(p principal) func(workload.ID) bool {
	if p.admin {
		return func(workload.ID) bool { return true }
	}
	return func(id workload.ID) bool {
		tenant, _ := store.SplitKey(string(id))
		return p.tenant != "" && tenant == p.tenant
	}
}

// pendingReason is the pending workload's reason as the caller may see
// it: the core's text when the caller may see every name in it, else the
// blocker's text followed by the plan rendered with only the names show
// admits.
func pendingReason(p sched.Pending, admin bool, show func(workload.ID) bool) string {
	if p.Planned == nil || admin {
		return p.Reason
	}
	plan := p.Planned.Text(show)
	var base string
	switch full := p.Planned.Text(nil); {
	case len(p.Blockers) > 0:
		base = p.Blockers[0].String()
	case strings.HasSuffix(p.Reason, "; "+full):
		base = strings.TrimSuffix(p.Reason, "; "+full)
	default:
		// A text the core did not render from its blockers: it may name
		// anything, so only the plan is shown.
		return plan
	}
	if base == "" {
		return plan
	}
	return base + "; " + plan
}

// setPlanned fills why's planned-start fields from the pending decision,
// naming only the ending workloads show admits.
func setPlanned(out *api.Why, p sched.Pending, show func(workload.ID) bool) {
	pl := p.Planned
	if pl == nil {
		return
	}
	out.PlannedStart = pl.Start.UTC().Truncate(time.Second) // as the text shows it
	out.PlannedBlock = string(pl.Block)
	out.PlannedFlavor = string(pl.Flavor)
	out.PlannedRegion = pl.Region
	out.PlannedNodes = pl.Nodes
	out.PlannedAfterCount = pl.EndingCount
	out.PlannedEvicts = pl.Evicts
	for _, id := range pl.Ending {
		if show(id) {
			out.PlannedAfter = append(out.PlannedAfter, string(id))
		}
	}
	if pl.Starving {
		out.Starving, out.Waited, out.MaxWait = true, api.Duration(pl.Waited), api.Duration(pl.MaxWait)
	}
}

// expectedRuntime is x's expected runtime as the core plans with it:
// declared, or its class's default (options.planning.default_runtime);
// 0 when unknown.
func (s *Server) expectedRuntime(x *store.Workload) time.Duration {
	if rt := x.Spec.ExpectedRuntime; rt > 0 {
		return rt
	}
	return s.opts.Scheduling.Planning.DefaultRuntime[x.Spec.Priority]
}

// setOverrun adds to a running workload's why how long it has run past
// its expected runtime, if it has: such work loses backfill protection
// (options.planning.overrun says whether a planned start may evict it).
func (s *Server) setOverrun(out *api.Why, x *store.Workload, now time.Time) {
	rt := s.expectedRuntime(x)
	if x.Running == nil || rt <= 0 {
		return
	}
	over := now.Sub(x.Running.StartedAt.Add(rt))
	if over <= 0 {
		return
	}
	out.Overrun, out.ExpectedRuntime = api.Duration(over), api.Duration(rt)
	out.Reason += fmt.Sprintf("; %s past its expected runtime of %s", sched.ShortDuration(over), sched.ShortDuration(rt))
	if s.opts.Scheduling.Planning.PreemptOverrun {
		out.Reason += " (a planned start may preempt it)"
	}
}
