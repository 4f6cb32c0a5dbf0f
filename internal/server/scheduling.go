package server

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// ErrUnknownScorer is returned by New for a Scheduling.Scorer that
// sched.ScorerNames does not list.
var ErrUnknownScorer = errors.New("server: unknown scorer")

// schedulingOptions returns the scheduler options every live cycle runs
// with: those of Options.Scheduling the simulator and `arbiter schedule`
// honour too (the scorer, preemption, overflow, planning, the tenant
// bound: sched.DefaultTenantBound when zero, none when negative), nothing else,
// so that a caller cannot switch off the pending reasons the server
// answers `why` with.
func schedulingOptions(o sched.Options) sched.Options {
	return sched.Options{
		Scorer:                strings.TrimSpace(o.Scorer),
		DisablePreemption:     o.DisablePreemption,
		OverflowBeforePreempt: o.OverflowBeforePreempt,
		HonourWindow:          cmp.Or(max(o.HonourWindow, 0), sched.DefaultHonourWindow),
		Planning:              planningOptions(o.Planning),
		FairShare:             o.FairShare,
		TenantBound:           cmp.Or(o.TenantBound, sched.DefaultTenantBound),
	}
}

// planningOptions is the planning the live server runs with: the
// operator's (a config's options.planning, resolved by the config loader
// into a value that is never the zero one), or sched.DefaultPlanning()
// when nothing was set (the zero sched.Planning). Planning is turned off
// by a depth of 0 with anything else set, as options.planning.depth: 0
// gives (see NoPlanning). The depth is never negative.
func planningOptions(p sched.Planning) sched.Planning {
	if planningUnset(p) {
		return sched.DefaultPlanning()
	}
	p.Depth = max(p.Depth, 0)
	return p
}

// planningUnset reports whether p is the zero sched.Planning: the caller
// configured nothing.
func planningUnset(p sched.Planning) bool {
	return p.Depth == 0 && p.DefaultRuntime == nil && p.MaxWait == nil && !p.PreemptOverrun
}

// NoPlanning is the planning that plans nothing, for Options.Scheduling
// (the zero value would take sched.DefaultPlanning).
func NoPlanning() sched.Planning {
	return sched.Planning{MaxWait: map[workload.Priority]time.Duration{}}
}

// checkScheduling refuses a scorer the core does not know, naming the
// known ones (config files are checked with their position by the config
// loader before they get here).
func checkScheduling(o sched.Options) error {
	name := strings.TrimSpace(o.Scorer)
	if !slices.Contains(sched.ScorerNames(), name) {
		return fmt.Errorf("%w %q (known: %s)", ErrUnknownScorer, name, strings.Join(sched.ScorerNames()[1:], ", "))
	}
	return nil
}

// scorerName is the scorer's name as the startup log shows it.
func scorerName(o sched.Options) string {
	if o.Scorer == "" {
		return "bestfit-index (default)"
	}
	return o.Scorer
}
