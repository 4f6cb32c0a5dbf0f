package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/spot"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Elastic workloads (workload.Elastic) run between Min and Max replicas.
// A pending one is placed as a workload of Min replicas. Its growth beyond
// Min is borrowing:
//
//   - In the snapshot, a running elastic workload's first Min replicas are
//     its run (group 0) and each further Step of replicas, highest last, a
//     growth run of its own (group 1, 2, ...; splitGrowth). Growth counts
//     toward quota usage, but not toward the limits and guarantees pending
//     work is admitted against (extUsage): growth never keeps the tenant's
//     own pending work out. Growth is classified after all of its tenant's
//     other work (classifyGrowth): what the tenant's guarantee still covers
//     is protected from other tenants' claims as work within a guarantee
//     is; the rest borrows. No ancestor's guarantee covers growth.
//   - The tenant's own claims may take any of its growth back, and any
//     claim the growth that borrows (victim class vShrink, cheapest of
//     all): a victim set that only shrinks is cheaper than any that evicts,
//     so the core shrinks elastic workloads, down to Min, before it
//     preempts anything else. Giving a step back gives back every step
//     above it too (replicas stay numbered 0..n-1). A claim that would put
//     a tenant over its limit only because of growth gives that growth back
//     (shrinkToLimit). Growth on a failed node is given back, not the
//     workload evicted.
//   - After every pass over pending work, running elastic workloads grow
//     into what is still idle (grow), one step each in turn, by priority
//     then name: never into reservations, never past a limit, and like any
//     borrower never into others' unlent idle guarantee (lendingOK). Growth
//     needs preemption to be on (it could not be taken back otherwise).
//
// The plan says both as Resizes (one per workload, From → To).

// shrinkNote is why a growth run was given back.
type shrinkNote struct {
	by  workload.ID
	why string
}

// splitGrowth splits each running elastic workload's growth off its run
// (see above) and reports whether it split any. Runs are appended after
// those the base holds (base runs and snapshot runs stay one to one in
// their first len(base.runs)).
func (s *snapshot) splitGrowth() bool {
	nbase := len(s.run)
	split := false
	for i := 0; i < nbase; i++ {
		r := &s.run[i]
		w := r.w
		if w.Elastic == nil || r.onRes {
			continue
		}
		if !s.in.Options.DisablePreemption && len(s.replicas[i]) < w.MaxReplicas() {
			s.growable = append(s.growable, i)
		}
		lo, step := w.MinReplicas(), w.ReplicaStep()
		reps := s.replicas[i]
		if lo < 1 || len(reps) <= lo {
			continue
		}
		if !split {
			split = true
			s.exts = map[int][]int{}
			s.extUsage = tenancy.NewLedger(s.tree)
		}
		s.replicas[i] = reps[:lo:lo]
		s.run[i].nodes = distinctNodes(reps[:lo])
		s.run[i].total = w.GPUs.Mul(lo)
		for g, at := int32(1), lo; at < len(reps); g, at = g+1, at+step {
			part := reps[at:min(at+step, len(reps)):min(at+step, len(reps))]
			base := &s.run[i]
			x := runState{w: w, tenant: base.tenant, key: base.key, entries: base.entries, entry: base.entry,
				prio: base.prio, preemptible: true, borrows: true, workLost: 0, nodes: distinctNodes(part),
				total: w.GPUs.Mul(len(part)), group: g, parent: int32(i)}
			s.exts[i] = append(s.exts[i], len(s.run))
			s.run = append(s.run, x)
			s.replicas = append(s.replicas, part)
			s.extUsage.Add(x.entries, x.total)
		}
	}
	if split {
		s.buf.run, s.buf.replicas = s.run, s.replicas
	}
	return split
}

func distinctNodes(reps []replicaAt) []int {
	out := make([]int, 0, len(reps))
	for _, r := range reps {
		if !containsInt(out, r.node) {
			out = append(out, r.node)
		}
	}
	return out
}

// classifyGrowth marks the growth runs that their tenant's guarantee
// still covers after all its other work there: a tenant's growth on one
// quota entry is taken by priority, then name, then step, on top of its
// other runs; what stays within the guarantee is not borrowing (other
// tenants' claims may not take it; the tenant's own may). Called after
// classifyBorrowers.
func (s *snapshot) classifyGrowth() {
	if s.exts == nil {
		return
	}
	type key struct{ tenant, entry int }
	used := map[key]resource.MilliGPU{}
	var growth []int
	for i := range s.run {
		r := &s.run[i]
		if r.onRes || r.entry < 0 {
			continue
		}
		if r.group > 0 {
			growth = append(growth, i)
			continue
		}
		used[key{r.tenant, r.entry}] = used[key{r.tenant, r.entry}].Add(r.total)
	}
	slices.SortFunc(growth, func(a, b int) int {
		ra, rb := &s.run[a], &s.run[b]
		if ra.tenant != rb.tenant {
			return ra.tenant - rb.tenant
		}
		if ra.entry != rb.entry {
			return ra.entry - rb.entry
		}
		if ra.prio != rb.prio {
			return int(rb.prio - ra.prio)
		}
		if c := strings.Compare(string(ra.w.Name), string(rb.w.Name)); c != 0 {
			return c
		}
		return int(ra.group - rb.group)
	})
	for _, i := range growth {
		r := &s.run[i]
		k := key{r.tenant, r.entry}
		used[k] = used[k].Add(r.total)
		r.borrows = used[k] > s.tree.Tenants[r.tenant].Quotas[r.entry].Guaranteed
	}
}

// evictGrowth gives back the growth runs of the workload of run i above
// group g (all of them for its base run, g 0), with why.
func (s *snapshot) evictGrowth(i int, note shrinkNote) {
	r := &s.run[i]
	base := i
	if r.group > 0 {
		base = int(r.parent)
	}
	for _, e := range s.exts[base] {
		if x := &s.run[e]; x.group > r.group && !x.evicted {
			s.noteShrink(e, note)
			s.evict(e)
		}
	}
}

// stepsAbove is how many growth steps giving back growth run e gives
// back: it and the live ones above it.
func (s *snapshot) stepsAbove(e int) int {
	r := &s.run[e]
	n := 0
	for _, x := range s.exts[int(r.parent)] {
		if xr := &s.run[x]; xr.group >= r.group && !xr.evicted {
			n++
		}
	}
	return n
}

func (s *snapshot) noteShrink(run int, note shrinkNote) {
	if s.shrinks == nil {
		s.shrinks = map[int]shrinkNote{}
	}
	s.shrinks[run] = note
}

// extAt is the growth charged to quota entry ref.
func (s *snapshot) extAt(ref tenancy.Ref) resource.MilliGPU {
	if s.extUsage == nil {
		return 0
	}
	return s.extUsage.At(ref)
}

// shrinkToLimit gives back growth charged to the claim's entries while the
// placed claim has put one over its limit (admit let it in leaving growth
// out): pending work is never kept out by growth.
func (s *snapshot) shrinkToLimit(cl *claim) {
	for _, ref := range cl.entries {
		q := s.tree.Tenants[ref.Tenant].Quotas[ref.Entry]
		for s.usage.At(ref).Add(s.reserved.At(ref)) > q.Limit {
			best := -1
			for _, exts := range s.extsInOrder() {
				for _, e := range exts {
					x := &s.run[e]
					if x.evicted || !slices.Contains(x.entries, ref) {
						continue
					}
					if best < 0 || s.shrinkFirst(e, best) {
						best = e
					}
				}
			}
			if best < 0 {
				break
			}
			s.noteShrink(best, shrinkNote{by: cl.w.Name, why: fmt.Sprintf("tenant %s is at its limit of %v %s in %s and %s needs room within it",
				s.tree.Tenants[ref.Tenant].Name, q.Limit, cl.cand.model, cl.cand.region, cl.w.Name)})
			s.evict(best)
		}
	}
}

// shrinkFirst reports whether growth run a goes before b: lower priority,
// then name, then the higher step.
func (s *snapshot) shrinkFirst(a, b int) bool {
	ra, rb := &s.run[a], &s.run[b]
	if ra.prio != rb.prio {
		return ra.prio < rb.prio
	}
	if c := strings.Compare(string(ra.w.Name), string(rb.w.Name)); c != 0 {
		return c < 0
	}
	return ra.group > rb.group
}

// extsInOrder is s.exts by base run (a fixed order).
func (s *snapshot) extsInOrder() [][]int {
	keys := make([]int, 0, len(s.exts))
	for k := range s.exts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([][]int, len(keys))
	for i, k := range keys {
		out[i] = s.exts[k]
	}
	return out
}

// grow grows the running elastic workloads into idle capacity (see
// above), after all pending work was decided, and records the plan's
// Resizes and Capped.
func (s *snapshot) grow(plan *Plan) {
	if len(s.growable) == 0 && len(s.shrinks) == 0 {
		return
	}
	type state struct {
		run  int
		size int // replicas now
		from int // at the start of the cycle
		add  []Placement
		why  string
		done bool
	}
	var ws []*state
	for _, i := range s.growable {
		r := &s.run[i]
		if r.evicted {
			continue
		}
		st := &state{run: i, from: len(r.w.Running.Replicas)}
		st.size = st.from
		for _, e := range s.exts[i] {
			if s.run[e].evicted {
				st.size -= len(s.replicas[e])
			}
		}
		if st.size < st.from {
			st.done, st.why = true, "gave growth back this cycle"
		}
		ws = append(ws, st)
	}
	slices.SortStableFunc(ws, func(a, b *state) int {
		ra, rb := &s.run[a.run], &s.run[b.run]
		if ra.prio != rb.prio {
			return cmp.Compare(rb.prio, ra.prio)
		}
		return strings.Compare(string(ra.w.Name), string(rb.w.Name))
	})
	for more := true; more; {
		more = false
		for _, st := range ws {
			if st.done {
				continue
			}
			w := s.run[st.run].w
			step := min(w.ReplicaStep(), w.MaxReplicas()-st.size)
			if step <= 0 {
				st.done, st.why = true, ""
				continue
			}
			ps, why := s.growStep(st.run, st.size, step)
			if ps == nil {
				st.done, st.why = true, why
				continue
			}
			st.add = append(st.add, ps...)
			st.size += step
			more = true
		}
	}
	for _, st := range ws {
		w := s.run[st.run].w
		if len(st.add) > 0 {
			plan.Resizes = append(plan.Resizes, Resize{Workload: w.Name, From: st.from, To: st.size, Add: st.add,
				Reason: fmt.Sprintf("grows into idle %s in %s (elastic %d–%d)", s.run[st.run].key.Model, s.run[st.run].key.Region, w.MinReplicas(), w.MaxReplicas())})
		}
		if st.size < w.MaxReplicas() && st.why != "" {
			plan.Capped = append(plan.Capped, Capped{Workload: w.Name, Replicas: st.size, Min: w.MinReplicas(), Max: w.MaxReplicas(), Reason: st.why})
		}
	}
	s.recordShrinks(plan)
}

// recordShrinks adds a Resize for every workload that gave growth back and
// still runs, in run order.
func (s *snapshot) recordShrinks(plan *Plan) {
	for _, exts := range s.extsInOrder() {
		base := &s.run[s.run[exts[0]].parent]
		if base.evicted {
			continue // its Preemption says it
		}
		to := len(base.w.Running.Replicas)
		var note shrinkNote
		for _, e := range exts {
			if s.run[e].evicted {
				to -= len(s.replicas[e])
				if note.why == "" {
					note = s.shrinks[e]
				}
			}
		}
		if to < len(base.w.Running.Replicas) {
			plan.Resizes = append(plan.Resizes, Resize{Workload: base.w.Name, From: len(base.w.Running.Replicas), To: to, By: note.by, Reason: note.why})
		}
	}
}

// growStep places step more replicas of run i's workload (replicas size,
// size+1, ...) into idle capacity where it runs, or says why not.
func (s *snapshot) growStep(i, size, step int) ([]Placement, string) {
	r := &s.run[i]
	w := r.w
	c := candidate{r.key.Model, r.key.Region}
	if spot.Bound(w) {
		for _, p := range s.in.SpotPrices {
			if p.Model == c.model && p.Region == c.region && spot.AdmitBound(p.PerGPUHour, p.Firm) > w.MaxPrice {
				return nil, fmt.Sprintf("the spot price of %s in %s ($%.2f/GPU-h) is above its max price", c.model, c.region, p.PerGPUHour)
			}
		}
	}
	cl := &s.claimBuf
	pbuf := cl.pools
	initClaim(cl, w, r.tenant, c)
	cl.total = w.GPUs.Mul(step)
	cl.entries = r.entries
	cl.borrow = cl.total
	for _, ref := range cl.entries {
		q := s.tree.Tenants[ref.Tenant].Quotas[ref.Entry]
		if used := s.usage.At(ref).Add(s.reserved.At(ref)); used.Add(cl.total) > q.Limit {
			return nil, fmt.Sprintf("tenant %s would pass its limit of %v %s (%v used)", s.tree.Tenants[ref.Tenant].Name, q.Limit, c.model, used)
		}
	}
	pools := s.eligiblePoolsInto(pbuf[:0], cl, s.regionModel[cl.key])
	cl.pools = pools[:0]
	for _, pi := range pools { // filtered in place: never into reservations
		if s.pools[pi].key.kind != poolReservation {
			cl.pools = append(cl.pools, pi)
		}
	}
	mark := s.mark()
	freeBefore, protectedBefore := s.free[cl.key], s.protectedFor(cl.key, cl.tenant)
	placed := make([]Placement, 0, step)
	var block []int
	if w.Gang() && len(s.replicas[i]) > 0 {
		block = s.blocks[s.nodes[s.replicas[i][0].node].node.Block]
	}
	for k := 0; k < step; k++ {
		var n int
		if block != nil {
			n = s.bestNodeIn(cl, block)
		} else {
			n = s.bestNode(cl)
		}
		if n < 0 {
			s.rollback(mark)
			if block != nil {
				return nil, fmt.Sprintf("no idle room for %d more × %v in its block", step, w.GPUs)
			}
			return nil, fmt.Sprintf("no idle room for %d more × %v %s in %s", step, w.GPUs, c.model, c.region)
		}
		p := s.assign(cl, size+k, n)
		placed = append(placed, p)
	}
	s.chargeJ(cl.entries, cl.total)
	if _, ok := s.lendingOK(cl, freeBefore, protectedBefore); !ok {
		s.rollback(mark)
		return nil, fmt.Sprintf("the idle %s in %s is others' guarantee, which they do not lend", c.model, c.region)
	}
	s.commit()
	return placed, ""
}
