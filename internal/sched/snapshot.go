package sched

import (
	"math/bits"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched/score"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// A pool is the set of nodes of one GPU model in one region with the same
// access rule: shared, one partition, or one reservation (and, while any
// workload has a pool constraint, the same PoolLabel). Each pool indexes
// its nodes by number of fully free GPUs so that best-fit search is a few
// bit scans instead of a walk over the fleet.
type poolKind uint8

const (
	poolShared poolKind = iota
	poolPartition
	poolReservation
)

type poolKey struct {
	region string
	model  fleet.ModelID
	kind   poolKind
	id     int    // partition or reservation index
	label  string // the nodes' PoolLabel, when some workload asks for pools
	// mig is set for nodes in MIG mode: only MIG claims use their pools,
	// and MIG claims use no other (eligiblePools).
	mig bool
}

// PoolLabel is the node label that names a node's pool, which workloads'
// Pools name (and policies' pool targets).
const PoolLabel = "pool"

type pool struct {
	key     poolKey
	nodes   []int      // node indices, fleet order
	buckets [][]uint64 // buckets[k]: bitset of pool positions with k fully free GPUs
	// low[k] is a word index at or below the first set word of buckets[k],
	// so that scans skip the filled front of the pool.
	low     []int
	partial []uint64 // pool positions with a GPU that is partly used
	maxGPUs int
	free    int64 // milli-GPUs free on its nodes (kept by adjust)
}

type bitset []uint64

func newBitset(n int) []uint64      { return make([]uint64, (n+63)/64) }
func setBit(b []uint64, i int)      { b[i>>6] |= 1 << (uint(i) & 63) }
func clearBit(b []uint64, i int)    { b[i>>6] &^= 1 << (uint(i) & 63) }
func hasBit(b []uint64, i int) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }
func nextBit(b []uint64, from int) int { // first set bit ≥ from, or -1
	w := from >> 6
	if w >= len(b) {
		return -1
	}
	x := b[w] &^ ((1 << (uint(from) & 63)) - 1)
	for {
		if x != 0 {
			return w<<6 + bits.TrailingZeros64(x)
		}
		w++
		if w >= len(b) {
			return -1
		}
		x = b[w]
	}
}

// first returns the first set position in bucket k, or -1, and moves the
// bucket's low-word hint forward past empty words.
func (p *pool) first(k int) int {
	b := p.buckets[k]
	w := p.low[k]
	for w < len(b) && b[w] == 0 {
		w++
	}
	p.low[k] = w
	if w == len(b) {
		return -1
	}
	return w<<6 + bits.TrailingZeros64(b[w])
}

// nodeState is the free capacity of one node during a cycle.
type nodeState struct {
	node    *fleet.Node
	free    []int32 // free milli per GPU
	whole   int     // GPUs with all 1000 milli free
	partial int     // GPUs partly used
	cpu     resource.MilliCPU
	mem     resource.MiB
	pool    int // index into snapshot.pools, -1 when down
	pos     int // position in its pool
	down    bool
	// migAt is, on a node in MIG mode, 1 + the offset of its GPUs'
	// layouts (occupied memory slices, mig.Layout) in snapshot.layouts
	// (layoutsOf); 0 on other nodes. A MIG instance also takes its
	// share's milli from free. (It fits in the padding after down.)
	migAt   int32
	running []int // indices of running workloads with a replica here
}

// runState is a running workload during a cycle.
type runState struct {
	w       *workload.Workload
	tenant  int
	key     tenancy.Key   // model and region it runs in
	entries []tenancy.Ref // quota entries it counts against
	entry   int           // its tenant's quota entry (tenancy.Tree.Entry), -1: none or on a reservation
	borrows bool          // beyond its tenant's guarantee (reclaimable)
	evicted bool
	// Copied from w, so that victim searches over many runs read the
	// run, not each workload: its priority, whether it is preemptible,
	// whether it runs on its own reservation; starved is 0 until
	// computed, then 1 (no) or 2 (yes, see snapshot.starved).
	prio        workload.Priority
	preemptible bool
	onRes       bool
	starved     int8
	workLost    float64 // -1 until computed; use snapshot.lost
	nodes       []int   // distinct node indices it touches
	// total is the GPUs the run holds: its workload's TotalGPUs, or for
	// an elastic workload's growth split off (elastic.go) its part's.
	total resource.MilliGPU
	// group is 0 for a workload's run (for an elastic one, its first
	// Min replicas), k ≥ 1 for the k-th step of its growth, whose
	// workload's run is parent.
	group  int32
	parent int32
}

// snapshot is the mutable copy of the world one cycle works on.
type snapshot struct {
	in  *Input
	buf *scratch // reused buffers (see scratch)
	// upcoming is set when a reservation is bound and before its window:
	// then a workload's expected runtime decides where it may go.
	upcoming bool
	nodes    []nodeState
	// layouts holds the MIG layouts of the nodes in MIG mode
	// (nodeState.migAt), nil when there are none.
	layouts []uint8
	pools   []*pool
	poolIdx map[poolKey]int
	// regionModel lists, per (region, model), the pools holding such nodes.
	regionModel map[tenancy.Key][]int
	blocks      map[fleet.BlockID][]int // node indices per block
	blockOrder  []fleet.BlockID
	// regionBlocks and blockNodes index blocks by region and blockOrder
	// index, nodeBlock is each node's block index (skeleton).
	regionBlocks map[string][]int32
	blockNodes   [][]int
	nodeBlock    []int32
	blockPool    []int32

	// tenantWaiting counts the deferred workloads of each tenant with
	// work past Options.TenantBound (boundTenants), nil when none has.
	tenantWaiting map[string]int
	// decided is the pending workloads the cycle decides, in order.
	decided []*workload.Workload

	tree  *tenancy.Tree
	usage tenancy.Ledger // usage[tenant][entry]: running work, outside reservations
	// decayed is the entries' decayed usage at Now (Options.FairShare),
	// nil when fair share over time is off.
	decayed tenancy.Decayed
	// reserved is, per quota entry, the capacity of active reservations
	// charged to it (tenancy.ChargeReservations); it counts toward limits
	// only and does not change during a cycle.
	reserved tenancy.Ledger
	run      []runState
	// cover is, per run, the tenant whose guarantee covers it (-1: none)
	// when some tenant above the leaves guarantees capacity; nil
	// otherwise (see tree.go).
	cover    []int32
	replicas [][]replicaAt                     // per run, its replicas
	free     map[tenancy.Key]resource.MilliGPU // free milli in shared and partition pools
	// resUsed is, per reservation, the GPUs its owner runs on it.
	resUsed []resource.MilliGPU
	// refCache caches, per tenant, the quota entries a (model, region)
	// counts against.
	refCache [][]refEntry

	// victimBounds is, per node, what victim searches may find there
	// (mayHaveVictims); nil until the first search.
	victimBounds []nodeVictims
	poolVictims  [][]int   // per pool, victimNodes; nil until asked
	blockerSlab  []Blocker // keepBlockers

	journal []change // undo log for what-if changes

	// failed remembers preemption searches that found nothing, with the
	// eviction count at the time (see hopeless).
	failed    map[hopelessKey]int
	evictions int
	// reach remembers, per claim class and pool, the most a node could
	// offer a victim search (reachMemo).
	reach map[reachKey]reachMemo
	// blockReach is the same for a gang's block searches (blockKey);
	// boundPos and boundAcc are slotBound's scratch.
	blockReach map[blockKey]*blockMemo
	// poolEvictions and blockEvictions count, per pool and per block
	// (blockOrder index), the evictions that gave capacity back there: a
	// memo's bound for one stays true until its count moves.
	poolEvictions  []int
	blockEvictions []uint32
	boundPos       []int32
	boundAcc       []int32

	// placed counts the claims placed this cycle; repeats holds the last
	// pending decision per repeatKey with the count it was made at.
	placed     int
	repeats    map[repeatKey]*repeat
	lastRepeat *repeat
	// shapes are the pending workloads' classes (order); shape is the
	// class+1 of the workload being decided, 0 when unknown.
	shapes shapes
	shape  int32

	// claimPrio collects, during one placement, the running workloads of
	// other tenants it evicts by priority; foreignPrio those of committed
	// placements. shield lists workloads such claims may not take (see
	// Schedule).
	claimPrio   []int
	foreignPrio []int
	shield      map[workload.ID]bool
	// usageVer counts the changes of usage (charge, refund); protMemos
	// are protected's sums per key as of one.
	usageVer  uint64
	protMemos []protMemo
	// claimBuf is the claim tryCandidate decides with (one at a time);
	// repeatSlab the unused rest of the block remember takes repeats from.
	claimBuf   claim
	repeatSlab []repeat
	// demand is, per quota entry with a guarantee, its tenant's pending
	// GPUs there (heldFor); computed on first use.
	demand tenancy.Ledger

	// scorer is the named scorer, nil for the default best fit.
	scorer    score.Scorer
	scoreNode score.Node
	gpuBuf    []int

	// Planned starts (backfill.go): plans per workload planned this cycle
	// (nil: tried, none), planned counts them; holds and, per node, the
	// holds on it, the GPUs they hold and the slack left for work that
	// may not use held GPUs; fresh lists this cycle's placements, freshAt
	// per node; thresholds are the instants a workload's expected end is
	// compared with (timeClass).
	plans     map[*workload.Workload]*PlannedStart
	planned   int
	holds     []hold
	holdsAt   [][]int32
	heldGPUs  []int
	multiHeld []int           // nodes with several holds
	holdSum   [][]int         // per hold, per pool: held free GPUs of its single-hold nodes (heldFree)
	heldCount []int           // per node: its share of holdSum
	holdOK    []int8          // scratch: per hold, whether a claim may use it (heldFree)
	runEnds   []time.Duration // per run, its expected end from Now (runEnd)
	nodeReps  [][]nodeRep     // per node, its running replicas (indexReplicas)
	ends      []nodeEnd       // per node, what gpuEnds keeps between claims
	nodeVer   []uint32        // per node, bumped when its GPUs change (nodeEnds)
	// Per block (blockOrder index): a version bumped whenever anything a
	// gang's earliest fit there reads changes (a node's GPUs, its held
	// GPUs, what gpuEnds keeps for it), and the last gang fit found there
	// (earliest).
	blockVer   []uint32
	blockFits  []blockFit
	slack      []int
	fresh      []freshRep
	freshAt    [][]int32
	thresholds []time.Duration

	// Elastic growth (elastic.go): per workload's run with growth, its
	// growth runs, lowest step first (nil when no workload has growth);
	// extUsage is the quota the growth runs hold (nil then too); shrinks
	// are why each growth run was given back, by run; growable are the
	// runs that may grow; claimShrunk is set when the placement being
	// decided gave growth back.
	exts        map[int][]int
	extUsage    tenancy.Ledger
	shrinks     map[int]shrinkNote
	growable    []int
	claimShrunk bool

	// Scratch space.
	cands     []candidate
	reasons   []Blocker
	stamp     uint32
	runStamp  []uint32
	areaLocal []int32
	areaLast  []int
	areaBuf   area
}

type refEntry struct {
	key   tenancy.Key
	refs  []tenancy.Ref
	entry int // tenancy.Tree.Entry's index for key, -1 when none
}

// entriesFor returns the quota entries charged when tenant t uses k
// (tenancy.Tree.Charged, cached per tenant).
func (s *snapshot) entriesFor(t int, k tenancy.Key) []tenancy.Ref {
	refs, _ := s.refsFor(t, k)
	return refs
}

// refsFor is entriesFor with the tenant's own quota entry for k
// (tenancy.Tree.Entry's index, -1 when none), from the same cache.
func (s *snapshot) refsFor(t int, k tenancy.Key) ([]tenancy.Ref, int) {
	for _, c := range s.refCache[t] {
		if c.key == k {
			return c.refs, c.entry
		}
	}
	out := s.tree.Charged(t, k)
	_, idx, ok := s.tree.Entry(t, k.Model, k.Region)
	if !ok {
		idx = -1
	}
	s.refCache[t] = append(s.refCache[t], refEntry{k, out, idx})
	return out, idx
}

func (s *snapshot) charge(refs []tenancy.Ref, amt resource.MilliGPU) {
	s.usage.Add(refs, amt)
	s.usageVer++
}

func (s *snapshot) refund(refs []tenancy.Ref, amt resource.MilliGPU) {
	s.usage.Sub(refs, amt)
	s.usageVer++
}

// reindex moves node i to the right bucket after its free GPUs changed.
func (s *snapshot) reindex(i int, oldWhole, oldPartial int) {
	ns := &s.nodes[i]
	if ns.pool < 0 {
		return
	}
	p := s.pools[ns.pool]
	if oldWhole != ns.whole {
		clearBit(p.buckets[oldWhole], ns.pos)
		setBit(p.buckets[ns.whole], ns.pos)
		p.low[ns.whole] = min(p.low[ns.whole], ns.pos>>6)
	}
	if (oldPartial > 0) != (ns.partial > 0) {
		if ns.partial > 0 {
			setBit(p.partial, ns.pos)
		} else {
			clearBit(p.partial, ns.pos)
		}
	}
}

// change is one entry of the undo log.
type change struct {
	op    uint8
	node  int
	gpus  []int
	delta int32
	cpu   resource.MilliCPU
	mem   resource.MiB
	refs  []tenancy.Ref
	amt   resource.MilliGPU
	run   int
	mask  uint8 // the MIG instance's slices on gpus[0] (opTake, opGive)
}

const (
	opTake uint8 = iota
	opGive
	opCharge
	opRefund
	opEvict
	opResUse // reservation run lost amt
	opSlack  // node's slack lost delta GPUs
	opExtRefund
)

// take removes milli from GPUs gpus of node i, and the MIG instance's
// slices mask (0: none) from its layouts.
func (s *snapshot) take(i int, gpus []int, milli int32, mask uint8, cpu resource.MilliCPU, mem resource.MiB) {
	s.adjust(i, gpus, -milli, mask, cpu, mem)
	s.journal = append(s.journal, change{op: opTake, node: i, gpus: gpus, delta: milli, mask: mask, cpu: cpu, mem: mem})
}

// give returns milli to GPUs gpus of node i, and the slices mask.
func (s *snapshot) give(i int, gpus []int, milli int32, mask uint8, cpu resource.MilliCPU, mem resource.MiB) {
	s.adjust(i, gpus, milli, mask, -cpu, -mem)
	s.journal = append(s.journal, change{op: opGive, node: i, gpus: gpus, delta: milli, mask: mask, cpu: cpu, mem: mem})
}

func (s *snapshot) chargeJ(refs []tenancy.Ref, amt resource.MilliGPU) {
	s.charge(refs, amt)
	s.journal = append(s.journal, change{op: opCharge, refs: refs, amt: amt})
}

func (s *snapshot) refundJ(refs []tenancy.Ref, amt resource.MilliGPU) {
	s.refund(refs, amt)
	s.journal = append(s.journal, change{op: opRefund, refs: refs, amt: amt})
}

// adjust adds delta milli to each GPU in gpus and takes cpu and mem (which
// may be negative to give them back); a MIG instance's slices mask are
// taken (delta < 0) or given back on its GPU's layout.
func (s *snapshot) adjust(i int, gpus []int, delta int32, mask uint8, cpu resource.MilliCPU, mem resource.MiB) {
	ns := &s.nodes[i]
	oldWhole, oldPartial := ns.whole, ns.partial
	if s.nodeVer != nil {
		s.nodeVer[i]++
		s.touchBlock(i)
	}
	if mask != 0 {
		s.layout(i, gpus, delta, mask)
	}
	var diff int64
	for _, g := range gpus {
		before := ns.free[g]
		after := min(max(before+delta, 0), resource.PerGPU)
		ns.free[g] = after
		diff += int64(after - before)
		countGPU(ns, before, -1)
		countGPU(ns, after, +1)
	}
	if ns.pool >= 0 {
		s.pools[ns.pool].free += diff
	}
	ns.cpu -= cpu
	ns.mem -= mem
	if ns.pool >= 0 && s.pools[ns.pool].key.kind != poolReservation {
		k := tenancy.Key{Model: ns.node.Model, Region: ns.node.Region}
		s.free[k] += resource.MilliGPU(int64(delta) * int64(len(gpus)))
	}
	s.reindex(i, oldWhole, oldPartial)
	if s.holdsAt != nil && oldWhole != ns.whole {
		s.recount(i)
	}
}

// layoutsOf is node i's GPUs' MIG layouts, nil when it is not in MIG mode.
func (s *snapshot) layoutsOf(i int) []uint8 {
	ns := &s.nodes[i]
	if ns.migAt == 0 {
		return nil
	}
	off := int(ns.migAt - 1)
	return s.layouts[off : off+ns.node.GPUs : off+ns.node.GPUs]
}

// layout takes (delta < 0) or gives back a MIG instance's slices mask on
// the layouts of node i's GPUs.
func (s *snapshot) layout(i int, gpus []int, delta int32, mask uint8) {
	ls := s.layoutsOf(i)
	for _, g := range gpus {
		if delta < 0 {
			ls[g] |= mask
		} else {
			ls[g] &^= mask
		}
	}
}

// hold changes a node's free GPUs and CPU/memory without touching the
// pool indexes (used while the snapshot is being built).
func (ns *nodeState) hold(gpus []int, delta int32, cpu resource.MilliCPU, mem resource.MiB) {
	for _, g := range gpus {
		before := ns.free[g]
		after := min(max(before+delta, 0), resource.PerGPU)
		ns.free[g] = after
		countGPU(ns, before, -1)
		countGPU(ns, after, +1)
	}
	ns.cpu -= cpu
	ns.mem -= mem
}

// lost returns the work run ri would lose if evicted now (computed once).
func (s *snapshot) lost(ri int) float64 {
	r := &s.run[ri]
	if r.group > 0 {
		return 0 // growth: the workload goes on at its smaller size
	}
	if r.workLost < 0 {
		r.workLost = r.w.WorkLost(s.in.Now)
	}
	return r.workLost
}

func countGPU(ns *nodeState, free int32, d int) {
	if free == resource.PerGPU {
		ns.whole += d
	} else if free > 0 {
		ns.partial += d
	}
}

// mark returns the journal position to roll back to.
func (s *snapshot) mark() int { return len(s.journal) }

// rollback undoes every change after mark m, newest first.
func (s *snapshot) rollback(m int) {
	for i := len(s.journal) - 1; i >= m; i-- {
		c := s.journal[i]
		switch c.op {
		case opTake:
			s.adjust(c.node, c.gpus, c.delta, c.mask, -c.cpu, -c.mem)
		case opGive:
			s.adjust(c.node, c.gpus, -c.delta, c.mask, c.cpu, c.mem)
		case opCharge:
			s.refund(c.refs, c.amt)
		case opRefund:
			s.charge(c.refs, c.amt)
		case opEvict:
			s.run[c.run].evicted = false
		case opExtRefund:
			s.extUsage.Add(c.refs, c.amt)
		case opResUse:
			s.resUsed[c.run] = s.resUsed[c.run].Add(c.amt)
		case opSlack:
			s.slack[c.node] += int(c.delta)
			s.recount(c.node)
		}
	}
	s.journal = s.journal[:m]
}

// commit forgets the undo log (the changes stay).
func (s *snapshot) commit() { s.journal = s.journal[:0] }
