package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/policy/effects"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// A workload's effective values are what the scheduler sees of it with
// the policy actions in force applied (see actions.go): its priority
// (set_priority, reallocate), regions and pools (migrate). GET of a
// workload and `why` show them with the action that set each (policy,
// rule, since when), and the other actions in force on it: caps on its
// class (and whether one holds it back), its tenant's limit, a drain of
// where it runs, spot prices where it may run. The values come from the
// effects the last scheduling cycle applied (the policy runtime's
// Override), so that what is shown is what is done; the attribution reads the actions in force (inForceNow).

// policyAction is an action in force with the policy that holds it.
type policyAction struct {
	Policy string
	policy.ActiveAction
}

// inForceNow returns every action in force, by policy name then rule and
// action order (the order the actions apply in: later ones win), with
// the rule and the time it came into force. It is the one place the
// effects shown on workloads read the policy state from.
func (pr *policyRunner) inForceNow() []policyAction {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []policyAction
	for _, n := range sortedKeys(pr.active) {
		for _, a := range pr.active[n] {
			out = append(out, policyAction{Policy: n, ActiveAction: a})
		}
	}
	return out
}

// capLimit is the cap a scale_down or set_limit in force on a class,
// service or selector sets, as classCaps computes it.
func (pr *policyRunner) capLimit(pa policyAction) resource.MilliGPU {
	if pa.Action.Type == policy.ActionSetLimit {
		return resource.MilliGPU(pa.Action.Limit.Value * resource.PerGPU)
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return resource.MilliGPU(float64(pr.rt.Base(effects.Active{Policy: pa.Policy, ActiveAction: pa.ActiveAction})) * pa.Action.MinCapacity.Value)
}

// effective is what the policies in force make of one workload.
type effective struct {
	priority       string
	regions, pools []string
	effects        []api.Effect
}

// apply puts e into a workload's API form.
func (e effective) apply(o *api.Workload) {
	o.EffectivePriority, o.EffectiveRegions, o.EffectivePools, o.Effects = e.priority, e.regions, e.pools, e.effects
}

// effectsOf returns what the actions in force (acts, from inForceNow) do
// to stored workload x; pending is the last cycle's reason for it, if
// any. It reads nodes from tx only when a drain of a pool is in force and
// x runs.
func (s *Server) effectsOf(tx store.ReadTx, x *store.Workload, acts []policyAction, pending *sched.Pending) effective {
	var e effective
	if len(acts) == 0 || !x.State.Live() {
		return e
	}
	w := schedWorkload(x)
	ew := w
	if eff := s.policies.lastEffects(); eff != nil {
		if o, ok := eff.Override(w); ok {
			ew = o
		}
	}
	add := func(pa policyAction, kind, value string) *api.Effect {
		e.effects = append(e.effects, api.Effect{Kind: kind, Value: value, Policy: pa.Policy, Rule: pa.Rule, Since: pa.Since})
		return &e.effects[len(e.effects)-1]
	}
	if pa, ok := lastAction(acts, func(a policy.Action) bool { return setsPriority(a, w) }); ok {
		e.priority = ew.Priority.String()
		add(pa, api.EffectPriority, e.priority)
	}
	if !slices.Equal(ew.Regions, w.Regions) {
		if pa, ok := lastAction(acts, func(a policy.Action) bool { return migratesTo(a, w, policy.TargetRegion) }); ok {
			e.regions = slices.Clone(ew.Regions)
			add(pa, api.EffectRegions, strings.Join(e.regions, ", "))
		}
	}
	if !slices.Equal(ew.Pools, w.Pools) {
		if pa, ok := lastAction(acts, func(a policy.Action) bool { return migratesTo(a, w, policy.TargetPool) }); ok {
			e.pools = slices.Clone(ew.Pools)
			add(pa, api.EffectPools, strings.Join(e.pools, ", "))
		}
	}
	var nodes map[string]*store.Node // read on demand
	for _, pa := range acts {
		a := pa.Action
		switch {
		case effects.ClassCapped(a) && effects.Matches(a.Target, w):
			ef := add(pa, api.EffectCap, fmt.Sprintf("%s at %v GPUs", a.Target, s.policies.capLimit(pa)))
			ef.Held = heldBy(pending, pa)
		case (a.Type == policy.ActionSetLimit || a.Type == policy.ActionScaleDown) && a.Target.Kind == policy.TargetTenant && a.Target.Name == x.Tenant:
			v := fmt.Sprintf("limit %v GPUs", a.Limit.Value)
			if a.Type == policy.ActionScaleDown {
				v = fmt.Sprintf("limits scaled to %v", a.MinCapacity)
			}
			add(pa, api.EffectTenantLimit, v)
		case a.Type == policy.ActionDrain && x.Running != nil:
			if a.Target.Kind == policy.TargetRegion && x.Running.Region == a.Target.Name {
				add(pa, api.EffectDrain, a.Target.String())
				continue
			}
			if a.Target.Kind != policy.TargetPool {
				continue
			}
			if nodes == nil {
				nodes = map[string]*store.Node{}
				for _, r := range x.Running.Replicas {
					if n, err := store.Get[store.Node](tx, string(r.Node)); err == nil {
						nodes[string(r.Node)] = n
					}
				}
			}
			for _, n := range nodes {
				if n.Labels["pool"] == a.Target.Name {
					add(pa, api.EffectDrain, a.Target.String())
					break
				}
			}
		case a.Type == policy.ActionSetSpotPrice && w.Priority == workload.PrioritySpot && spotPriceOn(a.Target, w):
			add(pa, api.EffectSpotPrice, fmt.Sprintf("$%.4g/GPU-h on %s", a.Price.Value, a.Target))
		}
	}
	return e
}

// heldBy reports whether pending (a workload's last pending entry, or nil)
// is held back by the cap of action pa: its blocker names that very action
// (policy, rule and position), not just the rule.
func heldBy(pending *sched.Pending, pa policyAction) bool {
	if pending == nil {
		return false
	}
	for _, b := range pending.Blockers {
		if h := b.Hold; b.Code == sched.ReasonPolicyHeld && h != nil && h.Policy == pa.Policy && h.Rule == pa.Rule && h.Index == pa.Index {
			return true
		}
	}
	return false
}

// lastAction returns the last action in force that match accepts (the one
// that wins where several set the same value).
func lastAction(acts []policyAction, match func(policy.Action) bool) (policyAction, bool) {
	for i := len(acts) - 1; i >= 0; i-- {
		if match(acts[i].Action) {
			return acts[i], true
		}
	}
	return policyAction{}, false
}

// setsPriority reports whether a sets w's priority (as reprioritize
// applies it).
func setsPriority(a policy.Action, w *workload.Workload) bool {
	switch {
	case a.Type == policy.ActionSetPriority:
		return effects.Matches(a.Target, w)
	case a.Type == policy.ActionReallocate && a.Priority != policy.PriorityNone:
		return slices.ContainsFunc(a.Resources, func(t policy.Target) bool { return effects.Matches(t, w) })
	}
	return false
}

// migratesTo reports whether a is a migrate to a destination of this kind
// that w accepts (as migrate applies it).
func migratesTo(a policy.Action, w *workload.Workload, kind policy.TargetKind) bool {
	if a.Type != policy.ActionMigrate || a.Destination.Kind != kind || !effects.Matches(a.Target, w) {
		return false
	}
	if kind == policy.TargetRegion {
		return slices.Contains(w.Regions, a.Destination.Name)
	}
	return len(w.Pools) == 0 || slices.Contains(w.Pools, a.Destination.Name)
}

// spotPriceOn reports whether a spot price set on t applies somewhere w
// may run: the cluster, one of its flavors, regions or pools.
func spotPriceOn(t policy.Target, w *workload.Workload) bool {
	switch t.Kind {
	case policy.TargetCluster:
		return true
	case policy.TargetFlavor:
		return slices.ContainsFunc(w.Flavors, func(m fleet.ModelID) bool { return string(m) == t.Name })
	case policy.TargetRegion:
		return slices.Contains(w.Regions, t.Name)
	case policy.TargetPool:
		return len(w.Pools) == 0 || slices.Contains(w.Pools, t.Name)
	}
	return false
}
