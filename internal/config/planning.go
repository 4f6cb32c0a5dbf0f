package config

import (
	"fmt"
	"slices"
	"time"

	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// PlanningSpec is planned starts (backfill) as written, under a config's
// or a scenario's `planning:` (see sched.Planning). Every field left out
// takes sched.DefaultPlanning's value.
//
//	planning:
//	  depth: 16                       # 0 turns planning off
//	  default_runtime: {normal: 4h}   # per priority class
//	  max_wait: {normal: 12h, high: 2h}
//	  overrun: keep                   # or preempt
type PlanningSpec struct {
	Pos            yamlfile.Pos
	Depth          *int                     `yaml:"depth"`
	DefaultRuntime map[string]time.Duration `yaml:"default_runtime"`
	MaxWait        map[string]time.Duration `yaml:"max_wait"`
	Overrun        string                   `yaml:"overrun"`
}

// maxPlanDepth bounds PlanningSpec.Depth: each plan costs a pass over the
// candidate nodes.
const maxPlanDepth = 1000

// Resolve returns the planning the spec describes, adding a problem per
// bad field to errs under field (the spec's own name, such as
// "options.planning").
func (p *PlanningSpec) Resolve(field string, at yamlfile.Pos, errs *yamlfile.Errors) sched.Planning {
	out := sched.DefaultPlanning()
	if p == nil {
		return out
	}
	if p.Pos.Line > 0 {
		at = p.Pos
	}
	if p.Depth != nil {
		if *p.Depth < 0 || *p.Depth > maxPlanDepth {
			errs.Add(at, field+".depth", "depth must be between 0 (no planning) and %d, got %d", maxPlanDepth, *p.Depth)
		}
		out.Depth = *p.Depth
	}
	if p.DefaultRuntime != nil {
		out.DefaultRuntime = classDurations(p.DefaultRuntime, field+".default_runtime", at, errs)
	}
	if p.MaxWait != nil {
		out.MaxWait = classDurations(p.MaxWait, field+".max_wait", at, errs)
	}
	switch p.Overrun {
	case "", "keep":
	case "preempt":
		out.PreemptOverrun = true
	default:
		errs.Add(at, field+".overrun", "unknown overrun %q: write keep (overrunning work keeps running) or preempt (a planned start may evict it)", p.Overrun)
	}
	return out
}

// classDurations reads a map from priority class name to a duration.
func classDurations(m map[string]time.Duration, field string, at yamlfile.Pos, errs *yamlfile.Errors) map[workload.Priority]time.Duration {
	out := make(map[workload.Priority]time.Duration, len(m))
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names) // messages in a stable order
	for _, k := range names {
		d := m[k]
		p, err := workload.ParsePriority(k)
		if err != nil {
			errs.Add(at, fmt.Sprintf("%s.%s", field, k), "%v", err)
			continue
		}
		if d < 0 {
			errs.Add(at, fmt.Sprintf("%s.%s", field, k), "must not be negative, got %s", d)
			continue
		}
		out[p] = d
	}
	return out
}

// FairShareSpec is fair share over time as written, under a config's or a
// strategy's options (see sched.FairShare):
//
//	fair_share:
//	  half_life: 7d   # an hour of use counts half a week later; 0 or left out: off
type FairShareSpec struct {
	Pos      yamlfile.Pos
	HalfLife time.Duration `yaml:"half_life"`
}

// Bounds of FairShareSpec.HalfLife.
const (
	minHalfLife = time.Minute
	maxHalfLife = 3650 * 24 * time.Hour
)

// Resolve returns the fair share the spec describes (off when nil),
// adding a problem to errs under field.
func (f *FairShareSpec) Resolve(field string, at yamlfile.Pos, errs *yamlfile.Errors) sched.FairShare {
	if f == nil {
		return sched.FairShare{}
	}
	if f.Pos.Line > 0 {
		at = f.Pos
	}
	if f.HalfLife != 0 && (f.HalfLife < minHalfLife || f.HalfLife > maxHalfLife) {
		errs.Add(at, field+".half_life", "half_life must be between %v and %v (or 0 to turn fair share over time off), got %v", minHalfLife, "3650d", f.HalfLife)
		return sched.FairShare{}
	}
	return sched.FairShare{HalfLife: f.HalfLife}
}
