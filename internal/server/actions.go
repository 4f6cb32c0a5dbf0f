package server

import (
	"slices"

	"github.com/arbiterhq/arbiter/internal/policy/effects"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// The policy actions in force change the scheduler's input each cycle,
// never the stored state. What each action does is decided in one place,
// the policy runtime (internal/policy/effects), which the simulator calls
// too: this file only hands it the world and the actions in force, and
// puts its effects into the core's input. notify posts to the
// notification webhook when its rule fires or resolves
// (notifications.go).

// activeList returns the actions in force, by policy name then rule order
// (so later policies win where two set the same thing). Called with pr.mu
// held.
func (pr *policyRunner) activeList() []effects.Active {
	var out []effects.Active
	for _, n := range sortedKeys(pr.active) {
		for _, a := range pr.active[n] {
			out = append(out, effects.Active{Policy: n, ActiveAction: a})
		}
	}
	return out
}

// runtimeWorld is the world as the policy runtime sees it: the fleet's
// nodes and the scheduler's copies of the workloads (ws; nil: made from
// w).
func runtimeWorld(w *world, ws []*workload.Workload) effects.World {
	rw := effects.World{Workloads: ws}
	if ws == nil {
		for _, x := range w.Workloads {
			rw.Workloads = append(rw.Workloads, schedWorkload(x))
		}
	}
	for _, n := range w.Fleet.Nodes {
		rw.Nodes = append(rw.Nodes, effects.Node{ID: n.ID, Model: n.Model, Region: n.Region, Pool: n.Labels[sched.PoolLabel], GPUs: n.GPUs})
	}
	return rw
}

// effects returns the effects of the actions in force on the world whose
// scheduler workloads are ws, recording the bases of caps that came into
// force.
func (pr *policyRunner) effects(w *world, ws []*workload.Workload) *effects.Effects {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.last = pr.rt.Compute(runtimeWorld(w, ws), pr.activeList())
	return pr.last
}

// lastEffects returns the effects the last scheduling cycle applied (nil
// before the first).
func (pr *policyRunner) lastEffects() *effects.Effects {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.last
}

// applyEffects puts the effects of the actions in force into the core's
// input: tenant limits and temporary guarantees into the tenant tree,
// priority overrides and migrations into the workloads, caps (held work
// removed, excess evicted), drained nodes treated as down, and spot
// prices. It returns the workloads before the caps (held work is
// pending too, for the metrics), the held workloads' pending entries, and
// whether any effect is in force.
func (pr *policyRunner) applyEffects(w *world, in *sched.Input) (all []*workload.Workload, held []sched.Pending, any bool) {
	eff := pr.effects(w, in.Workloads)
	if !eff.Any() {
		return in.Workloads, nil, false
	}
	in.Tenants = eff.AdjustTree(in.Tenants)
	in.Workloads = eff.Apply(in.Workloads)
	all = in.Workloads
	in.Workloads, in.Evict, held = eff.Caps(in.Workloads)
	if len(eff.Drained) > 0 {
		in.Down = append(slices.Clip(in.Down), eff.Drained...)
	}
	if len(eff.Spot) > 0 {
		in.SpotPrices = eff.SpotPrices()
	}
	return all, held, true
}
