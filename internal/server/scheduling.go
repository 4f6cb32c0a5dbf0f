package server

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/arbiterhq/arbiter/internal/sched"
)

// ErrUnknownScorer is returned by New for a Scheduling.Scorer that
// sched.ScorerNames does not list.
var ErrUnknownScorer = errors.New("server: unknown scorer")

// schedulingOptions returns the scheduler options every live cycle runs
// with: those of Options.Scheduling the simulator and `arbiter schedule`
// honour too (the scorer, preemption, overflow), nothing else, so that a
// caller cannot switch off the pending reasons the server answers `why`
// with.
func schedulingOptions(o sched.Options) sched.Options {
	return sched.Options{
		Scorer:                strings.TrimSpace(o.Scorer),
		DisablePreemption:     o.DisablePreemption,
		OverflowBeforePreempt: o.OverflowBeforePreempt,
		HonourWindow:          cmp.Or(max(o.HonourWindow, 0), sched.DefaultHonourWindow),
	}
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
