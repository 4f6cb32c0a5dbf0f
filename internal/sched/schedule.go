package sched

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/mig"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched/score"
	"github.com/arbiterhq/arbiter/internal/spot"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Schedule runs one cycle: order → admit → place → preempt → overflow →
// emit. It is pure: the same Input gives the same Plan, byte for byte.
//
// Priority preemption across tenants takes only borrowed capacity, judged
// at the start of the cycle. When the victim's tenant shrinks later in the
// same cycle (its own work replaced by smaller work), the victim can end
// the cycle within its tenant's guarantee and would reclaim its place from
// its evictor next cycle. The cycle is then decided again with such
// victims shielded from priority preemption by other tenants (at most
// maxShieldRounds times), so that evictions never undo each other.
func Schedule(in Input) Plan {
	var shield map[workload.ID]bool
	for round := 0; ; round++ {
		plan, s := scheduleOnce(&in, shield)
		if !in.Options.TerseReasons {
			plan.render() // text only at the edge: the core decides with Blockers
		}
		if round > 0 {
			// Decided with shields: alike work added to the same state
			// would not be decided alike (the shields depend on the
			// placements), so the state is not settled (Plan.Classes).
			plan.Classes, plan.shielded = nil, true
		}
		undone := s.wouldReclaim()
		if len(undone) == 0 || round == maxShieldRounds {
			return plan
		}
		if shield == nil {
			shield = map[workload.ID]bool{}
		}
		for _, id := range undone {
			shield[id] = true
		}
	}
}

// maxShieldRounds bounds how often a cycle is decided again (see Schedule).
const maxShieldRounds = 3

// wouldReclaim lists the victims of other tenants' priority claims that end
// the cycle within their tenant's guarantee where they ran.
func (s *snapshot) wouldReclaim() []workload.ID {
	var out []workload.ID
	for _, ri := range s.foreignPrio {
		r := &s.run[ri]
		q, idx, ok := s.tree.Entry(r.tenant, r.key.Model, r.key.Region)
		if ok && s.usage[r.tenant][idx].Add(r.total) <= q.Guaranteed {
			out = append(out, r.w.Name)
		}
	}
	return out
}

func scheduleOnce(in *Input, shield map[workload.ID]bool) (Plan, *snapshot) {
	s, _ := newSnapshot(in)
	s.shield = shield
	var plan Plan
	if hl := in.Options.FairShare.HalfLife; hl > 0 {
		// Before any eviction: the usage is what ran until now.
		s.decayed, plan.History = s.tree.Decay(in.History, s.usage, in.Now, hl)
	}
	s.evictUnusable(&plan)
	pending, deferred := s.order()
	if len(deferred) > 0 && s.scorer != nil {
		s.scorer, _ = newScorer(s.in, pending) // the name was checked by newSnapshot
	}
	plan.Pending = make([]Pending, 0, len(pending)+len(deferred))
	// Reservations are hard promises: owners claim their reserved capacity
	// before anyone else is placed, so that preemptible work placed this
	// cycle cannot sit on it. Claims beyond a reservation wait for their
	// turn in the normal order.
	done := make([]bool, len(pending))
	for i, w := range pending {
		if w.Reservation != "" {
			done[i] = s.claimReservation(w, &plan)
		}
	}
	if s.planning() {
		s.planStarving(pending)
	}
	// Evictions late in a pass can make room for, or bring within its
	// guarantee, a workload decided earlier; so while a pass evicts, the
	// workloads still pending get another pass (at most maxPasses).
	for pass := 0; pass < maxPasses; pass++ {
		evictedBefore := len(plan.Preemptions)
		plan.Pending = plan.Pending[:0]
		for i, w := range pending {
			if !done[i] {
				s.shape = s.shapes.pending[i] + 1
				if done[i] = s.scheduleOne(w, &plan); !done[i] {
					s.afterPending(w, &plan)
				}
				s.shape = 0
			}
		}
		if len(plan.Preemptions) == evictedBefore || len(plan.Pending) == 0 {
			break
		}
	}
	s.deferPending(deferred, &plan)
	s.grow(&plan)
	// Holds (and, with PreemptOverrun, the planning slots that let a claim
	// evict overrunning work) depend on the order, not on alike examples.
	// Deferred work is not decided as its class would be: alike work
	// added to the same state is not settled (its tenant's count decides).
	if len(deferred) == 0 && s.placed == 0 && len(plan.Preemptions) == 0 && len(plan.Resizes) == 0 && len(s.holds) == 0 && !(s.in.Options.Planning.PreemptOverrun && s.planned > 0) {
		plan.Classes = s.classes()
	}
	return plan, s
}

// deferPending leaves the workloads order deferred pending undecided
// (Options.TenantBound): one Blocker per tenant, shared by its deferred
// workloads, says how many of its workloads wait and what the bound is.
func (s *snapshot) deferPending(deferred []*workload.Workload, plan *Plan) {
	if len(deferred) == 0 {
		return
	}
	blockers := map[string][]Blocker{}
	var b []Blocker // the last tenant's: deferred work comes in runs of one tenant's
	for _, w := range deferred {
		if len(b) == 0 || b[0].Tenant != w.Tenant {
			var ok bool
			if b, ok = blockers[w.Tenant]; !ok {
				b = []Blocker{{Code: ReasonDeferred, Tenant: w.Tenant, Waiting: clamp32(s.tenantWaiting[w.Tenant]), Bound: clamp32(s.in.Options.TenantBound)}}
				blockers[w.Tenant] = b
			}
		}
		plan.Pending = append(plan.Pending, Pending{Workload: w.Name, Code: ReasonDeferred, Blockers: b})
	}
}

func clamp32(n int) int32 { return int32(min(n, math.MaxInt32)) }

// classes lists the remembered pending decisions by example name (see
// Plan.Classes). Nothing was placed, so every one was made in the
// cycle's initial state.
//
// The decisions are each key's last (repeatKey): those made with the
// workload's class known are kept per class (shapes.last, one class per
// key holds one), others in the map. Every decision of the pending loop
// knows its class, so no key is in both.
func (s *snapshot) classes() []Class {
	out := make([]Class, 0, len(s.repeats))
	for _, r := range s.repeats {
		out = append(out, Class{Example: r.w, Pending: r.p})
	}
	for _, r := range s.shapes.last {
		if r != nil {
			out = append(out, Class{Example: r.w, Pending: r.p})
		}
	}
	slices.SortFunc(out, func(a, b Class) int { return strings.Compare(string(a.Example.Name), string(b.Example.Name)) })
	return out
}

// evictUnusable evicts every running workload that cannot stay where it
// is: one with a replica on a down node (a gang as a whole), or one that
// runs on a GPU model, in a region or in a pool its spec no longer accepts
// (a policy's migrate narrowed it), or one the input says to evict. It frees their GPUs on the nodes that are up.
func (s *snapshot) evictUnusable(plan *Plan) {
	for i := range s.run {
		r := &s.run[i]
		if r.evicted {
			continue // growth given back with its workload
		}
		reason := ""
		for _, n := range r.nodes {
			if s.nodes[n].down {
				reason = fmt.Sprintf("node %s is down", s.nodes[n].node.ID)
				break
			}
		}
		if r.group > 0 {
			// Growth on a failed node is given back; the rest is its
			// workload's run's to decide.
			if reason != "" {
				s.noteShrink(i, shrinkNote{why: reason})
				s.evict(i)
			}
			continue
		}
		if why, ok := s.in.Evict[r.w.Name]; ok && reason == "" {
			reason = why
		}
		if reason == "" && !(slices.Contains(r.w.Flavors, r.key.Model) && slices.Contains(r.w.Regions, r.key.Region)) {
			reason = fmt.Sprintf("runs on %s in %s, which it no longer accepts (flavors %v, regions %v)", r.key.Model, r.key.Region, r.w.Flavors, r.w.Regions)
		}
		if reason == "" && len(r.w.Pools) > 0 {
			for _, n := range r.nodes {
				if p := s.nodes[n].node.Labels[PoolLabel]; !slices.Contains(r.w.Pools, p) {
					reason = fmt.Sprintf("runs on %s in pool %q, which it no longer accepts (pools %v)", s.nodes[n].node.ID, p, r.w.Pools)
					break
				}
			}
		}
		if reason != "" {
			plan.Preemptions = append(plan.Preemptions, Preemption{Workload: r.w.Name, Reason: reason, WorkLost: s.lost(i)})
			s.evict(i)
		}
	}
	s.commit()
}

// hopelessKey is what decides whether a preemption search can succeed:
// claims that agree on it find the same victims and need the same room.
type hopelessKey struct {
	tenant, onRes, count, replicas int
	perGPU                         int32
	prio                           workload.Priority
	within, preemptible, gang      bool
	cover                          int32
	exit                           time.Duration // ExitTime: decides whether it may borrow reserved capacity
	timeClass                      int           // expected end (timeClass): may it use held or upcoming reserved machines?
	overrun                        bool          // may it evict overrunning work (overrunVictim)?
	cpu                            resource.MilliCPU
	mem                            resource.MiB
	cand                           candidate
	pools                          string // the workload's pool constraint, if any
}

func (s *snapshot) keyOf(cl *claim) hopelessKey {
	k := hopelessKey{tenant: cl.tenant, onRes: cl.onRes, count: cl.count, replicas: cl.w.Replicas, perGPU: cl.perGPU,
		prio: cl.w.Priority, within: cl.within, cover: cl.cover, preemptible: cl.w.Preemptible, gang: cl.w.Gang(), exit: ExitTime(cl.w),
		cpu: cl.w.CPU, mem: cl.w.Memory, cand: cl.cand}
	if s.timed() {
		k.timeClass = s.timeClass(cl.w)
	}
	k.overrun = s.in.Options.Planning.PreemptOverrun && s.planSlot(cl.w)
	if len(cl.w.Pools) > 0 {
		k.pools = strings.Join(cl.w.Pools, "\x00")
	}
	return k
}

// hopeless records that a preemption search for cl found nothing. Until
// something is evicted, placements only take room and add no victims, so
// the same search would fail again.
func (s *snapshot) hopeless(cl *claim) {
	if s.failed == nil {
		s.failed = map[hopelessKey]int{}
	}
	s.failed[s.keyOf(cl)] = s.evictions
}

func (s *snapshot) knownHopeless(cl *claim) bool {
	n, ok := s.failed[s.keyOf(cl)]
	return ok && n == s.evictions
}

// evict frees a running workload's GPUs and quota (journaled).
func (s *snapshot) evict(i int) {
	s.evictions++
	r := &s.run[i]
	r.evicted = true
	s.journal = append(s.journal, change{op: opEvict, run: i})
	for _, rep := range s.replicas[i] {
		s.give(rep.node, rep.gpus, rep.milli, rep.mask, r.w.CPU, r.w.Memory)
		s.evictedOn(rep.node)
	}
	if len(r.entries) > 0 {
		s.refundJ(r.entries, r.total)
	}
	if r.group > 0 {
		s.extUsage.Sub(r.entries, r.total)
		s.journal = append(s.journal, change{op: opExtRefund, refs: r.entries, amt: r.total})
	}
	if r.w.Running.OnReservation {
		for ri := range s.in.Reservations {
			if s.in.Reservations[ri].Name == r.w.Reservation {
				s.resUsed[ri] = s.resUsed[ri].Sub(r.total)
				s.journal = append(s.journal, change{op: opResUse, run: ri, amt: r.total})
			}
		}
	}
	if s.exts != nil {
		// An elastic workload gives back its steps from the top: a step
		// given back takes those above it along, and its run all of them.
		note := shrinkNote{why: "its workload is evicted"}
		if r.group > 0 {
			note = s.shrinks[i]
		}
		s.evictGrowth(i, note)
	}
}

// order returns the pending workloads in scheduling order: priority class,
// then the tenant's priority, then the tenant's usage relative to its
// guarantee and weight (least served first; with Options.FairShare its
// decayed usage, then its current usage), then submission time, then name.
func (s *snapshot) order() (pending, deferred []*workload.Workload) {
	items := s.buf.items[:0]
	if cap(items) < len(s.in.Workloads) {
		items = make([]orderItem, 0, len(s.in.Workloads))
	}
	nanos := true // every SubmittedAt is exact in int64 nanoseconds
	bound := s.in.Options.TenantBound
	lastTenant, lastT, lastOK := "", 0, false
	var levels *levelOrder
	if orderedAbove(s.tree) {
		levels = &levelOrder{s: s, ids: map[levelKey]int{}}
	}
	for _, w := range s.in.Workloads {
		if w.Running != nil {
			continue
		}
		it := orderItem{w: w, prio: w.Priority, name: namePrefix(w.Name)}
		var exact bool
		if it.at, exact = unixNanos(w.SubmittedAt); !exact {
			nanos = false
		}
		if w.Tenant != lastTenant || !lastOK {
			lastTenant = w.Tenant
			lastT, lastOK = s.tree.Lookup(w.Tenant)
		}
		it.tenant = -1 // unknown: never bounded (it is invalid)
		if lastOK {
			it.tenant = int32(lastT)
		}
		// A tenant without quota entries has no share to read (and its
		// workloads' lists stay out of the cache).
		if t, ok := lastT, lastOK; ok && (len(s.tree.Tenants[t].Quotas) > 0 || levels != nil) && len(w.Flavors) > 0 && len(w.Regions) > 0 {
			if q, idx, ok := s.tree.Entry(t, w.Flavors[0], w.Regions[0]); ok {
				it.share = tenancy.OrderShare(float64(s.usage[t][idx]), q)
				if s.decayed != nil {
					it.share, it.now = tenancy.OrderShare(s.decayed[t][idx], q), it.share
				}
				it.tprio = q.Priority
			}
			if levels != nil {
				// Ranked along the path below (levelOrder.rank).
				it.tprio, it.share, it.now = 0, float64(levels.id(t, w.Flavors[0], w.Regions[0])), 0
			}
		}
		if bound <= 0 {
			it.shape = s.shapes.of(w) // while its fields are in cache
		}
		items = append(items, it)
	}
	if levels != nil {
		rank := levels.ranks()
		for i := range items {
			if w := items[i].w; len(w.Flavors) > 0 && len(w.Regions) > 0 {
				if _, ok := s.tree.Lookup(w.Tenant); ok {
					items[i].share = float64(rank[int(items[i].share)])
				}
			}
		}
	}
	before := func(a, b *orderItem) int {
		if a.prio != b.prio {
			return int(b.prio - a.prio)
		}
		if a.tprio != b.tprio {
			return cmp.Compare(b.tprio, a.tprio)
		}
		if a.share != b.share {
			return cmp.Compare(a.share, b.share)
		}
		if a.now != b.now {
			return cmp.Compare(a.now, b.now)
		}
		if nanos {
			if a.at != b.at {
				return cmp.Compare(a.at, b.at)
			}
		} else if c := a.w.SubmittedAt.Compare(b.w.SubmittedAt); c != 0 {
			return c
		}
		if a.name != b.name {
			return cmp.Compare(a.name[0], b.name[0])*2 + cmp.Compare(a.name[1], b.name[1])
		}
		if c := strings.Compare(string(a.w.Name), string(b.w.Name)); c != 0 {
			return c
		}
		return cmp.Compare(a.w.Tenant, b.w.Tenant)
	}
	if bound > 0 {
		// Classes in input order, of the work decided only: numbered as
		// the cycle of the cut input numbers them.
		items, deferred = s.boundTenants(items, bound, before)
		for i := range items {
			items[i].shape = s.shapes.of(items[i].w)
		}
	}
	s.buf.items = items
	// The sort moves indices, not the items: a nearly sorted queue (the
	// usual case) is fixed by shifting, and an item is ten words.
	idx := sized(s.buf.itemIdx, len(items))
	s.buf.itemIdx = idx
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(i, j int32) int { return before(&items[i], &items[j]) })
	out := sized(s.buf.pending, len(items))
	s.buf.pending = out
	s.shapes.pending = sized(s.shapes.pending, len(items))
	for i, k := range idx {
		out[i] = items[k].w
		s.shapes.pending[i] = items[k].shape
	}
	s.shapes.last = make([]*repeat, len(s.shapes.reps))
	s.decided = out
	return out, deferred
}

// boundTenants keeps of each tenant's pending work its longest prefix in
// scheduling order (before) with at most bound shapes (classes of alike
// work, shapes), and returns the kept items in input order and the
// others, deferred, in input order (Options.TenantBound). Alike work is
// decided once (the repeat memo), so a tenant's cost to a cycle follows
// its shapes, not its workloads.
//
// A tenant with at most bound workloads, or whose work has at most bound
// shapes, is kept whole. For the others, a heap of the tenant's items
// yields them in order until the first of a shape past the bound: only
// the prefix is sorted and only the prefix's shapes are found, so the
// deferred work costs a cycle its order key and little else.
func (s *snapshot) boundTenants(items []orderItem, bound int, before func(a, b *orderItem) int) (kept []orderItem, deferred []*workload.Workload) {
	// Each known tenant's items (order found their tenants' indices), in
	// one backing array.
	n := make([]int32, len(s.tree.Tenants)+1)
	for i := range items {
		if t := items[i].tenant; t >= 0 {
			n[t+1]++
		}
	}
	for t := 1; t < len(n); t++ {
		n[t] += n[t-1]
	}
	all := make([]int32, n[len(n)-1])
	of := make([][]int32, len(s.tree.Tenants))
	for t := range of {
		of[t] = all[n[t]:n[t]:n[t+1]]
	}
	for i := range items {
		if t := items[i].tenant; t >= 0 {
			of[t] = append(of[t], int32(i))
		}
	}
	var drop []bool // per item: deferred
	for _, is := range of {
		if len(is) <= bound || fewShapes(items, is, bound) {
			continue
		}
		if drop == nil {
			drop = make([]bool, len(items))
		}
		// A min-heap of the tenant's items: the root is the first in order.
		h := slices.Clone(is)
		less := func(i, j int) bool { return before(&items[h[i]], &items[h[j]]) < 0 }
		down := func(i int) {
			for {
				c := 2*i + 1
				if c >= len(h) {
					return
				}
				if c+1 < len(h) && less(c+1, c) {
					c++
				}
				if !less(c, i) {
					return
				}
				h[i], h[c] = h[c], h[i]
				i = c
			}
		}
		for i := len(h)/2 - 1; i >= 0; i-- {
			down(i)
		}
		var seen shapes
		for len(h) > 0 {
			if seen.of(items[h[0]].w); len(seen.reps) > bound {
				break
			}
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
			down(0)
		}
		for _, i := range h {
			drop[i] = true
		}
		if s.tenantWaiting == nil {
			s.tenantWaiting = map[string]int{}
		}
		s.tenantWaiting[items[is[0]].w.Tenant] = len(h)
	}
	if drop == nil {
		return items, nil
	}
	kept = items[:0]
	for i := range items {
		if drop[i] {
			deferred = append(deferred, items[i].w)
		} else {
			kept = append(kept, items[i])
		}
	}
	return kept, deferred
}

// fewShapes reports whether the items is of items have at most bound
// shapes, looking no further than the first past it.
func fewShapes(items []orderItem, is []int32, bound int) bool {
	var seen shapes
	for _, i := range is {
		if seen.of(items[i].w); len(seen.reps) > bound {
			return false
		}
	}
	return true
}

// shapes groups the pending workloads into classes of alikeNow, found
// once per workload while order reads it (its fields are in cache then):
// the repeat memo then finds a workload's class by index, not by hashing
// its key and comparing it with the last decision's workload.
type shapes struct {
	// ids is the first class of each key's hash (shapeSeed): the classes
	// of one hash are chained (next) and told apart by alikeNow, so a
	// collision costs a comparison, never a wrong class. A mixed queue
	// has a class for every second workload, and a map of 8-byte keys
	// grows far more cheaply than one of repeatKeys.
	ids    map[uint64]int32
	reps   []*workload.Workload
	next   []int32 // next class with the same key, -1: none
	head   []int32 // first class with the same key
	prev   *workload.Workload
	prevID int32
	// recent are the last classes found through ids (nrecent of them,
	// nextRecent the oldest once full).
	recent              [4]int32
	nrecent, nextRecent int
	pending             []int32 // per pending workload in order, its class
	// last is, per class, the memo's last decision for it while that is
	// its key's last one (repeated's condition); nil otherwise.
	last []*repeat
}

// of returns w's class.
func (sh *shapes) of(w *workload.Workload) int32 {
	if sh.prev != nil && alikeNow(sh.prev, w) {
		return sh.prevID
	}
	// A queue of a few shapes interleaved (sizes in turn) finds its class
	// among the last ones found, without hashing the key.
	for _, id := range sh.recent[:sh.nrecent] {
		if r := sh.reps[id]; r.GPUs == w.GPUs && r.Replicas == w.Replicas && r.Priority == w.Priority && alikeNow(r, w) {
			sh.prev, sh.prevID = w, id
			return id
		}
	}
	if sh.ids == nil {
		sh.ids = map[uint64]int32{}
	}
	k := maphash.Comparable(shapeSeed, repeatKeyOf(w))
	id, ok := sh.ids[k]
	if ok {
		for ; id >= 0; id = sh.next[id] {
			if alikeNow(sh.reps[id], w) {
				sh.prev, sh.prevID = w, id
				sh.remember(id)
				return id
			}
		}
	}
	n := int32(len(sh.reps))
	sh.reps, sh.next = append(sh.reps, w), append(sh.next, -1)
	if ok {
		first := sh.ids[k]
		sh.head = append(sh.head, first)
		last := first
		for sh.next[last] >= 0 {
			last = sh.next[last]
		}
		sh.next[last] = n
	} else {
		sh.ids[k] = n
		sh.head = append(sh.head, n)
	}
	sh.prev, sh.prevID = w, n
	sh.remember(n)
	return n
}

// shapeSeed seeds the classes' key hashes: which seed does not matter,
// classes are numbered in the order they are first met.
var shapeSeed = maphash.MakeSeed()

// remember puts class id among the recent ones, replacing the oldest.
func (sh *shapes) remember(id int32) {
	if sh.nrecent < len(sh.recent) {
		sh.recent[sh.nrecent] = id
		sh.nrecent++
		return
	}
	sh.recent[sh.nextRecent] = id
	sh.nextRecent = (sh.nextRecent + 1) % len(sh.recent)
}

// unixNanos is t in Unix nanoseconds, and whether that is exact (t within
// int64 nanoseconds of 1970): only then do the integers order as the times.
func unixNanos(t time.Time) (int64, bool) {
	n := t.UnixNano()
	return n, t.Equal(time.Unix(0, n))
}

// orderItem is a pending workload with its sort keys, computed once per
// workload so that the sort compares numbers (a queue of tens of
// thousands is sorted every cycle).
type orderItem struct {
	w      *workload.Workload
	prio   workload.Priority
	tprio  int
	share  float64   // usage over guarantee × weight: decayed with fair share, else current
	now    float64   // with fair share, current usage over guarantee × weight
	at     int64     // SubmittedAt in Unix nanoseconds
	name   [2]uint64 // namePrefix(w.Name)
	shape  int32     // its class (shapes)
	tenant int32     // its tenant's index in the tree, -1 if unknown
}

// namePrefix is the first 16 bytes of a name as two big-endian numbers,
// zero-padded: names whose prefixes differ order as the prefixes do, so
// the sort reads names themselves only when the prefixes tie.
func namePrefix(n workload.ID) [2]uint64 {
	var b [16]byte
	copy(b[:], n)
	return [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// claim is one pending workload being decided at one candidate.
type claim struct {
	w       *workload.Workload
	tenant  int
	cand    candidate
	key     tenancy.Key
	entries []tenancy.Ref
	total   resource.MilliGPU
	// perGPU is the milli each replica takes on each of its GPUs; count is
	// the GPUs per replica.
	perGPU int32
	count  int
	// within is true when the claim fits in the tenant's guarantee;
	// borrow is how much of it lies beyond the guarantee.
	within bool
	borrow resource.MilliGPU
	// cover is the tenant whose guarantee the claim fits in: its own, an
	// ancestor's (see tree.go), or -1.
	cover int32
	// onRes is the reservation index when the claim uses its own
	// reservation, else -1.
	onRes int
	pools []int
	// mg is the candidate model's MIG rules and prof the index of the
	// workload's profile there, for a MIG claim (nil, -1 otherwise).
	mg   *mig.GPU
	prof int
	// lastReason is set when placement failed for a reason other than room.
	lastReason *Blocker
}

// maxPasses bounds the passes over pending work in one cycle.
const maxPasses = 3

// AlikeKey is a comparable digest of what Alike compares: alike workloads
// have equal keys (workloads with equal keys need not be alike).
type AlikeKey = repeatKey

// KeyOf returns w's AlikeKey.
func KeyOf(w *workload.Workload) AlikeKey { return repeatKeyOf(w) }

// Alike reports whether the core decides pending workloads a and b alike
// in any state: they differ at most in name, submission time and fields
// the core does not read (kind, checkpoint interval, labels). Grace period
// and expected runtime are read: they decide who may use reserved
// machines (ExitTime, and the windows of upcoming reservations).
func Alike(a, b *workload.Workload) bool { return alike(a, b) }

// repeatKey is what a workload's decision depends on, besides the state
// of the snapshot: everything scheduleOne reads from it except its name.
// Workloads that agree on it, and on their flavor and region lists, are
// decided alike while nothing has been placed in between; so a pending
// queue of thousands of identical requests costs one decision, not
// thousands (the server's queue after a storm of submissions).
type repeatKey struct {
	tenant      string
	prio        workload.Priority
	preemptible bool
	gpus        resource.MilliGPU
	replicas    int
	cpu         resource.MilliCPU
	mem         resource.MiB
	topology    workload.Topology
	reservation string
	maxPrice    float64
	flavor0     fleet.ModelID
	region0     string
	nflavors    int
	nregions    int
	npools      int
	mig         string
	gpuMemory   resource.GPUMemory
}

// repeat is the last pending decision for a repeatKey: the workload it was
// made for, the generation it was made at (gen), and its result.
type repeat struct {
	w      *workload.Workload
	placed int
	tc     int // s.timeClass(w) when made, if timed (valid while placed is the generation)
	p      Pending
}

func repeatKeyOf(w *workload.Workload) repeatKey {
	k := repeatKey{tenant: w.Tenant, prio: w.Priority, preemptible: w.Preemptible, gpus: w.GPUs, replicas: w.Replicas,
		cpu: w.CPU, mem: w.Memory, topology: w.Topology, reservation: w.Reservation, maxPrice: w.MaxPrice,
		nflavors: len(w.Flavors), nregions: len(w.Regions), npools: len(w.Pools), mig: w.MIG, gpuMemory: w.GPUMemory}
	if len(w.Flavors) > 0 {
		k.flavor0 = w.Flavors[0]
	}
	if len(w.Regions) > 0 {
		k.region0 = w.Regions[0]
	}
	return k
}

// repeated returns the decision made for a workload alike to w if nothing
// was placed or evicted since (so the same search would fail the same way).
func (s *snapshot) repeated(w *workload.Workload) (Pending, bool) {
	if s.repeats == nil || s.plans[w] != nil {
		return Pending{}, false // a workload's own hold binds everyone but it
	}
	if s.shape > 0 {
		// The class's last decision, if it is its key's last one, is the
		// one the map would give; its workload is alikeNow to w.
		r := s.shapes.last[s.shape-1]
		if r == nil || r.placed != s.gen() || (s.timed() && r.tc != s.timeClass(w)) {
			return Pending{}, false
		}
		p := r.p
		p.Workload = w.Name
		return p, true
	}
	// Alike workloads usually come one after another in the order, so the
	// last decision is compared first, without hashing the key.
	r := s.lastRepeat
	if r == nil || r.placed != s.gen() || !s.alikeRepeat(r, w) {
		var ok bool
		if r, ok = s.repeats[repeatKeyOf(w)]; !ok || r.placed != s.gen() || !s.alikeRepeat(r, w) {
			return Pending{}, false
		}
		s.lastRepeat = r
	}
	p := r.p
	p.Workload = w.Name
	return p, true
}

// alikeRepeat is s.alike(r.w, w) with r.w's time class as remembered
// (thresholds only change with the generation).
func (s *snapshot) alikeRepeat(r *repeat, w *workload.Workload) bool {
	if s.timed() {
		return alikeNow(r.w, w) && r.tc == s.timeClass(w)
	}
	return alikeNow(r.w, w)
}

// alike reports whether a and b agree on everything scheduleOne reads but
// their names (the fields of repeatKey, and the whole flavor, region and
// pool lists), in any state.
func alike(a, b *workload.Workload) bool {
	return a.ExpectedRuntime == b.ExpectedRuntime && alikeNow(a, b)
}

// alike is alike for this snapshot's state: the expected runtime is read
// only to decide who may use held capacity or an upcoming reservation's
// machines, so only which of those instants it ends by is compared
// (timeClass), and nothing without them (the simulator's jobs all differ
// in it).
func (s *snapshot) alike(a, b *workload.Workload) bool {
	if s.timed() {
		return alikeNow(a, b) && s.timeClass(a) == s.timeClass(b)
	}
	return alikeNow(a, b)
}

// gen counts what changes decisions during a cycle: placements and plans
// (a repeat is valid only at the count it was made at).
func (s *snapshot) gen() int { return s.placed + s.planned }

// alikeNow is alike but for the expected runtime.
func alikeNow(a, b *workload.Workload) bool {
	return a.Tenant == b.Tenant && a.Priority == b.Priority && a.Preemptible == b.Preemptible &&
		a.GPUs == b.GPUs && a.Replicas == b.Replicas && a.CPU == b.CPU && a.Memory == b.Memory &&
		a.Topology == b.Topology && a.Reservation == b.Reservation && a.MaxPrice == b.MaxPrice &&
		a.GracePeriod == b.GracePeriod && // ExitTime: may it borrow reserved capacity?
		a.MIG == b.MIG && a.GPUMemory == b.GPUMemory &&
		slices.Equal(a.Flavors, b.Flavors) && slices.Equal(a.Regions, b.Regions) && slices.Equal(a.Pools, b.Pools)
}

// remember records w's pending decision for the workloads alike to it.
// Scorers that draw random numbers per decision opt out: skipping a
// decision would shift every later draw.
func (s *snapshot) remember(w *workload.Workload, p Pending) {
	if s.in.Options.noRepeat {
		return
	}
	if _, ok := s.scorer.(score.Chooser); ok {
		return
	}
	if s.plans[w] != nil {
		return // decided past its own hold, which binds alike workloads
	}
	if s.repeats == nil {
		s.repeats = map[repeatKey]*repeat{}
	}
	if len(s.repeatSlab) == 0 {
		s.repeatSlab = make([]repeat, 256)
	}
	r := &s.repeatSlab[0]
	s.repeatSlab = s.repeatSlab[1:]
	*r = repeat{w: w, placed: s.gen(), p: p}
	if s.timed() {
		r.tc = s.timeClass(w)
	}
	id := s.shape - 1
	if id < 0 {
		s.repeats[repeatKeyOf(w)] = r
		s.lastRepeat = r
		return
	}
	// With its class known, the key's last decision is kept per class
	// (not hashed into the map): the key's other classes lose theirs.
	sh := &s.shapes
	for c := sh.head[id]; c >= 0; c = sh.next[c] {
		sh.last[c] = nil
	}
	sh.last[id] = r
}

// scheduleOne decides w: placed (true) or pending with a reason (false).
func (s *snapshot) scheduleOne(w *workload.Workload, plan *Plan) bool {
	if p, ok := s.repeated(w); ok {
		plan.Pending = append(plan.Pending, p)
		return false
	}
	t, ok := s.tree.Lookup(w.Tenant)
	if !ok {
		plan.Pending = append(plan.Pending, invalid(w, Blocker{Code: ReasonInvalid, Problem: ProblemUnknownTenant, Tenant: w.Tenant}))
		return false
	}
	if w.GPUs <= 0 || w.Replicas < 1 {
		plan.Pending = append(plan.Pending, invalid(w, Blocker{Code: ReasonInvalid, Problem: ProblemNoGPUs}))
		return false
	}
	s.cands = appendCandidates(s.cands[:0], w)
	cands := s.cands
	passes := []bool{!s.in.Options.DisablePreemption}
	if s.in.Options.OverflowBeforePreempt && !s.in.Options.DisablePreemption {
		passes = []bool{false, true}
	}
	reasons := s.reasons[:0]
	defer func() { s.reasons = reasons[:0] }()
	for _, preempt := range passes {
		reasons = reasons[:0]
		var at Blocker // written only when a candidate fails
		for ci, c := range cands {
			if s.tryCandidate(w, t, c, preempt, plan, &at) {
				if ci > 0 {
					plan.Overflow = append(plan.Overflow, Overflow{Workload: w.Name, From: cands[0].String(), To: c.String()})
				}
				return true
			}
			reasons = append(reasons, at)
		}
	}
	var p Pending
	if len(reasons) > 0 {
		p = Pending{Workload: w.Name, Code: reasons[0].Code, Blockers: s.keepBlockers(reasons)}
	} else {
		p = invalid(w, Blocker{Code: ReasonInvalid, Problem: ProblemNoCandidate})
	}
	plan.Pending = append(plan.Pending, p)
	s.remember(w, p)
	return false
}

// keepBlockers copies bs into the plan's blockers: one array holds many
// pending decisions' lists (each capped, so an append copies it).
func (s *snapshot) keepBlockers(bs []Blocker) []Blocker {
	if cap(s.blockerSlab)-len(s.blockerSlab) < len(bs) {
		s.blockerSlab = make([]Blocker, 0, max(256, len(bs)))
	}
	n := len(s.blockerSlab)
	s.blockerSlab = append(s.blockerSlab, bs...)
	return s.blockerSlab[n:len(s.blockerSlab):len(s.blockerSlab)]
}

// invalid is a pending decision for a workload that cannot be placed
// anywhere, with its one blocker.
func invalid(w *workload.Workload, b Blocker) Pending {
	return Pending{Workload: w.Name, Code: b.Code, Blockers: []Blocker{b}}
}

// tryCandidate admits and places w at c, preempting if allowed. It commits
// and emits on success; on failure it leaves no trace and says why in at
// (which a success leaves alone: placements pay for no reason).
func (s *snapshot) tryCandidate(w *workload.Workload, t int, c candidate, preempt bool, plan *Plan, at *Blocker) bool {
	pools := s.regionModel[tenancy.Key{Model: c.model, Region: c.region}]
	if len(pools) == 0 {
		*at = Blocker{Code: ReasonNoFlavor, Flavor: c.model, Region: c.region, Pools: w.Pools}
		return false
	}
	if (w.MIG != "" || w.GPUMemory != 0) && !s.gpuFit(w, c, at) {
		return false
	}
	if spot.Bound(w) {
		for _, p := range s.in.SpotPrices {
			if p.Model == c.model && p.Region == c.region && spot.AdmitBound(p.PerGPUHour, p.Firm) > w.MaxPrice {
				*at = Blocker{Code: ReasonSpotPrice, Flavor: c.model, Region: c.region, Pools: w.Pools, Price: p.PerGPUHour, Firm: p.Firm, MaxPrice: w.MaxPrice}
				return false
			}
		}
	}
	// The claim lives for this attempt only (nothing keeps it): one per
	// snapshot, reused, instead of one allocation per attempt.
	cl := &s.claimBuf
	pbuf := cl.pools
	initClaim(cl, w, t, c)
	cl.entries = s.entriesFor(t, cl.key)
	if !s.admit(cl, at) {
		s.withReservation(w, t, c, at)
		return false
	}
	cl.pools = s.eligiblePoolsInto(pbuf[:0], cl, pools)
	if cl.mg != nil && len(cl.pools) == 0 && s.noMIGPools(cl, pools) {
		*at = Blocker{Code: ReasonNoFlavor, Flavor: c.model, Region: c.region, Pools: w.Pools, MIG: migName(w.MIG), NoMIGMode: true}
		return false
	}
	if s.place(cl, preempt, plan) {
		return true
	}
	if cl.lastReason != nil {
		*at = *cl.lastReason
	} else {
		s.noFit(cl, preempt, at)
	}
	s.withReservation(w, t, c, at)
	return false
}

// withReservation adds to a failed candidate's blocker the state of w's
// own reservation there, if it has one (a failed attempt changed nothing).
func (s *snapshot) withReservation(w *workload.Workload, t int, c candidate, at *Blocker) {
	if w.Reservation == "" {
		return
	}
	if ri, r, ok := s.ownReservation(w, t, c); ok {
		at.Reservation = &ReservationUse{Name: r.Name, Used: s.resUsed[ri], Capacity: s.resCapacity(r), Down: s.resDown(r), Nodes: len(r.Nodes)}
	}
}

// claimReservation places w on its own reservation if it fits there,
// evicting preemptible work that borrowed the reservation's idle capacity.
func (s *snapshot) claimReservation(w *workload.Workload, plan *Plan) bool {
	t, ok := s.tree.Lookup(w.Tenant)
	if !ok || w.GPUs <= 0 || w.Replicas < 1 {
		return false
	}
	cands := candidates(w)
	for ci, c := range cands {
		ri, r, ok := s.ownReservation(w, t, c)
		if !ok {
			continue
		}
		var at Blocker
		if (w.MIG != "" || w.GPUMemory != 0) && !s.gpuFit(w, c, &at) {
			continue // no such MIG profile, or too little memory
		}
		cl := s.newClaim(w, t, c)
		if s.resUsed[ri].Add(cl.total) > s.resCapacity(r) {
			continue
		}
		var pools []int // the reservation's pools (one per pool label) the workload accepts
		for _, pi := range s.regionModel[tenancy.Key{Model: c.model, Region: c.region}] {
			k := s.pools[pi].key
			if k.kind == poolReservation && k.id == ri && (len(w.Pools) == 0 || slices.Contains(w.Pools, k.label)) && k.mig == (cl.mg != nil) {
				pools = append(pools, pi)
			}
		}
		if len(pools) == 0 {
			continue
		}
		cl.onRes, cl.within, cl.pools = ri, true, pools
		if s.place(cl, !s.in.Options.DisablePreemption, plan) {
			if ci > 0 {
				plan.Overflow = append(plan.Overflow, Overflow{Workload: w.Name, From: cands[0].String(), To: c.String()})
			}
			return true
		}
	}
	return false
}

func (s *snapshot) newClaim(w *workload.Workload, t int, c candidate) *claim {
	cl := &claim{}
	initClaim(cl, w, t, c)
	return cl
}

// initClaim sets cl to a fresh claim of w (tenant t) at candidate c.
func initClaim(cl *claim, w *workload.Workload, t int, c candidate) {
	*cl = claim{w: w, tenant: t, cand: c, key: tenancy.Key{Model: c.model, Region: c.region}, total: w.TotalGPUs(), onRes: -1, cover: -1, prof: -1}
	if w.MIG != "" {
		// One instance per replica, on one GPU; its share of the GPU's
		// milli on this model (w.GPUs is the same where Validate passed).
		cl.perGPU, cl.count = int32(min(w.GPUs, resource.PerGPU)), 1
		if g, ok := mig.For(string(c.model)); ok {
			if p := g.Index(w.MIG); p >= 0 {
				cl.mg, cl.prof = g, p
				cl.perGPU = int32(g.Profiles[p].Share())
			}
		}
		return
	}
	if w.GPUs < resource.PerGPU {
		cl.perGPU, cl.count = int32(w.GPUs), 1
	} else {
		cl.perGPU, cl.count = resource.PerGPU, w.GPUs.WholeGPUs()
	}
}

// resCapacity is the GPUs a reservation holds on nodes that are up.
func (s *snapshot) resCapacity(r *tenancy.Reservation) resource.MilliGPU {
	return resource.GPUs((len(r.Nodes) - s.resDown(r)) * s.reservedGPUs(r))
}

// resDown counts a reservation's nodes that are down.
func (s *snapshot) resDown(r *tenancy.Reservation) int {
	n := 0
	for _, id := range r.Nodes {
		if node, ok := s.in.Fleet.Node(id); ok && s.nodes[node.Index].down {
			n++
		}
	}
	return n
}

// ownReservation returns w's named reservation when it is active, owned by
// w's tenant and serves candidate c.
func (s *snapshot) ownReservation(w *workload.Workload, t int, c candidate) (int, *tenancy.Reservation, bool) {
	for i := range s.in.Reservations {
		r := &s.in.Reservations[i]
		if r.Name != w.Reservation || r.Region != c.region || !r.Active(s.in.Now) {
			continue
		}
		if owner, ok := s.tree.Lookup(r.Owner); !ok || !s.tree.InSubtree(t, owner) {
			continue
		}
		if sku, ok := s.in.Fleet.Catalog.SKU(r.SKU); !ok || sku.Model != c.model {
			continue
		}
		return i, r, true
	}
	return 0, nil, false
}

func (s *snapshot) reservedGPUs(r *tenancy.Reservation) int {
	if sku, ok := s.in.Fleet.Catalog.SKU(r.SKU); ok {
		return sku.GPUs
	}
	return 0
}

// admit checks the tenant tree: every level within its limit, and a
// borrower only into capacity that no one else's guarantee protects.
// On refusal it says why in at.
func (s *snapshot) admit(cl *claim, at *Blocker) bool {
	for _, ref := range cl.entries {
		q := s.tree.Tenants[ref.Tenant].Quotas[ref.Entry]
		reserved := s.reserved.At(ref)
		used := s.usage.At(ref).Add(reserved).Sub(s.extAt(ref)) // growth gives way (shrinkToLimit)
		if used.Add(cl.total) > q.Limit {
			*at = Blocker{Code: ReasonQuotaLimit, Flavor: cl.cand.model, Region: cl.cand.region, Pools: cl.w.Pools,
				Tenant: s.tree.Tenants[ref.Tenant].Name, AllRegions: q.Key.Region == "",
				Used: used, Limit: q.Limit, Requested: cl.total, Reserved: reserved}
			return false
		}
	}
	q, idx, ok := s.tree.Entry(cl.tenant, cl.cand.model, cl.cand.region)
	if ok {
		used := s.usage[cl.tenant][idx].Sub(s.extAt(tenancy.Ref{Tenant: cl.tenant, Entry: idx}))
		cl.within = used.Add(cl.total) <= q.Guaranteed
		cl.borrow = min(cl.total, used.Add(cl.total).Sub(q.Guaranteed))
	} else {
		cl.within, cl.borrow = false, cl.total
	}
	cl.cover = -1
	if cl.within {
		cl.cover = int32(cl.tenant)
	} else {
		s.claimCover(cl)
	}
	return true
}

// lendingOK checks a borrowing claim after it was placed: the capacity left
// free (shared pool and partitions, which back guarantees too) must still
// cover the idle guarantee that other tenants do not lend. A claim that took nothing from the shared pool, or did not
// make a shortfall worse, passes.
func (s *snapshot) lendingOK(cl *claim, freeBefore, protectedBefore resource.MilliGPU) (Blocker, bool) {
	if cl.borrow == 0 {
		return Blocker{}, true
	}
	free, protected := s.free[cl.key], s.protectedFor(cl.key, cl.tenant)
	if free >= protected || free >= freeBefore {
		return Blocker{}, true
	}
	if short := protected - free; short <= protectedBefore-min(freeBefore, protectedBefore) {
		return Blocker{}, true
	}
	return Blocker{Code: ReasonLendingLimit, Flavor: cl.cand.model, Region: cl.cand.region, Pools: cl.w.Pools,
		Tenant: s.tree.Tenants[cl.tenant].Name, Requested: cl.borrow,
		Limit: freeBefore.Sub(protectedBefore), Free: freeBefore, Protected: protectedBefore}, false
}

// protectedFor is the idle guarantee in key that others do not lend to
// tenant except.
func (s *snapshot) protectedFor(k tenancy.Key, except int) resource.MilliGPU {
	if s.cover != nil {
		return s.protectedTree(k, except)
	}
	return s.protected(k, except)
}

// protected is the idle guarantee in key that other tenants do not lend.
// Every tenant's part is summed once per key and state of the usage
// (usageVer): claims that fail change nothing, so a queue of them reads
// the sum instead of walking the tree each.
func (s *snapshot) protected(k tenancy.Key, except int) resource.MilliGPU {
	var m *protMemo
	for i := range s.protMemos {
		if s.protMemos[i].key == k {
			m = &s.protMemos[i]
			break
		}
	}
	if m == nil {
		s.protMemos = append(s.protMemos, protMemo{key: k, own: make([]resource.MilliGPU, len(s.tree.Tenants)), ver: s.usageVer - 1})
		m = &s.protMemos[len(s.protMemos)-1]
	}
	if m.ver != s.usageVer {
		m.ver, m.total = s.usageVer, 0
		for t, ten := range s.tree.Tenants {
			m.own[t] = 0
			for j, q := range ten.Quotas {
				if q.Key != k || q.Guaranteed == 0 {
					continue
				}
				idle := q.Guaranteed.Sub(s.usage[t][j])
				m.own[t] = m.own[t].Add(min(idle, q.Guaranteed.Sub(q.Lendable)))
			}
			m.total = m.total.Add(m.own[t])
		}
	}
	if except >= 0 && except < len(m.own) {
		return m.total.Sub(m.own[except])
	}
	return m.total
}

// protMemo is one key's protected idle guarantee per tenant, as of the
// usage state ver.
type protMemo struct {
	key   tenancy.Key
	ver   uint64
	total resource.MilliGPU
	own   []resource.MilliGPU
}

// eligiblePools orders the pools a claim may use: its partitions, then the
// shared pool, then (preemptible work only) idle reserved capacity; of
// those, only the ones its pool constraint names, when it has one.
func (s *snapshot) eligiblePools(cl *claim, pools []int) []int {
	return s.eligiblePoolsInto(make([]int, 0, len(pools)), cl, pools)
}

// eligiblePoolsInto is eligiblePools appending to out.
func (s *snapshot) eligiblePoolsInto(out []int, cl *claim, pools []int) []int {
	for _, kind := range []poolKind{poolPartition, poolShared, poolReservation} {
		for _, pi := range pools {
			k := s.pools[pi].key
			if k.kind != kind {
				continue
			}
			// A workload with a pool constraint uses only those pools.
			if len(cl.w.Pools) > 0 && !slices.Contains(cl.w.Pools, k.label) {
				continue
			}
			// MIG-mode GPUs run MIG instances only, and those run only there.
			if k.mig != (cl.mg != nil) {
				continue
			}
			switch kind {
			case poolPartition:
				owner, ok := s.tree.Lookup(s.in.Partitions[k.id].Tenant)
				if !ok || !s.tree.InSubtree(cl.tenant, owner) {
					continue
				}
			case poolReservation:
				// Idle reserved capacity is lent only to preemptible work,
				// only when preemption can give it back to the owner, and
				// only to work that leaves within the honour window; before
				// the window opens, also to work expected to end by then.
				if !s.mayBorrowReserved(cl.w) && !s.endsBefore(cl.w, &s.in.Reservations[k.id]) {
					continue
				}
			}
			out = append(out, pi)
		}
	}
	return out
}

// mayBorrowReserved reports whether w may use idle reserved capacity: it
// is preemptible, preemption is on (so the owner can take it back), and it
// leaves within the honour window once evicted.
func (s *snapshot) mayBorrowReserved(w *workload.Workload) bool {
	if !w.Preemptible || s.in.Options.DisablePreemption {
		return false
	}
	hw := s.in.Options.HonourWindow
	return hw <= 0 || ExitTime(w) <= hw
}

// endsBefore reports whether w, placed now, is expected to end before
// r's window opens: r is upcoming (bound, before Start) and Now + w's
// expected runtime (declared, or its class's Planning.DefaultRuntime) is
// at most r's Start. Work without one is not expected to end.
func (s *snapshot) endsBefore(w *workload.Workload, r *tenancy.Reservation) bool {
	rt := s.runtime(w)
	return r.Upcoming(s.in.Now) && rt > 0 && !s.in.Now.Add(rt).After(r.Start)
}

// place puts every replica of the claim, preempting if allowed; on success
// it commits and emits, otherwise it rolls everything back.
func (s *snapshot) place(cl *claim, preempt bool, plan *Plan) bool {
	mark := s.mark()
	s.claimPrio = s.claimPrio[:0]
	s.claimShrunk = false
	freeBefore, protectedBefore := s.free[cl.key], resource.MilliGPU(0)
	if cl.borrow > 0 {
		protectedBefore = s.protectedFor(cl.key, cl.tenant)
	}
	var placed []Placement
	var victims []Preemption
	if cl.w.Gang() && cl.w.Replicas > 1 {
		block, ok := s.pickBlock(cl)
		if !ok && preempt && !s.blockOutOfReach(cl, true) && !s.knownHopeless(cl) {
			block, victims, ok = s.preemptBlock(cl)
			if !ok {
				s.hopeless(cl)
			}
		}
		if !ok {
			s.rollback(mark)
			return false
		}
		for r := 0; r < cl.w.Replicas; r++ {
			i := s.bestNodeIn(cl, s.blocks[block])
			if i < 0 {
				s.rollback(mark)
				return false
			}
			placed = append(placed, s.assign(cl, r, i))
		}
	} else {
		for r := 0; r < cl.w.Replicas; r++ {
			var i int
			var gpus []int
			if s.scorer != nil && cl.mg == nil {
				i, gpus = s.bestNodeScored(cl)
			} else {
				i = s.bestNode(cl)
			}
			// Known failures are skipped: those out of reach (cheaply
			// told, so first) and earlier searches' (hopeless).
			if i < 0 && preempt && !s.outOfReach(cl) && (r > 0 || !s.knownHopeless(cl)) {
				var vs []Preemption
				i, vs = s.preemptNode(cl)
				victims = append(victims, vs...)
				if i < 0 && r == 0 {
					s.hopeless(cl)
				}
			}
			if i < 0 {
				s.rollback(mark)
				return false
			}
			placed = append(placed, s.assignGPUs(cl, r, i, gpus))
		}
	}
	if cl.onRes < 0 {
		s.chargeJ(cl.entries, cl.total)
		if s.extUsage != nil {
			s.shrinkToLimit(cl)
		}
	}
	if r, ok := s.lendingOK(cl, freeBefore, protectedBefore); !ok {
		s.rollback(mark)
		// Copied here, so that only a refusal allocates (the address of r
		// itself would move every placement's r to the heap).
		refused := r
		cl.lastReason = &refused
		return false
	}
	s.commit()
	s.placed++
	s.recordFresh(cl, placed)
	s.foreignPrio = append(s.foreignPrio, s.claimPrio...)
	if cl.onRes >= 0 {
		s.resUsed[cl.onRes] = s.resUsed[cl.onRes].Add(cl.total)
	}
	for i := range placed {
		placed[i].AfterPreemption = len(victims) > 0 || s.claimShrunk
		placed[i].Within = cl.within
	}
	plan.Preemptions = append(plan.Preemptions, victims...)
	plan.Placements = append(plan.Placements, placed...)
	return true
}

// assign takes GPUs for replica r of the claim on node i.
func (s *snapshot) assign(cl *claim, r, i int) Placement { return s.assignGPUs(cl, r, i, nil) }

// assignGPUs is assign with the GPUs chosen by a scorer (nil: choose here).
func (s *snapshot) assignGPUs(cl *claim, r, i int, gpus []int) Placement {
	if cl.mg != nil {
		return s.assignMIG(cl, r, i)
	}
	if len(gpus) != cl.count {
		gpus = pickGPUs(s.nodes[i].free, cl.perGPU, cl.count)
	}
	s.take(i, gpus, cl.perGPU, 0, cl.w.CPU, cl.w.Memory)
	s.useSlack(cl, i)
	return Placement{
		Workload: cl.w.Name, Replica: r, Node: s.nodes[i].node.ID, GPUs: gpus, Milli: int64(cl.perGPU),
		Flavor: cl.cand.model, Region: cl.cand.region, OnReservation: cl.onRes >= 0,
	}
}

// pickGPUs chooses count GPUs with at least milli free: for whole GPUs the
// lowest-index free ones; for a share, the fullest GPU that still fits
// (best fit), lowest index on ties.
func pickGPUs(free []int32, milli int32, count int) []int {
	out := make([]int, 0, count)
	if milli == resource.PerGPU {
		for g, f := range free {
			if f == resource.PerGPU {
				out = append(out, g)
				if len(out) == count {
					break
				}
			}
		}
		return out
	}
	best := -1
	for g, f := range free {
		if f >= milli && (best < 0 || f < free[best]) {
			best = g
		}
	}
	if best >= 0 {
		out = append(out, best)
	}
	return out
}

// nodeAdmits is the one node-feasibility predicate: whether node i, with
// cpu and mem free (as they are now, or as a preemption search would
// leave them), may take a replica of the claim at all, GPUs aside. Every
// node constraint lives here (a node that is down or in no pool takes
// nothing; CPU and memory): fits, bestNode, bestNodeIn, pickBlock, the
// scorers and the preemption search all ask it, through replicasFit or
// fits, so a new constraint (a taint, a label, a resource) is one edit.
// GPU room is the one resource the pools index (best-fit buckets), so it
// is counted apart, by slots.
func (s *snapshot) nodeAdmits(cl *claim, i int, cpu, mem int64) bool {
	// A node that is down is in no pool (pool -1, see instantiate).
	// GPUs held for a planned start are counted here, as replicas
	// (heldReplicas): the pools index free GPUs, not holds.
	return s.nodes[i].pool >= 0 && cpu >= int64(cl.w.CPU) && mem >= int64(cl.w.Memory) &&
		(s.holdsAt == nil || s.heldReplicas(cl, i) > 0)
}

// replicasFit is how many replicas of the claim node i can take, given
// its room: free GPUs, CPU and memory (as a preemption search would leave
// them; replicasNow for the room it has now). Zero unless nodeAdmits.
// For a MIG claim, layouts are the node's MIG layouts as that room has
// them, and the replicas are the instances of its profile they take.
func (s *snapshot) replicasFit(cl *claim, i int, free []int32, layouts []uint8, cpu, mem int64) int {
	if cl.mg != nil {
		return s.admitReplicas(cl, i, migSlots(cl, layouts), cpu, mem)
	}
	return s.admitReplicas(cl, i, slots(free, cl.perGPU, cl.count), cpu, mem)
}

// replicasNow is replicasFit with node i's room as it is now. Whole GPUs
// are read from the node's counter (whole) instead of counted GPU by GPU:
// the block search asks this of every node of every block a gang could
// use.
func (s *snapshot) replicasNow(cl *claim, i int) int {
	ns := &s.nodes[i]
	var n int
	switch {
	case cl.mg != nil:
		n = migSlots(cl, s.layoutsOf(i))
	case cl.perGPU == resource.PerGPU:
		n = ns.whole / cl.count
	default:
		n = slots(ns.free, cl.perGPU, cl.count)
	}
	return s.admitReplicas(cl, i, n, int64(ns.cpu), int64(ns.mem))
}

// admitReplicas bounds n, the replicas node i's GPUs could hold, by the
// node predicate and by its cpu and mem.
func (s *snapshot) admitReplicas(cl *claim, i, n int, cpu, mem int64) int {
	if n == 0 || !s.nodeAdmits(cl, i, cpu, mem) {
		return 0
	}
	if c := int64(cl.w.CPU); c > 0 {
		n = min(n, int(cpu/c))
	}
	if m := int64(cl.w.Memory); m > 0 {
		n = min(n, int(mem/m))
	}
	if s.holdsAt != nil {
		n = min(n, s.heldReplicas(cl, i))
	}
	return n
}

// fits reports whether node i can take one replica of the claim now:
// replicasFit > 0, with the GPU room read from the node's counters.
func (s *snapshot) fits(cl *claim, i int) bool {
	ns := &s.nodes[i]
	if !s.nodeAdmits(cl, i, int64(ns.cpu), int64(ns.mem)) {
		return false
	}
	if cl.mg != nil {
		g, _, _ := migBest(cl, s.layoutsOf(i))
		return g >= 0
	}
	return gpuRoom(cl, ns)
}

// gpuRoom reports whether node ns has GPUs free for one replica now.
func gpuRoom(cl *claim, ns *nodeState) bool {
	if cl.perGPU == resource.PerGPU {
		return ns.whole >= cl.count
	}
	for _, f := range ns.free {
		if f >= cl.perGPU {
			return true
		}
	}
	return false
}

// bestNode finds the node for one replica: in pool order, the node with the
// fewest fully free GPUs that still fit (best fit), lowest index on ties.
// A share of a GPU goes to the fullest partly used GPU that fits first.
func (s *snapshot) bestNode(cl *claim) int {
	if cl.mg != nil {
		return s.bestNodeMIG(cl)
	}
	for _, pi := range cl.pools {
		p := s.pools[pi]
		if cl.perGPU < resource.PerGPU {
			best, bestFree := -1, int32(resource.PerGPU)
			for pos := nextBit(p.partial, 0); pos >= 0; pos = nextBit(p.partial, pos+1) {
				i := p.nodes[pos]
				ns := &s.nodes[i]
				if !s.nodeAdmits(cl, i, int64(ns.cpu), int64(ns.mem)) {
					continue
				}
				for _, f := range ns.free {
					if f >= cl.perGPU && f < bestFree {
						best, bestFree = i, f
					}
				}
			}
			if best >= 0 {
				return best
			}
		}
		for k := cl.count; k < len(p.buckets); k++ {
			for pos := p.first(k); pos >= 0; pos = nextBit(p.buckets[k], pos+1) {
				i := p.nodes[pos]
				if ns := &s.nodes[i]; s.nodeAdmits(cl, i, int64(ns.cpu), int64(ns.mem)) { // GPU room: bucket k >= count
					return i
				}
			}
		}
	}
	return -1
}

// blockInPools says whether all of block bi's nodes are in the claim's
// pools (all) or none is (none); neither when its nodes are in several
// pools, and inPools must be asked node by node.
func (s *snapshot) blockInPools(cl *claim, bi int32) (all, none bool) {
	p := s.blockPool[bi]
	if p == mixedPools {
		return false, false
	}
	if p >= 0 && slices.Contains(cl.pools, int(p)) {
		return true, false
	}
	return false, true
}

// inPools reports whether node i is in one of the claim's pools.
func (s *snapshot) inPools(cl *claim, i int) bool {
	p := s.nodes[i].pool
	if p < 0 {
		return false
	}
	for _, pi := range cl.pools {
		if pi == p {
			return true
		}
	}
	return false
}

// bestNodeIn is bestNode restricted to the given nodes.
func (s *snapshot) bestNodeIn(cl *claim, nodes []int) int {
	best, bestKey := -1, int64(1<<62)
	for _, i := range nodes {
		if !s.inPools(cl, i) || !s.fits(cl, i) {
			continue
		}
		key := int64(s.nodes[i].whole)
		if cl.mg != nil {
			_, _, loss := migBest(cl, s.layoutsOf(i))
			key = int64(loss)
		} else if cl.perGPU < resource.PerGPU {
			key = int64(resource.PerGPU)
			for _, f := range s.nodes[i].free {
				if f >= cl.perGPU {
					key = min(key, int64(f))
				}
			}
		}
		if key < bestKey {
			best, bestKey = i, key
		}
	}
	return best
}

// slots is how many replicas of the claim fit in free (one node's GPUs).
func slots(free []int32, perGPU int32, count int) int {
	n := 0
	if perGPU == resource.PerGPU {
		for _, f := range free {
			if f == resource.PerGPU {
				n++
			}
		}
		return n / count
	}
	for _, f := range free {
		n += int(f / perGPU)
	}
	return n
}

// pickBlock chooses the block for a gang without preemption: among blocks
// that hold it, the one left with the fewest free slots (best fit), first
// in fleet order on ties.
//
// Its memo (blockReach) keeps, per block, the most replicas the block's
// free GPUs could hold, CPU, memory and holds aside, until an eviction
// there: blocks below a claim's replicas are skipped, and a claim above
// every block skips the search.
func (s *snapshot) pickBlock(cl *claim) (fleet.BlockID, bool) {
	key, memo := s.blockKeyOf(cl, false)
	known := s.validBlockMemo(key, memo)
	if known.allBelow(s.evictions, cl.w.Replicas) {
		return "", false
	}
	record := s.recordBlockMemo(key, memo, cl.cand.region)
	best, bestLeft := fleet.BlockID(""), int(1<<62)
	for bj, bi := range s.regionBlocks[cl.cand.region] {
		if s.below(known, bj, bi, cl.w.Replicas) {
			s.keep(record, bj, bi, known.per[bj])
			continue
		}
		all, none := s.blockInPools(cl, bi)
		if none {
			s.keep(record, bj, bi, 0)
			continue
		}
		b, nodes := s.blockOrder[bi], s.blockNodes[bi]
		total, room := 0, 0
		for _, i := range nodes {
			if !all && !s.inPools(cl, i) {
				continue
			}
			total += s.replicasNow(cl, i)
			if memo {
				room += gpuSlots(cl, &s.nodes[i])
			}
		}
		s.keep(record, bj, bi, int32(min(room, 1<<30)))
		if total >= cl.w.Replicas && total-cl.w.Replicas < bestLeft {
			best, bestLeft = b, total-cl.w.Replicas
		}
	}
	return best, best != ""
}

// gpuSlots is the replicas of cl (not a MIG claim) node ns's free GPUs
// could hold: replicasNow before the node predicate, CPU and memory.
func gpuSlots(cl *claim, ns *nodeState) int {
	if cl.perGPU == resource.PerGPU {
		return ns.whole / cl.count
	}
	return slots(ns.free, cl.perGPU, cl.count)
}

// noFit says in at why a claim that passed admission could not be placed.
func (s *snapshot) noFit(cl *claim, preempt bool, at *Blocker) {
	*at = Blocker{Code: ReasonNoCapacity, Flavor: cl.cand.model, Region: cl.cand.region, Pools: cl.w.Pools,
		Requested: cl.total, Replicas: cl.w.Replicas, PerReplica: cl.w.GPUs, Preempted: preempt}
	if s.holdsAt != nil {
		at.Planned = s.heldFree(cl)
	}
	if cl.mg != nil {
		at.MIG = migName(cl.w.MIG) // no slice of its profile fits
	}
	if cl.w.Gang() && cl.w.Replicas > 1 {
		at.Code = ReasonNoBlock
		return
	}
	at.Free = s.freeInReach(cl.pools)
	at.Held = s.upcomingHeld(cl)
}

// upcomingHeld sums the free capacity of the upcoming reservations' pools
// of the claim's flavor and region that it may not use (nil when none).
func (s *snapshot) upcomingHeld(cl *claim) *UpcomingHold {
	var h *UpcomingHold
	for _, pi := range s.regionModel[cl.key] {
		k := s.pools[pi].key
		if k.kind != poolReservation || slices.Contains(cl.pools, pi) || k.mig != (cl.mg != nil) {
			continue
		}
		r := &s.in.Reservations[k.id]
		if !r.Upcoming(s.in.Now) {
			continue
		}
		var free resource.MilliGPU
		for _, i := range s.pools[pi].nodes {
			for _, f := range s.nodes[i].free {
				free += resource.MilliGPU(f)
			}
		}
		if free == 0 {
			continue
		}
		if h == nil {
			h = &UpcomingHold{Start: r.Start}
		}
		h.Free += free
		if r.Start.Before(h.Start) {
			h.Start = r.Start
		}
	}
	return h
}

// freeInReach sums the free GPU capacity of the pools' nodes, from the
// pools' running totals (pool.free, kept by adjust).
func (s *snapshot) freeInReach(pools []int) resource.MilliGPU {
	var free resource.MilliGPU
	for _, pi := range pools {
		free += resource.MilliGPU(s.pools[pi].free)
	}
	return free
}
