package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// replicaAt is one replica of a running workload, resolved to a node index.
type replicaAt struct {
	node  int
	gpus  []int
	milli int32
	mask  uint8 // its MIG instance's slices on gpus[0], 0 when none
}

// newSnapshot builds the cycle's working state. Problems with running
// workloads (unknown node, GPU index out of range, GPUs over-committed) are
// returned as conflicts; the snapshot still holds everything else.
func newSnapshot(in *Input) (*snapshot, []string) {
	f := in.Fleet
	s := &snapshot{
		in:       in,
		tree:     in.Tenants,
		free:     map[tenancy.Key]resource.MilliGPU{},
		refCache: make([][]refEntry, len(in.Tenants.Tenants)),
		buf:      scratchFor(in),
	}
	var conflicts []string
	sk := in.Cache.skeleton(in)
	s.instantiate(sk)
	var err error
	if s.scorer, err = newScorer(in, nil); err != nil {
		conflicts = append(conflicts, err.Error())
	}
	for i := range in.Reservations {
		s.upcoming = s.upcoming || in.Reservations[i].Upcoming(in.Now)
	}
	s.setThresholds()
	s.usage = tenancy.NewLedger(s.tree)
	s.reserved = tenancy.NewLedger(s.tree)
	s.tree.ChargeReservations(s.reserved, in.Reservations, f.Catalog, in.Now)
	// Running workloads take their GPUs and count against quota.
	conflicts = append(conflicts, s.holdRunning(sk)...)
	n := len(s.buf.cur().nodeIdx)
	if s.splitGrowth() {
		n = 0
		for i := range s.run {
			n += len(s.run[i].nodes)
		}
	}
	s.indexRunning(n)
	// Index the pools now that running work holds its GPUs.
	for _, p := range s.pools {
		p.buckets = make([][]uint64, p.maxGPUs+1)
		p.low = make([]int, p.maxGPUs+1)
		for k := range p.buckets {
			p.buckets[k] = newBitset(len(p.nodes))
		}
		p.partial = newBitset(len(p.nodes))
		var free resource.MilliGPU
		for pos, i := range p.nodes {
			ns := &s.nodes[i]
			setBit(p.buckets[ns.whole], pos)
			if ns.partial > 0 {
				setBit(p.partial, pos)
			}
			for _, f := range ns.free {
				free += resource.MilliGPU(f)
			}
		}
		p.free = int64(free)
		if p.key.kind != poolReservation {
			s.free[tenancy.Key{Model: p.key.model, Region: p.key.region}] += free
		}
	}
	s.resUsed = make([]resource.MilliGPU, len(in.Reservations))
	for i := range s.run {
		if !s.run[i].onRes {
			continue
		}
		w := s.run[i].w
		for ri := range in.Reservations {
			if in.Reservations[ri].Name == w.Reservation {
				s.resUsed[ri] = s.resUsed[ri].Add(s.run[i].total)
			}
		}
	}
	s.classifyBorrowers()
	s.classifyGrowth()
	s.classifyCover()
	return s, conflicts
}

// indexRunning lists on each node the runs touching it, in run order (as
// appending each run's index to its nodes in turn would), in one buffer of
// n entries (the runs' node lists together) instead of a slice grown per
// node.
func (s *snapshot) indexRunning(n int) {
	count := sized(s.buf.count, len(s.nodes))
	clear(count)
	s.buf.count = count
	for i := range s.run {
		for _, ni := range s.run[i].nodes {
			count[ni]++
		}
	}
	buf := sized(s.buf.running, n)
	s.buf.running = buf
	off := 0
	for ni, c := range count {
		if c > 0 {
			s.nodes[ni].running = buf[off : off : off+c]
			off += c
		}
	}
	for i := range s.run {
		for _, ni := range s.run[i].nodes {
			s.nodes[ni].running = append(s.nodes[ni].running, i)
		}
	}
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// classifyBorrowers marks the running workloads that sit beyond their
// tenant's guarantee. A tenant's workloads on one quota entry are taken in
// order (priority, then those placed within the guarantee, then oldest
// first, then name); those whose cumulative GPUs end above
// the guarantee are borrowing and may be reclaimed. The others are within
// the guarantee and, unless preemptible, are never evicted.
func (s *snapshot) classifyBorrowers() {
	// A group is one (tenant, quota entry): group base[t]+idx. Runs are
	// bucketed by group with a counting sort, keeping run order in each
	// group, as the groups' lists were built before.
	tenants := s.tree.Tenants
	base := make([]int, len(tenants)+1)
	for t := range tenants {
		base[t+1] = base[t] + len(tenants[t].Quotas)
	}
	ng := base[len(tenants)]
	guaranteed := make([]resource.MilliGPU, ng)
	total := make([]resource.MilliGPU, ng)
	count := make([]int, ng+1)
	group := sized(s.buf.group, len(s.run))
	s.buf.group = group
	for i := range s.run {
		r := &s.run[i]
		group[i] = -1
		if r.onRes {
			continue
		}
		if r.group > 0 {
			// Growth comes after all of the tenant's other work
			// (classifyGrowth).
			r.borrows = true
			continue
		}
		idx := r.entry // tree.Entry(r.tenant, r.key), found when the run was built
		if idx < 0 {
			r.borrows = true
			continue
		}
		g := base[r.tenant] + idx
		group[i] = g
		guaranteed[g] = tenants[r.tenant].Quotas[idx].Guaranteed
		total[g] = total[g].Add(r.total)
		count[g+1]++
	}
	// Only a group above its guarantee has borrowers: a group within it
	// has none, whatever the order (each run's borrows is false already).
	// Gather the runs of those groups only.
	n := 0
	for g := 0; g < ng; g++ {
		c := count[g+1]
		if total[g] <= guaranteed[g] {
			c = 0
		}
		count[g] = n
		n += c
	}
	count[ng] = n
	if n == 0 {
		return
	}
	runs := make([]int, n)
	fill := slices.Clone(count[:ng])
	for i, g := range group {
		if g >= 0 && total[g] > guaranteed[g] {
			runs[fill[g]] = i
			fill[g]++
		}
	}
	for g := 0; g < ng; g++ {
		grp := runs[count[g]:fill[g]]
		if len(grp) == 0 {
			continue
		}
		keys := s.sortedGroup(grp, nil, borrowOrder)
		var cum resource.MilliGPU
		for _, k := range keys {
			cum = cum.Add(s.run[k.run].total)
			s.run[k.run].borrows = cum > guaranteed[g]
		}
	}
}

// sortedGroup returns the runs of grp (but those skip says to leave out)
// in order (borrowOrder, or coverOrder). The sort keys are read once per run, so that the sort
// compares values instead of following each run's pointers. The result
// is scratch (s.buf.borrow).
func (s *snapshot) sortedGroup(grp []int, skip func(run int) bool, order func(nanos bool) func(a, b borrowKey) int) []borrowKey {
	br := s.buf.cur().runs
	keys := s.buf.borrow[:0]
	nanos := true // every StartedAt is exact in int64 nanoseconds
	for _, i := range grp {
		if skip != nil && skip(i) {
			continue
		}
		r, b := &s.run[i], &br[i]
		keys = append(keys, borrowKey{run: i, prio: r.prio, within: b.within, started: b.started, w: r.w})
		nanos = nanos && b.exact
	}
	s.buf.borrow = keys
	slices.SortFunc(keys, order(nanos))
	return keys
}

// borrowOrder is the order of a group's runs in classifyBorrowers (and
// classifyCover): priority, then those placed within the guarantee, then
// oldest first (nanos: every StartedAt is exact in int64 nanoseconds),
// then name.
func borrowOrder(nanos bool) func(a, b borrowKey) int {
	return func(a, b borrowKey) int {
		if a.prio != b.prio {
			return int(b.prio - a.prio)
		}
		if a.within != b.within {
			// What a cycle placed within the guarantee stays first:
			// work of the tenant placed later as a borrower must not
			// turn it into a borrower (it would be evicted back).
			if a.within {
				return -1
			}
			return 1
		}
		if nanos {
			if a.started != b.started {
				return cmp.Compare(a.started, b.started)
			}
		} else if c := a.w.Running.StartedAt.Compare(b.w.Running.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(string(a.w.Name), string(b.w.Name))
	}
}

// borrowKey is a run's place in its group's order (classifyBorrowers).
type borrowKey struct {
	run     int
	prio    workload.Priority
	within  bool
	started int64 // StartedAt in Unix nanoseconds
	w       *workload.Workload
}

// Check reports inconsistencies in an input's running workloads: unknown
// tenants or nodes, GPU indices out of range, GPUs given twice.
func Check(in *Input) error {
	_, conflicts := newSnapshot(in)
	if len(conflicts) == 0 {
		return nil
	}
	return fmt.Errorf("sched: inconsistent input:\n  %s", joinLines(conflicts))
}

func joinLines(ss []string) string {
	out := ""
	for i, x := range ss {
		if i > 0 {
			out += "\n  "
		}
		out += x
	}
	return out
}
