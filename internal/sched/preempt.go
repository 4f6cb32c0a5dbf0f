package sched

import (
	"fmt"
	"slices"
	"strings"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Preemption picks the cheapest allowed set of victims whose removal lets
// the claimant fit where it will go: the same node for a replica, the same
// block for a gang. Cost, compared in order:
//
//  0. whether any victim is evicted: a set that only gives elastic
//     workloads' growth back (vShrink, elastic.go) is cheaper than any
//     that evicts, so growth goes before anything else is preempted;
//  1. victims that are not reclaimed borrowers (reclaiming borrowed
//     capacity for a claimant within its guarantee, or evicting
//     preemptible work from the claimant's own reservation, costs nothing
//     here);
//  2. the highest priority class among the victims;
//  3. work lost since the victims' last checkpoints, in GPU-seconds;
//  4. the number of victims;
//  5. the growth steps given back (with the steps above them).
//
// A workload is an allowed victim when it is preemptible, of lower priority
// than the claimant, and either of the claimant's tenant or borrowing; or
// when it borrows beyond its tenant's guarantee and the claimant is within
// its own. Non-preemptible work within its tenant's guarantee is never a
// victim, and no tenant's guaranteed share is taken by priority alone (the
// owner would reclaim it at once).

type victim struct {
	run   int
	class int // vReclaim, vReclaimInside, vPriority: cheapest first
}

// vShrink is an elastic workload's growth, given back (elastic.go):
// cheapest of all victims.
const vShrink = -1

// Victim classes.
const (
	vReclaim       = iota // reclaimed borrowed capacity (or one's reservation, or overrun)
	vReclaimInside        // reclaimed from the claimant's own subtree: a sibling the subtree's guarantee covers (tree.go)
	vPriority             // lower priority
)

type cost struct {
	evicts     bool // any victim is evicted (not only growth given back)
	shrinks    int  // growth steps given back (with those above them)
	nonReclaim int
	inside     int // vReclaimInside victims: outsiders' borrowing is reclaimed first
	maxPrio    int
	lost       float64
	n          int
}

func (a cost) less(b cost) bool {
	if a.evicts != b.evicts {
		return !a.evicts
	}
	if a.nonReclaim != b.nonReclaim {
		return a.nonReclaim < b.nonReclaim
	}
	if a.inside != b.inside {
		return a.inside < b.inside
	}
	if a.maxPrio != b.maxPrio {
		return a.maxPrio < b.maxPrio
	}
	if a.lost != b.lost {
		return a.lost < b.lost
	}
	if a.n != b.n {
		return a.n < b.n
	}
	return a.shrinks < b.shrinks
}

// allowed says whether running workload ri may be evicted for the claim.
func (s *snapshot) allowed(cl *claim, ri int) (victim, bool) {
	r := &s.run[ri]
	if r.evicted || r.w == cl.w {
		return victim{}, false
	}
	if r.group > 0 {
		// Growth is given back, before anything is evicted, to any claim
		// of its tenant and, beyond its tenant's guarantee, to any claim.
		if r.tenant == cl.tenant || r.borrows {
			return victim{ri, vShrink}, true
		}
		return victim{}, false
	}
	if r.onRes {
		// Work on its own reservation is a kept promise.
		return victim{}, false
	}
	if cl.onRes >= 0 {
		// Claiming one's own reservation evicts the preemptible work that
		// borrowed its idle capacity.
		if r.preemptible {
			return victim{ri, vReclaim}, true
		}
		return victim{}, false
	}
	if s.reclaims(cl, ri) {
		if s.cover != nil && s.cover[ri] >= 0 {
			return victim{ri, vReclaimInside}, true
		}
		return victim{ri, vReclaim}, true
	}
	if s.in.Options.Planning.PreemptOverrun && s.overrunVictim(cl, ri) {
		return victim{ri, vReclaim}, true // run past its expected runtime: first to go
	}
	// Priority preemption across tenants only takes borrowed capacity:
	// taking another tenant's guaranteed share would let it reclaim the
	// share back at once, and the two would evict each other forever.
	if r.preemptible && r.prio < cl.w.Priority && (r.tenant == cl.tenant || (s.borrowsFrom(ri, cl.tenant) && !s.shield[r.w.Name])) && !s.starvedRun(ri) {
		return victim{ri, vPriority}, true
	}
	return victim{}, false
}

// nodeVictims bounds what allowed can find among a node's running work:
// the lowest priority of its preemptible runs and of its borrowing runs
// (work on its own reservation left out; noVictim when there is none).
// Built once a cycle, before any eviction, from classifyBorrowers'
// marks; evictions only remove victims, so the bounds stay safe.
type nodeVictims struct {
	preemptible, borrows workload.Priority
	growth               bool // an elastic workload's growth runs here
}

const noVictim = workload.Priority(1 << 30)

// mayHaveVictims reports whether allowed could accept some run on node i
// for cl: false lets victim searches skip the node without reading its
// runs. It mirrors allowed's cases, widened.
func (s *snapshot) mayHaveVictims(cl *claim, i int) bool {
	if s.victimBounds == nil {
		s.boundVictims()
	}
	b := s.victimBounds[i]
	switch {
	case b.growth:
		return true
	case cl.onRes >= 0:
		return b.preemptible != noVictim
	case cl.within && b.borrows != noVictim:
		return true
	case s.in.Options.Planning.PreemptOverrun && b.borrows <= cl.w.Priority:
		return true
	}
	return b.preemptible < cl.w.Priority
}

func (s *snapshot) boundVictims() {
	s.victimBounds = make([]nodeVictims, len(s.nodes))
	for n := range s.victimBounds {
		s.victimBounds[n] = nodeVictims{noVictim, noVictim, false}
	}
	for ri := range s.run {
		r := &s.run[ri]
		if r.onRes {
			continue
		}
		for _, n := range r.nodes {
			b := &s.victimBounds[n]
			if r.preemptible {
				b.preemptible = min(b.preemptible, r.prio)
			}
			if r.borrows {
				b.borrows = min(b.borrows, r.prio)
			}
			if r.group > 0 {
				b.growth = true
			}
		}
	}
}

// victimNodes are pool pi's nodes, in pool order, that hold any run
// allowed could accept for some claim (preemptible or borrowing work).
func (s *snapshot) victimNodes(pi int) []int {
	if s.victimBounds == nil {
		s.boundVictims()
	}
	if s.poolVictims == nil {
		s.poolVictims = make([][]int, len(s.pools))
	}
	if vs := s.poolVictims[pi]; vs != nil {
		return vs
	}
	vs := []int{}
	for _, i := range s.pools[pi].nodes {
		if b := s.victimBounds[i]; b.preemptible != noVictim || b.borrows != noVictim {
			vs = append(vs, i)
		}
	}
	s.poolVictims[pi] = vs
	return vs
}

func (s *snapshot) sortVictims(vs []victim) {
	slices.SortFunc(vs, func(x, y victim) int {
		if x.class != y.class {
			return x.class - y.class
		}
		rx, ry := &s.run[x.run], &s.run[y.run]
		if rx.prio != ry.prio {
			return int(rx.prio - ry.prio)
		}
		if lx, ly := s.lost(x.run), s.lost(y.run); lx != ly {
			if lx < ly {
				return -1
			}
			return 1
		}
		if c := strings.Compare(string(rx.w.Name), string(ry.w.Name)); c != 0 {
			return c
		}
		return int(ry.group - rx.group) // an elastic workload's top step first
	})
}

func (s *snapshot) costOf(vs []victim) cost {
	c := cost{maxPrio: -1}
	for _, v := range vs {
		if v.class == vShrink {
			c.shrinks += s.stepsAbove(v.run)
			continue
		}
		c.evicts = true
		c.n++
		switch v.class {
		case vPriority:
			c.nonReclaim++
		case vReclaimInside:
			c.inside++
		}
		c.maxPrio = max(c.maxPrio, int(s.run[v.run].prio))
		c.lost += s.lost(v.run)
	}
	return c
}

// area is the scratch copy of some nodes' free capacity that a victim
// search edits.
type area struct {
	s     *snapshot
	cl    *claim
	local []int32 // node index → position+1 in this area (0: not in it)
	nodes []int
	free  [][]int32
	cpu   []int64
	mem   []int64
	slots []int
	total int
	flat  []int32 // backing store of free
	// layouts are the nodes' MIG layouts, for a MIG claim (nil else).
	layouts [][]uint8
	lflat   []uint8
}

func (s *snapshot) newArea(cl *claim, nodes []int) *area {
	if s.areaLocal == nil {
		s.areaLocal = make([]int32, len(s.nodes))
	}
	for _, i := range s.areaLast {
		s.areaLocal[i] = 0
	}
	s.areaLast = append(s.areaLast[:0], nodes...)
	a := &s.areaBuf
	*a = area{s: s, cl: cl, local: s.areaLocal, nodes: a.nodes[:0], free: a.free[:0], cpu: a.cpu[:0], mem: a.mem[:0], slots: a.slots[:0], flat: a.flat[:0], layouts: a.layouts[:0], lflat: a.lflat[:0]}
	for _, i := range nodes {
		ns := &s.nodes[i]
		a.local[i] = int32(len(a.nodes) + 1)
		a.nodes = append(a.nodes, i)
		start := len(a.flat)
		a.flat = append(a.flat, ns.free...)
		a.free = append(a.free, a.flat[start:len(a.flat):len(a.flat)])
		a.cpu = append(a.cpu, int64(ns.cpu))
		a.mem = append(a.mem, int64(ns.mem))
		n := s.replicasNow(cl, i)
		a.slots = append(a.slots, n)
		a.total += n
	}
	// a.flat may have moved while growing: re-slice every node's view.
	off := 0
	for p, i := range a.nodes {
		n := len(s.nodes[i].free)
		a.free[p] = a.flat[off : off+n : off+n]
		off += n
	}
	if cl.mg != nil {
		// MIG claims use MIG-mode nodes only: each has its layouts.
		for _, i := range a.nodes {
			a.lflat = append(a.lflat, s.layoutsOf(i)...)
		}
		off = 0
		for _, i := range a.nodes {
			n := len(s.layoutsOf(i))
			a.layouts = append(a.layouts, a.lflat[off:off+n:off+n])
			off += n
		}
	}
	return a
}

// apply adds (sign +1) or removes (-1) victim ri's resources on the area's
// nodes and updates the slot count.
func (a *area) apply(ri int, sign int32) {
	w := a.s.run[ri].w
	for _, rep := range a.s.replicas[ri] {
		p := int(a.local[rep.node]) - 1
		if p < 0 {
			continue
		}
		for _, g := range rep.gpus {
			a.free[p][g] += sign * rep.milli
		}
		var layouts []uint8
		if a.cl.mg != nil {
			layouts = a.layouts[p]
			for _, g := range rep.gpus {
				if sign > 0 {
					layouts[g] &^= rep.mask
				} else {
					layouts[g] |= rep.mask
				}
			}
		}
		a.cpu[p] += int64(sign) * int64(w.CPU)
		a.mem[p] += int64(sign) * int64(w.Memory)
		n := a.s.replicasFit(a.cl, rep.node, a.free[p], layouts, a.cpu[p], a.mem[p])
		a.total += n - a.slots[p]
		a.slots[p] = n
	}
}

// choose greedily adds victims (sorted cheapest first) until need replicas
// fit, then gives back every victim that turns out not to be needed, most
// expensive first. It returns nil when even all of them are not enough.
func (a *area) choose(vs []victim, need int) []victim {
	k := 0
	for k < len(vs) && a.total < need {
		a.apply(vs[k].run, +1)
		k++
	}
	if a.total < need {
		return nil
	}
	chosen := append([]victim(nil), vs[:k]...)
	for j := len(chosen) - 1; j >= 0; j-- {
		a.apply(chosen[j].run, -1)
		if a.total >= need {
			chosen = append(chosen[:j], chosen[j+1:]...)
			continue
		}
		a.apply(chosen[j].run, +1)
	}
	return chosen
}

// preemptNode finds the node where one replica fits after the cheapest
// eviction, evicts the victims and returns the node, or -1.
func (s *snapshot) preemptNode(cl *claim) (int, []Preemption) {
	need := cl.perGPU * int32(cl.count)
	record := cl.w.Running == nil && !s.in.Options.noSearchMemo && len(s.journal) == 0
	if record && s.reach == nil {
		s.reach = map[reachKey]reachMemo{}
	}
	best, bestCost := -1, cost{}
	var bestSet []victim
	var vs []victim
	for _, pi := range cl.pools {
		most := int32(-1)
		for _, i := range s.victimNodes(pi) {
			if !s.mayHaveVictims(cl, i) {
				continue
			}
			ns := &s.nodes[i]
			vs = vs[:0]
			var reach int32
			for _, ri := range ns.running {
				if v, ok := s.allowed(cl, ri); ok {
					vs = append(vs, v)
					for _, rep := range s.replicas[ri] {
						if rep.node == i {
							reach += rep.milli * int32(len(rep.gpus))
						}
					}
				}
			}
			if len(vs) == 0 {
				continue
			}
			var free int32
			for _, f := range ns.free {
				free += f
			}
			most = max(most, free+reach)
			if free+reach < need {
				continue
			}
			s.sortVictims(vs)
			a := s.newArea(cl, []int{i})
			chosen := a.choose(vs, 1)
			if chosen == nil {
				continue
			}
			if c := s.costOf(chosen); best < 0 || c.less(bestCost) {
				best, bestCost, bestSet = i, c, chosen
			}
		}
		if k, ok := s.reachKeyOf(cl, pi); ok && record {
			s.reach[k] = reachMemo{evictions: s.evictionsIn(pi), most: most}
		}
	}
	if best < 0 {
		return -1, nil
	}
	return best, s.evictFor(cl, bestSet)
}

// reachKey is what allowed's answers for a claim depend on, besides the
// run: claims that agree on it, in one pool, may evict the same runs. It
// packs the claim's tenant, cover, priority, whether it claims its own
// reservation, is within its guarantee and may evict overrunning work, and
// the pool into one word (a map of words hashes fast); ok is false when a
// field is beyond its bits (no memo then).
type reachKey uint64

func (s *snapshot) reachKeyOf(cl *claim, pi int) (reachKey, bool) {
	const bits16 = 1<<16 - 1
	if cl.tenant > bits16 || int(cl.cover)+1 > bits16 || pi+1 > bits16 || cl.w.Priority < 0 || cl.w.Priority > 15 {
		return 0, false
	}
	k := uint64(cl.tenant) | uint64(cl.cover+1)<<16 | uint64(pi+1)<<32 | uint64(cl.w.Priority)<<48
	if cl.onRes >= 0 {
		k |= 1 << 52
	}
	if cl.within {
		k |= 1 << 53
	}
	if s.in.Options.Planning.PreemptOverrun && s.planSlot(cl.w) {
		k |= 1 << 54
	}
	return reachKey(k), true
}

// reachMemo is, for a reachKey, the most milli one node of the pool could
// offer a replica (its free GPUs plus what allowed victims hold there;
// -1: no node has a victim), with the pool's eviction count it was found
// at. Until the next eviction in the pool it stays an upper bound:
// placements only take free GPUs and add no victims, an eviction
// elsewhere changes nothing here (victims are classified once a cycle,
// evicting one only removes it), and a rolled-back attempt gives back
// only what it took after the memo was recorded at a committed state.
type reachMemo struct {
	evictions int
	most      int32
}

// outOfReach reports whether preemptNode's search for cl is known to
// fail: in each of its pools, no node offers a replica's milli
// (reachMemo).
func (s *snapshot) outOfReach(cl *claim) bool {
	if s.reach == nil || cl.w.Running != nil || s.in.Options.noSearchMemo {
		return false
	}
	need := cl.perGPU * int32(cl.count)
	for _, pi := range cl.pools {
		k, ok := s.reachKeyOf(cl, pi)
		if !ok {
			return false
		}
		m, ok := s.reach[k]
		if !ok || m.evictions != s.evictionsIn(pi) || m.most >= need {
			return false
		}
	}
	return true
}

// preemptBlock finds the block where the gang fits after the cheapest
// eviction, evicts the victims and returns the block.
func (s *snapshot) preemptBlock(cl *claim) (fleet.BlockID, []Preemption, bool) {
	var best fleet.BlockID
	var bestCost cost
	var bestSet []victim
	found := false
	if len(s.runStamp) < len(s.run) {
		s.runStamp = make([]uint32, len(s.run))
	}
	key, memo := s.blockKeyOf(cl, true)
	known := s.validBlockMemo(key, memo)
	record := s.recordBlockMemo(key, memo, cl.cand.region)
	var nodes []int
	var vs []victim
	for bj, bi := range s.regionBlocks[cl.cand.region] {
		if s.below(known, bj, bi, cl.w.Replicas) {
			s.keep(record, bj, bi, known.per[bj])
			continue
		}
		s.keep(record, bj, bi, -1)
		every, none := s.blockInPools(cl, bi)
		if none {
			continue
		}
		b, all := s.blockOrder[bi], s.blockNodes[bi]
		nodes = nodes[:0]
		vs = vs[:0]
		s.stamp++
		for _, i := range all {
			if !every && !s.inPools(cl, i) {
				continue
			}
			nodes = append(nodes, i)
			for _, ri := range s.nodes[i].running {
				if s.runStamp[ri] == s.stamp {
					continue
				}
				s.runStamp[ri] = s.stamp
				if v, ok := s.allowed(cl, ri); ok {
					vs = append(vs, v)
				}
			}
		}
		if len(vs) == 0 || len(nodes) == 0 {
			continue
		}
		if cl.mg == nil {
			n := s.slotBound(cl, nodes, vs)
			s.keep(record, bj, bi, int32(min(n, 1<<30)))
			if n < cl.w.Replicas {
				continue
			}
		}
		a := s.newArea(cl, nodes)
		s.sortVictims(vs)
		chosen := a.choose(vs, cl.w.Replicas)
		if chosen == nil {
			continue
		}
		if c := s.costOf(chosen); !found || c.less(bestCost) {
			best, bestCost, bestSet, found = b, c, append([]victim(nil), chosen...), true
		}
	}
	if !found {
		return "", nil, false
	}
	return best, s.evictFor(cl, bestSet), true
}

// blockKey is what a gang's block searches depend on, for their memos
// (blockReach): the victims it may take (reachKey, pool unused; zero for
// pickBlock's search without preemption), its pools and a replica's GPUs.
type blockKey struct {
	victims reachKey // 0 for pickBlock
	pools   [4]int32
	count   int
	perGPU  int32
	preempt bool
}

// blockKeyOf is cl's blockKey; false when its searches keep no memo (a
// MIG claim, more than four pools, or the memos turned off).
func (s *snapshot) blockKeyOf(cl *claim, preempt bool) (blockKey, bool) {
	k := blockKey{pools: [4]int32{-1, -1, -1, -1}, count: cl.count, perGPU: cl.perGPU, preempt: preempt}
	if cl.mg != nil || len(cl.pools) > len(k.pools) || s.in.Options.noSearchMemo || cl.w.Running != nil {
		return k, false
	}
	for j, pi := range cl.pools {
		k.pools[j] = int32(pi)
	}
	if preempt {
		var ok bool
		if k.victims, ok = s.reachKeyOf(cl, -1); !ok {
			return k, false
		}
	}
	if s.blockReach == nil {
		s.blockReach = map[blockKey]*blockMemo{}
	}
	return k, true
}

// blockMemo is, for a blockKey, an upper bound per block of the region
// (regionBlocks order) on the replicas a search could fit there: with
// preemption, slotBound over the block's allowed victims (-1: none, or
// not in the claim's pools); without, the replicas its free GPUs hold
// (gpuSlots). Like reachMemo, a block's bound holds until an eviction
// there (at: the block's eviction count when it was found); most, their
// maximum, until any eviction.
type blockMemo struct {
	evictions int
	most      int32
	per       []int32
	at        []uint32
}

// keep records the bound of block bj (blockOrder index bi); a nil memo
// records nothing.
func (s *snapshot) keep(m *blockMemo, bj int, bi int32, n int32) {
	if m != nil {
		m.per[bj], m.at[bj] = n, s.blockEvictions[bi]
		m.most = max(m.most, n)
	}
}

// below reports whether m bounds block bj (blockOrder index bi) below
// replicas.
func (s *snapshot) below(m *blockMemo, bj int, bi int32, replicas int) bool {
	return m != nil && m.at[bj] == s.blockEvictions[bi] && int(m.per[bj]) < replicas
}

// validBlockMemo is key's memo, if any (nil otherwise).
func (s *snapshot) validBlockMemo(key blockKey, memo bool) *blockMemo {
	if !memo {
		return nil
	}
	return s.blockReach[key]
}

// evictedOn counts an eviction that gave capacity back on node i.
func (s *snapshot) evictedOn(i int) {
	if s.blockEvictions == nil {
		s.blockEvictions = make([]uint32, len(s.blockOrder))
		s.poolEvictions = make([]int, len(s.pools))
	}
	s.blockEvictions[s.nodeBlock[i]]++
	if p := s.nodes[i].pool; p >= 0 {
		s.poolEvictions[p]++
	}
}

// evictionsIn is pool pi's eviction count.
func (s *snapshot) evictionsIn(pi int) int {
	if s.poolEvictions == nil {
		return 0
	}
	return s.poolEvictions[pi]
}

// recordBlockMemo is a fresh memo for key to record a search into, stored
// in place of the old one; nil while the snapshot holds tentative changes
// (a rollback could give back capacity after it was recorded).
func (s *snapshot) recordBlockMemo(key blockKey, memo bool, region string) *blockMemo {
	if !memo || len(s.journal) > 0 {
		return nil
	}
	n := len(s.regionBlocks[region])
	m := s.blockReach[key]
	if m == nil || len(m.per) != n {
		m = &blockMemo{per: make([]int32, n), at: make([]uint32, n)}
		s.blockReach[key] = m
	}
	if s.blockEvictions == nil {
		s.blockEvictions = make([]uint32, len(s.blockOrder))
		s.poolEvictions = make([]int, len(s.pools))
	}
	// A memo still valid is read while the new one is written: block by
	// block, the new bound is written after the old is read.
	m.evictions, m.most = s.evictions, -1
	return m
}

// blockOutOfReach reports whether cl's block search (with preemption or
// without) is known to find no block that could hold its replicas.
func (s *snapshot) blockOutOfReach(cl *claim, preempt bool) bool {
	k, ok := s.blockKeyOf(cl, preempt)
	if !ok {
		return false
	}
	return s.validBlockMemo(k, true).allBelow(s.evictions, cl.w.Replicas)
}

// allBelow reports whether m, recorded at the snapshot's eviction count
// evictions, bounds every block below replicas (false for a nil memo).
func (m *blockMemo) allBelow(evictions, replicas int) bool {
	return m != nil && m.evictions == evictions && int(m.most) < replicas
}

// slotBound is an upper bound on the replicas of cl (not a MIG claim)
// that the block's nodes could hold once all of vs were evicted: per node,
// its free milli plus what the victims hold there, over a replica's milli.
// A replica needs its GPUs on one node, so no node holds more.
func (s *snapshot) slotBound(cl *claim, nodes []int, vs []victim) int {
	if s.boundPos == nil {
		s.boundPos = make([]int32, len(s.nodes))
	}
	acc := s.boundAcc[:0]
	for p, i := range nodes {
		s.boundPos[i] = int32(p + 1)
		var f int32
		for _, x := range s.nodes[i].free {
			f += x
		}
		acc = append(acc, f)
	}
	for _, v := range vs {
		for _, rep := range s.replicas[v.run] {
			if p := s.boundPos[rep.node]; p > 0 {
				acc[p-1] += rep.milli * int32(len(rep.gpus))
			}
		}
	}
	need := cl.perGPU * int32(cl.count)
	n := 0
	for p, i := range nodes {
		n += int(acc[p] / need)
		s.boundPos[i] = 0
	}
	s.boundAcc = acc
	return n
}

// evictFor evicts the chosen victims (journaled) and describes them.
func (s *snapshot) evictFor(cl *claim, vs []victim) []Preemption {
	out := make([]Preemption, 0, len(vs))
	for _, v := range vs {
		r := &s.run[v.run]
		if r.evicted {
			continue // given back with a step below it
		}
		var why string
		if v.class == vShrink {
			s.noteShrink(v.run, shrinkNote{by: cl.w.Name, why: fmt.Sprintf("gives growth back to %s (tenant %s, %s): elastic work shrinks before anything else is preempted", cl.w.Name, s.tree.Tenants[cl.tenant].Name, cl.w.Priority)})
			s.claimShrunk = true
			s.evict(v.run)
			continue
		}
		switch {
		case cl.onRes >= 0:
			why = fmt.Sprintf("reservation %s claimed by its owner %s", s.in.Reservations[cl.onRes].Name, s.tree.Tenants[cl.tenant].Name)
		case v.class == vReclaim && s.overrunVictim(cl, v.run):
			why = "ran past its expected runtime; a planned start needs its GPUs"
			if r.tenant != cl.tenant {
				// As a priority victim: it must not end the cycle within
				// its guarantee, or it would reclaim its place back.
				s.claimPrio = append(s.claimPrio, v.run)
			}
		case v.class != vPriority && cl.cover >= 0 && int(cl.cover) != cl.tenant:
			why = fmt.Sprintf("tenant %s reclaims the guarantee of %s in %s that %s holds for its subtree, from borrower %s", s.tree.Tenants[cl.tenant].Name, cl.cand.model, cl.cand.region, s.tree.Tenants[cl.cover].Name, s.tree.Tenants[r.tenant].Name)
		case v.class != vPriority:
			why = fmt.Sprintf("tenant %s reclaims its guarantee of %s in %s from borrower %s", s.tree.Tenants[cl.tenant].Name, cl.cand.model, cl.cand.region, s.tree.Tenants[r.tenant].Name)
		default:
			why = fmt.Sprintf("preempted by higher priority %s workload", cl.w.Priority)
			if r.tenant != cl.tenant {
				s.claimPrio = append(s.claimPrio, v.run)
			}
		}
		out = append(out, Preemption{
			Workload:    r.w.Name,
			By:          cl.w.Name,
			Reason:      why,
			Notice:      r.w.Priority == 0,
			GracePeriod: r.w.GracePeriod.Seconds(),
			WorkLost:    s.lost(v.run),
		})
		s.evict(v.run)
	}
	return out
}
