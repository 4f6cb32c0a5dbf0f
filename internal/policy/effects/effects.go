// Package effects is the policy runtime: the one place that turns the
// actions in force into changes of the scheduler's input. The simulator
// and the server both call it, with the same inputs (the world as the core
// sees it and the actions the engine keeps in force) and apply the same
// effects: tenant limits and temporary guarantees (AdjustTree), priority
// overrides and pool/region narrowing (Apply), caps on classes, services
// and selectors (Caps), drained nodes (Drained) and spot prices (Spot).
//
// A new action needs: its type and fields in the policy loader
// (policy.ActionType, policy.Action, actionKinds), and its effect here.
//
// The package is pure: no clock, no I/O, no goroutines.
package effects

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// LowPriorityPool is the pool a migrate may name without any node carrying
// it: moving work there makes it low priority and preemptible (anyone of
// higher priority may take its GPUs). When some node does carry the pool
// label, it is an ordinary pool and migrate narrows work to it.
const LowPriorityPool = "low_priority_pool"

// PoolLabel is the node label that names a node's pool.
const PoolLabel = sched.PoolLabel

// Node is what the runtime needs of a node.
type Node struct {
	ID     fleet.NodeID
	Model  fleet.ModelID
	Region string
	Pool   string
	GPUs   int
}

// World is the state the actions apply to, as the core sees it: the
// nodes, and the workloads with their own (not yet overridden) specs.
type World struct {
	Nodes     []Node
	Workloads []*workload.Workload
}

// Active is an action in force, with the policy it belongs to. Actions are
// given in force order (policy name, then rule order): where two set the
// same thing, the later wins.
type Active struct {
	Policy string
	policy.ActiveAction
}

// Matches reports whether a policy target names workload x: its tenant;
// its class (kind, priority class or "class" label); its "service" label;
// a pool its own pools name (it runs only there); or a selector its labels
// satisfy. Cluster matches everything.
func Matches(t policy.Target, x *workload.Workload) bool {
	var l labels
	return l.matches(t, x)
}

// labels are a workload's "class" and "service" labels, looked up once
// for all the targets matched against it (a cycle matches every workload
// against every rule in force).
type labels struct {
	x                *workload.Workload
	class, service   string
	hasClass, hasSvc bool // looked up
}

func (l *labels) matches(t policy.Target, x *workload.Workload) bool {
	if l.x != x {
		*l = labels{x: x}
	}
	switch t.Kind {
	case policy.TargetCluster:
		return true
	case policy.TargetTenant:
		return x.Tenant == t.Name
	case policy.TargetClass:
		if x.Kind.String() == t.Name || x.Priority.String() == t.Name {
			return true
		}
		if !l.hasClass {
			l.class, l.hasClass = x.Labels["class"], true
		}
		return l.class == t.Name
	case policy.TargetService:
		if !l.hasSvc {
			l.service, l.hasSvc = x.Labels["service"], true
		}
		return l.service == t.Name
	case policy.TargetPool:
		return slices.Contains(x.Pools, t.Name)
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

// State is what the runtime remembers between evaluations: for each
// scale_down in force on a class, service or selector, the GPUs its target
// held when it came into force (the cap is that fraction of it).
type State struct {
	capBase map[string]resource.MilliGPU
}

// NewState returns an empty state.
func NewState() *State { return &State{capBase: map[string]resource.MilliGPU{}} }

// Effects are the changes the actions in force make to the scheduler's
// input.
type Effects struct {
	prio []prioRule
	migr []migrateRule
	// Limits are the caps in force on classes, services and selectors.
	Limits  []Cap
	tenants []tenantRule
	// Guarantees are reallocate's temporary guarantees in force.
	Guarantees []Guarantee
	// Drained are the nodes drain actions take out of service.
	Drained []fleet.NodeID
	// Spot are the spot prices set_spot_price actions set, by GPU model
	// and region.
	Spot map[tenancy.Key]float64
}

type prioRule struct {
	target  policy.Target
	prio    workload.Priority
	preempt bool
}

type migrateRule struct {
	target policy.Target
	dest   policy.Target
}

type tenantRule struct {
	tenant string
	typ    policy.ActionType
	value  float64 // set_limit: GPUs; scale_down: fraction
}

// Guarantee is a temporary guarantee: the tenant's quota entry for Key
// (flavor, and region when named) is guaranteed at least GPUs while the
// reallocate that gives it is in force.
type Guarantee struct {
	Tenant string
	Key    tenancy.Key
	GPUs   resource.MilliGPU
}

// Cap limits the GPUs of the work a target matches.
type Cap struct {
	Target policy.Target
	Limit  resource.MilliGPU
	Why    string
	// Hold names the action the cap comes from, for the blockers of the
	// work it holds back.
	Hold sched.PolicyHold
}

// Any reports whether any effect is in force.
func (e *Effects) Any() bool {
	if e == nil {
		return false
	}
	return len(e.prio)+len(e.migr)+len(e.Limits)+len(e.tenants)+len(e.Guarantees)+len(e.Drained)+len(e.Spot) > 0
}

func key(a Active) string { return a.Policy + "\x00" + a.Rule + "\x00" + strconv.Itoa(a.Index) }

// Compute returns the effects of the actions in force on w, updating st
// (the bases of the scale_down caps that came into force now; those no
// longer in force are forgotten).
func (st *State) Compute(w World, active []Active) *Effects {
	e := &Effects{}
	live := map[string]bool{}
	lowPool := true
	for _, n := range w.Nodes {
		if n.Pool == LowPriorityPool {
			lowPool = false
		}
	}
	for _, a := range active {
		act := a.Action
		switch act.Type {
		case policy.ActionSetPriority:
			e.prio = append(e.prio, prioRule{target: act.Target, prio: workload.Priority(act.Priority - 1)})
		case policy.ActionReallocate:
			for _, t := range act.Resources {
				if act.Priority != policy.PriorityNone && t.Kind != policy.TargetFlavor && t.Kind != policy.TargetRegion {
					e.prio = append(e.prio, prioRule{target: t, prio: workload.Priority(act.Priority - 1)})
				}
			}
			e.Guarantees = append(e.Guarantees, guarantees(act)...)
		case policy.ActionMigrate:
			if lowPool && act.Destination.Kind == policy.TargetPool && act.Destination.Name == LowPriorityPool {
				e.prio = append(e.prio, prioRule{target: act.Target, prio: workload.PriorityLow, preempt: true})
				break
			}
			e.migr = append(e.migr, migrateRule{target: act.Target, dest: act.Destination})
		case policy.ActionScaleDown, policy.ActionSetLimit:
			if act.Target.Kind == policy.TargetTenant {
				v := act.Limit.Value
				if act.Type == policy.ActionScaleDown {
					v = act.MinCapacity.Value
				}
				e.tenants = append(e.tenants, tenantRule{tenant: act.Target.Name, typ: act.Type, value: v})
				break
			}
			var limit resource.MilliGPU
			if act.Type == policy.ActionSetLimit {
				limit = resource.MilliGPU(act.Limit.Value * resource.PerGPU)
			} else {
				k := key(a)
				live[k] = true
				base, ok := st.capBase[k]
				if !ok {
					base = held(w.Workloads, act.Target)
					st.capBase[k] = base
				}
				limit = resource.MilliGPU(float64(base) * act.MinCapacity.Value)
			}
			e.Limits = append(e.Limits, Cap{Target: act.Target, Limit: limit,
				Why:  fmt.Sprintf("%s capped at %v GPUs by policy %s, rule %s", act.Target, limit, a.Policy, a.Rule),
				Hold: sched.PolicyHold{Policy: a.Policy, Rule: a.Rule, Index: a.Index, Target: act.Target.String()}})
		case policy.ActionDrain:
			for _, n := range w.Nodes {
				if nodeIn(act.Target, n) && !slices.Contains(e.Drained, n.ID) {
					e.Drained = append(e.Drained, n.ID)
				}
			}
		case policy.ActionSetSpotPrice:
			for _, n := range w.Nodes {
				if nodeIn(act.Target, n) {
					if e.Spot == nil {
						e.Spot = map[tenancy.Key]float64{}
					}
					e.Spot[tenancy.Key{Model: n.Model, Region: n.Region}] = act.Price.Value
				}
			}
		}
	}
	for k := range st.capBase {
		if !live[k] {
			delete(st.capBase, k)
		}
	}
	return e
}

// nodeIn reports whether node n is in a cluster, pool, flavor or region target.
func nodeIn(t policy.Target, n Node) bool {
	switch t.Kind {
	case policy.TargetCluster:
		return true
	case policy.TargetPool:
		return n.Pool == t.Name
	case policy.TargetFlavor:
		return string(n.Model) == t.Name
	case policy.TargetRegion:
		return n.Region == t.Name
	}
	return false
}

// guarantees returns the temporary guarantees of a reallocate: for each
// tenant among its resources, the entry of the flavor it names (and of the
// region it names, else the all-regions entry). The loader refuses a
// guarantee without exactly one flavor and at least one tenant.
func guarantees(a policy.Action) []Guarantee {
	if a.Guarantee.Value <= 0 {
		return nil
	}
	var k tenancy.Key
	var tenants []string
	for _, t := range a.Resources {
		switch t.Kind {
		case policy.TargetFlavor:
			k.Model = fleet.ModelID(t.Name)
		case policy.TargetRegion:
			k.Region = t.Name
		case policy.TargetTenant:
			tenants = append(tenants, t.Name)
		}
	}
	if k.Model == "" {
		return nil
	}
	out := make([]Guarantee, 0, len(tenants))
	for _, t := range tenants {
		out = append(out, Guarantee{Tenant: t, Key: k, GPUs: resource.MilliGPU(a.Guarantee.Value * resource.PerGPU)})
	}
	return out
}

// held is the GPUs the running work t matches holds.
func held(ws []*workload.Workload, t policy.Target) resource.MilliGPU {
	var g resource.MilliGPU
	for _, x := range ws {
		if x.Running != nil && Matches(t, x) {
			g = g.Add(x.TotalGPUs())
		}
	}
	return g
}

// Override returns workload x with the priority overrides and migrations
// in force applied, and whether anything changed (x itself is not
// modified; the copy shares its slices).
//
// A migrate to a region narrows a matched workload that accepts the region
// (and more than it) to it; to a pool, a matched workload that names no
// pools, or names this one, to it. A workload whose own list excludes the
// destination is left alone (its regions may be a residency promise). The
// core then evicts matched work running elsewhere, to be placed again in
// the destination from its last checkpoint.
func (e *Effects) Override(x *workload.Workload) (*workload.Workload, bool) {
	prio, preempt := x.Priority, x.Preemptible
	var l labels
	for _, r := range e.prio { // later policies and rules win
		if l.matches(r.target, x) {
			prio = r.prio
			preempt = preempt || r.preempt
		}
	}
	region, pool := "", ""
	for _, m := range e.migr {
		if !l.matches(m.target, x) {
			continue
		}
		d := m.dest.Name
		switch m.dest.Kind {
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
	if prio == x.Priority && preempt == x.Preemptible && !narrowRegions && !narrowPools {
		return x, false
	}
	c := *x
	c.Priority, c.Preemptible = prio, preempt
	if narrowRegions {
		c.Regions = []string{region}
	}
	if narrowPools {
		c.Pools = []string{pool}
	}
	return &c, true
}

// Apply returns ws with Override applied to each; changed workloads are
// copies, the others shared. ws itself is not modified.
func (e *Effects) Apply(ws []*workload.Workload) []*workload.Workload {
	if len(e.prio)+len(e.migr) == 0 {
		return ws
	}
	out := ws
	copied := false
	for i, x := range ws {
		c, ok := e.Override(x)
		if !ok {
			continue
		}
		if !copied {
			out, copied = slices.Clone(ws), true
		}
		out[i] = c
	}
	return out
}

// Caps applies the caps in force on classes, services and selectors
// (scale_down to a fraction of what the target held when it came into
// force, set_limit to a number of GPUs): while the target's running work
// is over its cap, its preemptible work is evicted, newest first; its
// pending work is held back, highest priority then oldest admitted first,
// while admitting it would pass the cap. It returns the workloads the core
// should see (held ones removed), the evictions and the held workloads'
// pending entries.
func (e *Effects) Caps(ws []*workload.Workload) ([]*workload.Workload, map[workload.ID]string, []sched.Pending) {
	if len(e.Limits) == 0 {
		return ws, nil, nil
	}
	evict := map[workload.ID]string{}
	var heldBack []*sched.Blocker // per workload of ws once one is held back
	held := func(wi int) bool { return heldBack != nil && heldBack[wi] != nil }
	var ls []labels // per workload of ws, for every cap
	if len(e.Limits) > 1 {
		ls = make([]labels, len(ws))
	}
	for i := range e.Limits {
		c := &e.Limits[i]
		hold := c.Hold // the blockers' own copy
		var used resource.MilliGPU
		var running []*workload.Workload
		var pending []int // indices in ws
		var one labels
		for wi, w := range ws {
			l := &one
			if ls != nil {
				l = &ls[wi]
			}
			if !l.matches(c.Target, w) || held(wi) {
				continue
			}
			if w.Running == nil {
				pending = append(pending, wi)
			} else if evict[w.Name] == "" {
				used = used.Add(w.TotalGPUs())
				running = append(running, w)
			}
		}
		slices.SortStableFunc(running, func(a, b *workload.Workload) int { return b.Running.StartedAt.Compare(a.Running.StartedAt) })
		for _, w := range running {
			if used <= c.Limit {
				break
			}
			if w.Preemptible {
				evict[w.Name] = "evicted: " + c.Why
				used = used.Sub(w.TotalGPUs())
			}
		}
		slices.SortStableFunc(pending, func(i, j int) int {
			a, b := ws[i], ws[j]
			if a.Priority != b.Priority {
				return int(b.Priority) - int(a.Priority)
			}
			return a.SubmittedAt.Compare(b.SubmittedAt)
		})
		for _, wi := range pending {
			w := ws[wi]
			if used.Add(w.TotalGPUs()) <= c.Limit {
				used = used.Add(w.TotalGPUs())
				continue
			}
			if heldBack == nil {
				heldBack = make([]*sched.Blocker, len(ws))
			}
			heldBack[wi] = &sched.Blocker{Code: sched.ReasonPolicyHeld, Requested: w.TotalGPUs(), Used: used, Limit: c.Limit, Hold: &hold}
		}
	}
	if heldBack == nil {
		return slices.Clone(ws), evict, nil
	}
	var out []*workload.Workload
	var pend []sched.Pending
	for wi, w := range ws {
		if b := heldBack[wi]; b != nil {
			p := sched.Pending{Workload: w.Name, Code: sched.ReasonPolicyHeld, Blockers: []sched.Blocker{*b}}
			p.Render()
			pend = append(pend, p)
			continue
		}
		out = append(out, w)
	}
	return out, evict, pend
}

// AdjustTree returns the tenant tree with the tenant limits and temporary
// guarantees in force applied (t itself is not modified; t is returned
// when nothing applies). set_limit sets each of the tenant's quota entries'
// limit to that many GPUs, scale_down to that fraction of its limit (an
// unlimited entry stays so); neither goes below the entry's guarantee. A
// temporary guarantee raises the guarantee of the tenant's entry for its
// flavor and region (the all-regions entry when no region is named) to at
// least its GPUs, and the entry's limit with it; a tenant with no such
// entry gets one, guaranteed and limited to the GPUs.
func (e *Effects) AdjustTree(t *tenancy.Tree) *tenancy.Tree {
	if len(e.tenants)+len(e.Guarantees) == 0 || t == nil {
		return t
	}
	c := t.Clone()
	for _, r := range e.tenants {
		i, ok := c.Lookup(r.tenant)
		if !ok {
			continue
		}
		for qi := range c.Tenants[i].Quotas {
			q := &c.Tenants[i].Quotas[qi]
			switch r.typ {
			case policy.ActionSetLimit:
				q.Limit = max(resource.MilliGPU(r.value*resource.PerGPU), q.Guaranteed)
			case policy.ActionScaleDown:
				if q.Limit != tenancy.Unlimited {
					q.Limit = max(resource.MilliGPU(float64(q.Limit)*r.value), q.Guaranteed)
				}
			}
		}
	}
	for _, g := range e.Guarantees {
		i, ok := c.Lookup(g.Tenant)
		if !ok {
			continue
		}
		ten := c.Tenants[i]
		qi := slices.IndexFunc(ten.Quotas, func(q tenancy.Quota) bool { return q.Key == g.Key })
		if qi < 0 {
			ten.Quotas = append(ten.Quotas, tenancy.Quota{Key: g.Key, Guaranteed: g.GPUs, Limit: g.GPUs, Weight: 1})
			continue
		}
		q := &ten.Quotas[qi]
		q.Guaranteed = max(q.Guaranteed, g.GPUs)
		q.Limit = max(q.Limit, q.Guaranteed)
	}
	return c
}

// SpotPrices returns the spot prices set by policy as the core's input,
// in a fixed order (model, then region).
func (e *Effects) SpotPrices() []sched.SpotPrice {
	out := make([]sched.SpotPrice, 0, len(e.Spot))
	for k, p := range e.Spot {
		out = append(out, sched.SpotPrice{Model: k.Model, Region: k.Region, PerGPUHour: p})
	}
	slices.SortFunc(out, func(a, b sched.SpotPrice) int {
		if a.Model != b.Model {
			if a.Model < b.Model {
				return -1
			}
			return 1
		}
		if a.Region < b.Region {
			return -1
		}
		if a.Region > b.Region {
			return 1
		}
		return 0
	})
	return out
}

// SpotPrice returns the spot price a policy sets for a GPU model in a
// region, and whether one does. e may be nil.
func (e *Effects) SpotPrice(m fleet.ModelID, region string) (float64, bool) {
	if e == nil {
		return 0, false
	}
	p, ok := e.Spot[tenancy.Key{Model: m, Region: region}]
	return p, ok
}

// Base returns the GPUs the target of a scale_down in force on a class,
// service or selector held when it came into force (0: not recorded).
func (st *State) Base(a Active) resource.MilliGPU { return st.capBase[key(a)] }

// Bases returns a copy of every recorded cap base, keyed
// "policy\x00rule\x00index", for saving across restarts.
func (st *State) Bases() map[string]resource.MilliGPU { return maps.Clone(st.capBase) }

// SetBase restores one cap base saved from Bases.
func (st *State) SetBase(k string, v resource.MilliGPU) { st.capBase[k] = v }

// ClassCapped reports whether a caps the GPUs of a class, service or
// selector (not a tenant's limits, which go into the tenant tree).
func ClassCapped(a policy.Action) bool {
	return (a.Type == policy.ActionScaleDown || a.Type == policy.ActionSetLimit) && a.Target.Kind != policy.TargetTenant
}
