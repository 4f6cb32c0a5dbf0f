package sched

import (
	"cmp"
	"slices"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// Guarantees above the leaves. A tenant's guarantee for a key is for its
// whole subtree: its members' use counts against it (tenancy.Charged),
// and what its children's own guarantees leave is theirs to share.
//
//   - A run beyond its own tenant's guarantee (borrows) is covered by
//     the lowest ancestor whose guarantee still has room for it after the
//     subtree's covered work, taken in coverOrder (placed within a
//     guarantee first, then priority, then oldest). Its cover is that
//     ancestor, or none when no level covers it. Placed-within first
//     keeps a claim covered that later placements of the same cycle at a
//     higher priority would otherwise push out (and an outsider would
//     then evict back what the claim took from it).
//   - A claim is within when it fits its own tenant's guarantee or, else,
//     the lowest ancestor's (usage of the subtree plus the claim at most
//     the ancestor's guarantee); that tenant is the claim's cover.
//   - A claim within reclaims a run of another tenant when the run is
//     beyond its own tenant's guarantee, its cover (if any) is an ancestor
//     of the claimant too (the run uses guarantee the claimant's side
//     shares or is owed), and the claim's cover is not an ancestor of the
//     run's tenant (they do not share the guarantee the claim fits in).
//     With guarantees on leaves only this is the rule of old: within
//     claims reclaim borrowers. With a parent's guarantee, idle guarantee
//     of a subtree goes to its own members first: siblings borrowing it are
//     covered by the parent, so outsiders cannot reclaim it from them,
//     while a member whose own share it is can.
//   - Priority preemption across tenants takes only what the victim
//     borrows from the claimant's side in the same sense (borrowsFrom).
//
// The mode is on only when some tenant with children guarantees capacity
// (s.cover is then set); otherwise the leaf rules run unchanged.

// hierarchical reports whether some tenant with children guarantees
// capacity.
func hierarchical(t *tenancy.Tree) bool {
	for _, ten := range t.Tenants {
		if ten.Leaf {
			continue
		}
		for _, q := range ten.Quotas {
			if q.Guaranteed > 0 {
				return true
			}
		}
	}
	return false
}

// guaranteeEntry returns tenant a's entry for key k and whether it
// guarantees anything.
func (s *snapshot) guaranteeEntry(a int, k tenancy.Key) (tenancy.Quota, int, bool) {
	q, e, ok := s.tree.Entry(a, k.Model, k.Region)
	return q, e, ok && q.Guaranteed > 0
}

// classifyCover finds each borrowing run's cover (see above); called after
// classifyBorrowers.
func (s *snapshot) classifyCover() {
	s.cover = nil
	if !hierarchical(s.tree) {
		return
	}
	tenants := s.tree.Tenants
	cover := make([]int32, len(s.run))
	base := make([]int, len(tenants)+1)
	for t := range tenants {
		base[t+1] = base[t] + len(tenants[t].Quotas)
	}
	covered := make([]resource.MilliGPU, base[len(tenants)])
	groups := map[int][]int{} // group base[a]+e → candidate runs, in run order
	// addCovered counts a covered run on every guaranteeing entry above a.
	addCovered := func(ri, a int) {
		k := s.run[ri].key
		for p := tenants[a].Parent; p >= 0; p = tenants[p].Parent {
			if _, e, ok := s.guaranteeEntry(p, k); ok {
				covered[base[p]+e] = covered[base[p]+e].Add(s.run[ri].total)
			}
		}
	}
	for i := range s.run {
		r := &s.run[i]
		cover[i] = -1
		if r.onRes || r.group > 0 {
			continue // growth is covered by no guarantee
		}
		if !r.borrows {
			cover[i] = int32(r.tenant)
			addCovered(i, r.tenant)
			continue
		}
		for p := tenants[r.tenant].Parent; p >= 0; p = tenants[p].Parent {
			if _, e, ok := s.guaranteeEntry(p, r.key); ok {
				groups[base[p]+e] = append(groups[base[p]+e], i)
			}
		}
	}
	s.cover = cover
	if len(groups) == 0 {
		return
	}
	// Deepest ancestors first: what a subtree covers is known before its
	// ancestors share out theirs. Ties by group, for a fixed order.
	owner := func(g int) int { // the tenant of group g
		t, _ := slices.BinarySearch(base, g+1)
		return t - 1
	}
	order := make([]int, 0, len(groups))
	for g := range groups {
		order = append(order, g)
	}
	slices.SortFunc(order, func(a, b int) int {
		if da, db := tenants[owner(a)].Depth, tenants[owner(b)].Depth; da != db {
			return db - da
		}
		return a - b
	})
	for _, g := range order {
		a := owner(g)
		q := tenants[a].Quotas[g-base[a]]
		avail := q.Guaranteed.Sub(covered[g])
		if avail <= 0 {
			continue
		}
		keys := s.sortedGroup(groups[g], func(i int) bool { return cover[i] >= 0 }, coverOrder) // covered lower down
		var cum resource.MilliGPU
		for _, k := range keys {
			cum = cum.Add(s.run[k.run].total)
			if cum > avail {
				break
			}
			cover[k.run] = int32(a)
			addCovered(k.run, a)
		}
	}
}

// claimCover sets cl.within and cl.cover for a claim beyond its own
// tenant's guarantee: within at the lowest ancestor whose guarantee has
// room for it.
func (s *snapshot) claimCover(cl *claim) {
	if s.cover == nil {
		return
	}
	for p := s.tree.Tenants[cl.tenant].Parent; p >= 0; p = s.tree.Tenants[p].Parent {
		if q, e, ok := s.guaranteeEntry(p, cl.key); ok && s.usage[p][e].Add(cl.total).Add(s.heldFor(p, cl)) <= q.Guaranteed {
			cl.within, cl.cover, cl.borrow = true, int32(p), 0
			return
		}
	}
}

// heldFor is the part of p's guarantee its members off the claimant's
// path keep for their own pending work: per member with a guarantee of
// its own, its idle guarantee up to what it has pending there. Without
// it a claim would be covered by a sibling's idle share that the sibling
// takes back later in the cycle, and the claim would be a borrower the
// next cycle (evicted back by whom it evicted).
func (s *snapshot) heldFor(p int, cl *claim) resource.MilliGPU {
	if s.demand == nil {
		s.pendingDemand()
	}
	var held resource.MilliGPU
	for d, ten := range s.tree.Tenants {
		if d == p || !s.tree.InSubtree(d, p) || s.tree.InSubtree(cl.tenant, d) {
			continue
		}
		for j, q := range ten.Quotas {
			if want := s.demand[d][j]; want > 0 && q.Key == cl.key && q.Guaranteed > 0 {
				held = held.Add(min(want, q.Guaranteed.Sub(s.usage[d][j])))
			}
		}
	}
	return held
}

// pendingDemand sums, per quota entry with a guarantee, the GPUs its
// tenant's pending workloads ask for there (each candidate counted): those
// the cycle decides (snapshot.decided), not those it defers
// (Options.TenantBound).
func (s *snapshot) pendingDemand() {
	s.demand = tenancy.NewLedger(s.tree)
	for _, w := range s.decided {
		t, ok := s.tree.Lookup(w.Tenant)
		if !ok {
			continue
		}
		for _, c := range candidates(w) {
			if q, j, ok := s.tree.Entry(t, c.model, c.region); ok && q.Guaranteed > 0 {
				s.demand[t][j] = s.demand[t][j].Add(w.TotalGPUs())
			}
		}
	}
}

// borrowsFrom reports whether run ri uses capacity beyond what its side
// of the tree is guaranteed, as seen from tenant t: it is beyond its own
// tenant's guarantee, and no guarantee covers it that t does not share.
func (s *snapshot) borrowsFrom(ri, t int) bool {
	if !s.run[ri].borrows {
		return false
	}
	if s.cover == nil {
		return true
	}
	c := s.cover[ri]
	return c < 0 || s.tree.InSubtree(t, int(c))
}

// reclaims reports whether claim cl may reclaim run ri's capacity (see
// above).
func (s *snapshot) reclaims(cl *claim, ri int) bool {
	r := &s.run[ri]
	if !cl.within || !r.borrows || r.tenant == cl.tenant {
		return false
	}
	if s.cover == nil {
		return true
	}
	return s.borrowsFrom(ri, cl.tenant) && (cl.cover < 0 || !s.tree.InSubtree(r.tenant, int(cl.cover)))
}

// protectedTree is protected for trees with guarantees above the leaves:
// a subtree protects the larger of its own unlent idle guarantee and what
// its children protect, and the claimant's own path protects nothing from
// it (those guarantees are for it too).
func (s *snapshot) protectedTree(k tenancy.Key, except int) resource.MilliGPU {
	tenants := s.tree.Tenants
	prot := make([]resource.MilliGPU, len(tenants))
	mine := make([]bool, len(tenants))
	for p := except; p >= 0; p = tenants[p].Parent {
		mine[p] = true
	}
	var total resource.MilliGPU
	for i := len(tenants) - 1; i >= 0; i-- { // children after parents: bottom up
		if !mine[i] {
			for j, q := range tenants[i].Quotas {
				if q.Key == k && q.Guaranteed > 0 {
					idle := q.Guaranteed.Sub(s.usage[i][j])
					prot[i] = max(prot[i], min(idle, q.Guaranteed.Sub(q.Lendable)))
				}
			}
		}
		if p := tenants[i].Parent; p >= 0 {
			prot[p] = prot[p].Add(prot[i]) // children's sum first; max below
		} else {
			total = total.Add(prot[i])
		}
	}
	return total
}

// Ordering along the tree. When some tenant above the leaves has an entry
// that orders (a guarantee, a priority or a weight of its own), tenants
// are ordered level by level from the root, as Slurm's fair tree does:
// first by their top-level ancestors' entries (priority, then usage over
// guarantee × weight, then current usage with fair share), then by the
// next level's, down to their own. Levels whose entry only limits are
// skipped; without ordering entries above the leaves a tenant is ordered
// by its own entry alone, as before.

// orderedAbove reports whether some tenant with children has an entry
// that orders.
func orderedAbove(t *tenancy.Tree) bool {
	for _, ten := range t.Tenants {
		if ten.Leaf {
			continue
		}
		for _, q := range ten.Quotas {
			if orders(q) {
				return true
			}
		}
	}
	return false
}

// orders reports whether an entry orders its subtree.
func orders(q tenancy.Quota) bool { return q.Guaranteed > 0 || q.Priority != 0 || q.Weight != 1 }

// levelKey is what a pending workload is ranked by: its tenant and first
// candidate.
type levelKey struct {
	tenant int
	model  string
	region string
}

// level is one level's place in the order.
type level struct {
	prio       int
	share, now float64
}

// levelOrder ranks the (tenant, first candidate) pairs of one cycle's
// pending work.
type levelOrder struct {
	s    *snapshot
	ids  map[levelKey]int
	vecs [][]level
}

// id returns the pair's index, computing its levels the first time.
func (o *levelOrder) id(t int, m fleet.ModelID, region string) int {
	k := levelKey{t, string(m), region}
	if id, ok := o.ids[k]; ok {
		return id
	}
	s := o.s
	path := s.tree.Path(t)
	var vec []level
	for i := len(path) - 1; i >= 0; i-- {
		a := path[i]
		q, e, ok := s.tree.Entry(a, m, region)
		if !ok || (a != t && !orders(q)) {
			continue
		}
		l := level{prio: q.Priority, share: tenancy.OrderShare(float64(s.usage[a][e]), q)}
		if s.decayed != nil {
			l.share, l.now = tenancy.OrderShare(s.decayed[a][e], q), l.share
		}
		vec = append(vec, l)
	}
	id := len(o.vecs)
	o.ids[k] = id
	o.vecs = append(o.vecs, vec)
	return id
}

// ranks returns each pair's rank (equal levels, equal ranks).
func (o *levelOrder) ranks() []int {
	idx := make([]int, len(o.vecs))
	for i := range idx {
		idx[i] = i
	}
	cmpVec := func(a, b []level) int {
		for i := 0; i < len(a) && i < len(b); i++ {
			x, y := a[i], b[i]
			if c := cmp.Or(cmp.Compare(y.prio, x.prio), cmp.Compare(x.share, y.share), cmp.Compare(x.now, y.now)); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(a), len(b))
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpVec(o.vecs[a], o.vecs[b]) })
	rank := make([]int, len(o.vecs))
	for r, i := range idx {
		if r > 0 && cmpVec(o.vecs[idx[r-1]], o.vecs[i]) == 0 {
			rank[i] = rank[idx[r-1]]
		} else {
			rank[i] = r
		}
	}
	return rank
}

// coverOrder is the order of an ancestor's candidates: work placed within
// a guarantee first (see classifyCover), then borrowOrder's.
func coverOrder(nanos bool) func(a, b borrowKey) int {
	by := borrowOrder(nanos)
	return func(a, b borrowKey) int {
		if a.within != b.within {
			if a.within {
				return -1
			}
			return 1
		}
		return by(a, b)
	}
}
