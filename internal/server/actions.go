package server

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// The policy actions in force change the scheduler's input each cycle,
// never the stored state: set_limit and scale_down the tenant tree
// (adjust), set_priority and reallocate's priority the workloads' priority
// (reprioritize), migrate the workloads' regions or pools (migrate),
// scale_down and set_limit on a class, service or selector the work the
// core sees and evicts (classCaps), drain the nodes in service (drained),
// set_spot_price the spot prices (spotPrices). notify posts to the
// notification webhook when its rule fires or resolves
// (notifications.go). reallocate's temporary guarantee is recorded only.

// inForce returns the actions of these types in force, by policy name
// then rule order (so later policies win where two set the same thing).
func (pr *policyRunner) inForce(types ...policy.ActionType) []policy.Action {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []policy.Action
	for _, n := range sortedKeys(pr.active) {
		for _, a := range pr.active[n] {
			if slices.Contains(types, a.Action.Type) {
				out = append(out, a.Action)
			}
		}
	}
	return out
}

// adjust returns the tenant tree with the actions in force applied.
func (pr *policyRunner) adjust(w *world) *tenancy.Tree {
	acts := pr.inForce(policy.ActionSetLimit, policy.ActionScaleDown)
	changed := false
	ts := make([]*store.Tenant, len(w.Tenants))
	for i, t := range w.Tenants {
		c := *t
		c.Quotas = append([]store.Quota(nil), t.Quotas...)
		ts[i] = &c
	}
	for _, a := range acts {
		if a.Target.Kind != policy.TargetTenant {
			continue
		}
		for _, t := range ts {
			if t.Name != a.Target.Name {
				continue
			}
			for qi := range t.Quotas {
				q := &t.Quotas[qi]
				switch a.Type {
				case policy.ActionSetLimit:
					l := max(resource.MilliGPU(a.Limit.Value*resource.PerGPU), q.Guaranteed)
					q.Limit, changed = &l, true
				case policy.ActionScaleDown:
					if q.Limit != nil {
						l := max(resource.MilliGPU(float64(*q.Limit)*a.MinCapacity.Value), q.Guaranteed)
						q.Limit, changed = &l, true
					}
				}
			}
		}
	}
	if !changed {
		return w.Tree
	}
	tree, err := buildTree(ts)
	if err != nil {
		pr.s.log.Warn("policy: actions make the tenant tree invalid; not applied", "err", err)
		return w.Tree
	}
	return tree
}

// reprioritize returns the scheduler's workloads with the priority the
// set_priority and reallocate actions in force give them (pending and
// running alike, as the simulator does), and whether any action applied.
// Matched workloads are copied; the others are shared.
func (pr *policyRunner) reprioritize(ws []*workload.Workload) ([]*workload.Workload, bool) {
	type rule struct {
		target policy.Target
		prio   workload.Priority
	}
	var rules []rule // in force order: later policies and rules win
	for _, a := range pr.inForce(policy.ActionSetPriority, policy.ActionReallocate) {
		switch {
		case a.Type == policy.ActionSetPriority:
			rules = append(rules, rule{a.Target, workload.Priority(a.Priority - 1)})
		case a.Priority != policy.PriorityNone:
			for _, t := range a.Resources {
				rules = append(rules, rule{t, workload.Priority(a.Priority - 1)})
			}
		}
	}
	if len(rules) == 0 {
		return ws, false
	}
	out := ws
	copied := false
	for i, x := range ws {
		prio, ok := x.Priority, false
		for _, r := range rules {
			if targets(r.target, x) {
				prio, ok = r.prio, true
			}
		}
		if !ok || prio == x.Priority {
			continue
		}
		if !copied {
			out, copied = slices.Clone(ws), true
		}
		c := *x
		c.Priority = prio
		out[i] = &c
	}
	return out, true
}

// migrate returns the scheduler's workloads narrowed by the migrate
// actions in force, and whether any is in force: to a region, a matched
// workload that accepts the region accepts only it; to a pool (the nodes'
// "pool" label), a matched workload that names no pools, or names this
// one, accepts only it. A workload whose own list excludes the
// destination is left alone (its regions may be a residency promise). The
// core then evicts matched work running elsewhere, to be placed again in
// the destination from its last checkpoint. Matched workloads are copied;
// the others are shared.
func (pr *policyRunner) migrate(ws []*workload.Workload) ([]*workload.Workload, bool) {
	acts := pr.inForce(policy.ActionMigrate)
	if len(acts) == 0 {
		return ws, false
	}
	out := ws
	copied := false
	for i, x := range ws {
		region, pool := "", ""
		for _, a := range acts { // later policies and rules win
			if !targets(a.Target, x) {
				continue
			}
			d := a.Destination.Name
			switch a.Destination.Kind {
			case policy.TargetRegion:
				if slices.Contains(x.Regions, d) {
					region = d
				}
			case policy.TargetPool:
				if len(x.Pools) == 0 || slices.Contains(x.Pools, d) {
					pool = d
				}
			}
		}
		narrowRegions := region != "" && len(x.Regions) > 1
		narrowPools := pool != "" && !(len(x.Pools) == 1 && x.Pools[0] == pool)
		if !narrowRegions && !narrowPools {
			continue
		}
		if !copied {
			out, copied = slices.Clone(ws), true
		}
		c := *x
		if narrowRegions {
			c.Regions = []string{region}
		}
		if narrowPools {
			c.Pools = []string{pool}
		}
		out[i] = &c
	}
	return out, true
}

// capKey names an action in force: policy, rule and action index.
func capKey(pol string, a policy.ActiveAction) string {
	return pol + "\x00" + a.Rule + "\x00" + strconv.Itoa(a.Index)
}

// classCapped reports whether a is a cap on work other than a tenant's
// (those change the tenant tree instead: adjust).
func classCapped(a policy.Action) bool {
	return (a.Type == policy.ActionScaleDown || a.Type == policy.ActionSetLimit) && a.Target.Kind != policy.TargetTenant
}

// recordCapBases remembers, for each scale_down on a class that has just
// come into force, the GPUs its target holds (as the simulator does: the
// cap is a fraction of what the class had when the rule fired), and
// forgets those no longer in force. Called with pr.mu held. After a
// restart the base is what the class holds at the first evaluation.
func (pr *policyRunner) recordCapBases(pol string, active []policy.ActiveAction, wd *world) {
	live := map[string]bool{}
	for _, a := range active {
		if a.Action.Type != policy.ActionScaleDown || !classCapped(a.Action) {
			continue
		}
		k := capKey(pol, a)
		live[k] = true
		if _, ok := pr.capBase[k]; ok {
			continue
		}
		var held resource.MilliGPU
		for _, x := range wd.Workloads {
			if w := schedWorkload(x); w.Running != nil && targets(a.Action.Target, w) {
				held = held.Add(w.TotalGPUs())
			}
		}
		pr.capBase[k] = held
	}
	prefix := pol + "\x00"
	for k := range pr.capBase {
		if strings.HasPrefix(k, prefix) && !live[k] {
			delete(pr.capBase, k)
		}
	}
}

// classCaps applies the caps in force on classes, services and selectors
// (scale_down to a fraction of what the target held when it came into
// force, set_limit to a number of GPUs), as the simulator does: while the
// target's running work is over its cap, its preemptible work is evicted,
// newest first; its pending work is held back while admitting it would
// pass the cap. It returns the workloads the core should see (held ones
// removed), the evictions, the held workloads' pending entries, and
// whether any cap is in force.
func (pr *policyRunner) classCaps(ws []*workload.Workload) ([]*workload.Workload, map[workload.ID]string, []sched.Pending, bool) {
	type capped struct {
		target policy.Target
		limit  resource.MilliGPU
		why    string
	}
	var caps []capped
	pr.mu.Lock()
	for _, n := range sortedKeys(pr.active) {
		for _, a := range pr.active[n] {
			if !classCapped(a.Action) {
				continue
			}
			c := capped{target: a.Action.Target}
			if a.Action.Type == policy.ActionSetLimit {
				c.limit = resource.MilliGPU(a.Action.Limit.Value * resource.PerGPU)
			} else {
				c.limit = resource.MilliGPU(float64(pr.capBase[capKey(n, a)]) * a.Action.MinCapacity.Value)
			}
			c.why = fmt.Sprintf("%s capped at %v GPUs by policy %s, rule %s", a.Action.Target, c.limit, n, a.Rule)
			caps = append(caps, c)
		}
	}
	pr.mu.Unlock()
	if len(caps) == 0 {
		return ws, nil, nil, false
	}
	evict := map[workload.ID]string{}
	held := map[workload.ID]string{}
	for _, c := range caps {
		var used resource.MilliGPU
		var running, pending []*workload.Workload
		for _, w := range ws {
			if !targets(c.target, w) || held[w.Name] != "" {
				continue
			}
			if w.Running == nil {
				pending = append(pending, w)
			} else if evict[w.Name] == "" {
				used = used.Add(w.TotalGPUs())
				running = append(running, w)
			}
		}
		// Newest first, as the simulator evicts.
		slices.SortStableFunc(running, func(a, b *workload.Workload) int { return b.Running.StartedAt.Compare(a.Running.StartedAt) })
		for _, w := range running {
			if used <= c.limit {
				break
			}
			if w.Preemptible {
				evict[w.Name] = "evicted: " + c.why
				used = used.Sub(w.TotalGPUs())
			}
		}
		// Higher priority, then older, first.
		slices.SortStableFunc(pending, func(a, b *workload.Workload) int {
			if a.Priority != b.Priority {
				return int(b.Priority) - int(a.Priority)
			}
			return a.SubmittedAt.Compare(b.SubmittedAt)
		})
		for _, w := range pending {
			if used.Add(w.TotalGPUs()) <= c.limit {
				used = used.Add(w.TotalGPUs())
				continue
			}
			held[w.Name] = "held: " + c.why
		}
	}
	var out []*workload.Workload
	var pend []sched.Pending
	for _, w := range ws {
		if why := held[w.Name]; why != "" {
			pend = append(pend, sched.Pending{Workload: w.Name, Code: sched.ReasonPolicyHeld, Reason: why})
			continue
		}
		out = append(out, w)
	}
	return out, evict, pend, true
}

// targets reports whether a policy target names workload x: its tenant;
// its class (kind, priority class or "class" label); its "service" label;
// or a selector its labels satisfy.
func targets(t policy.Target, x *workload.Workload) bool {
	switch t.Kind {
	case policy.TargetTenant:
		return x.Tenant == t.Name
	case policy.TargetClass:
		return x.Kind.String() == t.Name || x.Priority.String() == t.Name || x.Labels["class"] == t.Name
	case policy.TargetService:
		return x.Labels["service"] == t.Name
	case policy.TargetSelector:
		for k, v := range t.Labels() {
			if x.Labels[k] != v {
				return false
			}
		}
		return true
	}
	return false
}

// drained returns the nodes the drain actions in force take out of
// service: those of a pool ("pool" label) or a region. The scheduler
// treats them as down (their work is evicted, they take none).
func (pr *policyRunner) drained(w *world) []fleet.NodeID {
	acts := pr.inForce(policy.ActionDrain)
	if len(acts) == 0 {
		return nil
	}
	var out []fleet.NodeID
	for _, n := range w.Nodes {
		for _, a := range acts {
			if (a.Target.Kind == policy.TargetPool && n.Labels["pool"] == a.Target.Name) ||
				(a.Target.Kind == policy.TargetRegion && n.Region == a.Target.Name) {
				out = append(out, n.ID)
				break
			}
		}
	}
	return out
}

// spotPrices returns the spot prices set_spot_price actions in force set,
// for each GPU model and region of the fleet they target (the cluster, a
// flavor, a region, or the models and regions of a pool's machines; later
// actions win). Spot work with a lower max price is then not placed there.
func (pr *policyRunner) spotPrices(w *world) []sched.SpotPrice {
	acts := pr.inForce(policy.ActionSetSpotPrice)
	if len(acts) == 0 {
		return nil
	}
	type key struct {
		model  fleet.ModelID
		region string
	}
	var keys []key
	pools := map[key]map[string]bool{}
	for _, n := range w.Fleet.Nodes {
		k := key{n.Model, n.Region}
		if pools[k] == nil {
			pools[k] = map[string]bool{}
			keys = append(keys, k)
		}
		if p := n.Labels["pool"]; p != "" {
			pools[k][p] = true
		}
	}
	price := map[key]float64{}
	for _, a := range acts {
		for _, k := range keys {
			t := a.Target
			if t.Kind == policy.TargetCluster || (t.Kind == policy.TargetFlavor && string(k.model) == t.Name) ||
				(t.Kind == policy.TargetRegion && k.region == t.Name) || (t.Kind == policy.TargetPool && pools[k][t.Name]) {
				price[k] = a.Price.Value
			}
		}
	}
	var out []sched.SpotPrice
	for _, k := range keys {
		if p, ok := price[k]; ok {
			out = append(out, sched.SpotPrice{Model: k.model, Region: k.region, PerGPUHour: p})
		}
	}
	return out
}
