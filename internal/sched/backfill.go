package sched

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Planned starts (backfill), after Slurm's backfill scheduler: the
// highest-ordered pending workloads that do not fit now (Planning.Depth of
// them, bf_max_job_test in Slurm) each get the earliest time and place they
// would fit, computed from the expected ends of the work running there, and
// that capacity is held for them. Work decided later in the cycle may use
// held GPUs only if it is expected to end by the planned start (backfill),
// or if the planned workload could evict it then (preemptible work of lower
// priority, or a borrower of its guarantee) within the honour window.
//
// A gang that has waited longer than its class's bound (Planning.MaxWait)
// is planned before anything else is decided: its block is drained, so
// that not even higher-ordered work may land there past its planned start.
// Once started, such a gang is not preempted by priority again (starved).
//
// Planning counts whole GPUs only: a workload asking a share of a GPU is
// not planned, and does not use held GPUs unless it would end in time.
// CPU and memory are not planned.

// Planning configures planned starts (Options.Planning). The zero value
// turns planning off.
type Planning struct {
	// Depth is how many of the highest-ordered pending workloads that do
	// not fit now get a planned start each cycle; 0 turns planning off.
	Depth int
	// DefaultRuntime is the expected runtime assumed, per priority class,
	// for work that declares none (expected_runtime). Work with neither is
	// never expected to end: nothing is planned around it, and it never
	// backfills.
	DefaultRuntime map[workload.Priority]time.Duration
	// MaxWait bounds, per priority class, how long a gang (same-block,
	// several replicas) waits since submission before it is planned first
	// and a block is drained for it; absent or zero: no bound.
	MaxWait map[workload.Priority]time.Duration
	// PreemptOverrun lets a planned start evict work that has run past its
	// expected runtime (of the planned workload's priority or lower,
	// borrowing beyond its tenant's guarantee), before anything else;
	// otherwise such work keeps running and its end is unknown to the plan.
	PreemptOverrun bool
}

// DefaultPlanDepth is the planning depth the server and the simulator use
// unless told otherwise.
const DefaultPlanDepth = 16

// DefaultMaxWait is the bound on a gang's wait the server and the
// simulator use for every class unless told otherwise.
const DefaultMaxWait = 12 * time.Hour

// DefaultPlanning is the planning the server and the simulator use unless
// told otherwise: depth DefaultPlanDepth, gangs of every class bounded by
// DefaultMaxWait, no default runtimes, overrunning work kept.
func DefaultPlanning() Planning {
	wait := map[workload.Priority]time.Duration{}
	for _, p := range workload.AllPriorities.Classes() {
		wait[p] = DefaultMaxWait
	}
	return Planning{Depth: DefaultPlanDepth, MaxWait: wait}
}

// PlannedStart is when and where a pending workload is planned to start.
type PlannedStart struct {
	Start  time.Time     `json:"planned_start"`
	Block  fleet.BlockID `json:"planned_block,omitempty"` // gangs only
	Flavor fleet.ModelID `json:"flavor"`
	Region string        `json:"region"`
	// Nodes is how many nodes the plan holds GPUs on.
	Nodes int `json:"nodes"`
	// Ending names the running workloads whose expected ends the start
	// waits for, the last to end first (at most maxEndingNames), out of
	// EndingCount in all. Callers showing the plan to a tenant must not
	// show other tenants' names.
	Ending      []workload.ID `json:"ending,omitempty"`
	EndingCount int           `json:"ending_count,omitempty"`
	// Evicts counts the running workloads the start would evict (lower
	// priority or overrunning work it may preempt).
	Evicts int `json:"evicts,omitempty"`
	// Starving is set when the workload, a gang, has waited Waited, longer
	// than its class's MaxWait: its block is drained.
	Starving bool          `json:"starving,omitempty"`
	Waited   time.Duration `json:"waited_ns,omitempty"`
	MaxWait  time.Duration `json:"max_wait_ns,omitempty"`
}

// maxEndingNames bounds PlannedStart.Ending.
const maxEndingNames = 3

// never is the end of work whose end is unknown.
const never = time.Duration(math.MaxInt64)

// hold is capacity held for a planned start.
type hold struct {
	w      *workload.Workload
	tenant int
	prio   workload.Priority
	within bool
	start  time.Time
	plan   *PlannedStart
}

// freshRep is a replica placed this cycle, with its expected end from Now.
type freshRep struct {
	id   workload.ID
	gpus []int
	end  time.Duration
}

// planning reports whether this cycle plans starts.
func (s *snapshot) planning() bool { return s.in.Options.Planning.Depth > 0 }

// runtime is w's expected runtime: declared, or its class's default; 0
// when unknown.
func (s *snapshot) runtime(w *workload.Workload) time.Duration {
	if w.ExpectedRuntime > 0 {
		return w.ExpectedRuntime
	}
	return s.in.Options.Planning.DefaultRuntime[w.Priority]
}

// runEnd is when running workload ri is expected to end, from Now (never
// when unknown); overrun is set when that time has passed.
func (s *snapshot) runEnd(ri int) (end time.Duration, overrun bool) {
	if s.runEnds == nil {
		s.runEnds = make([]time.Duration, len(s.run))
		for i := range s.runEnds {
			s.runEnds[i] = unknownEnd
		}
	}
	d := s.runEnds[ri]
	if d == unknownEnd {
		d = never
		w := s.run[ri].w
		if rt := s.runtime(w); rt > 0 {
			if d = w.Running.StartedAt.Add(rt).Sub(s.in.Now); d <= 0 {
				d = overran
			}
		}
		s.runEnds[ri] = d
	}
	if d == overran {
		return never, true
	}
	return d, false
}

// Sentinels of snapshot.runEnds: not computed yet, and past its end.
const (
	unknownEnd = time.Duration(-1)
	overran    = time.Duration(-2)
)

// overrunVictim reports whether a claim that would be planned may evict
// running workload ri for having run past its expected runtime
// (Planning.PreemptOverrun): of the claim's priority or lower, borrowing
// (work within its tenant's guarantee is never taken this way), not on
// its own reservation.
func (s *snapshot) overrunVictim(cl *claim, ri int) bool {
	if !s.in.Options.Planning.PreemptOverrun || !s.planSlot(cl.w) {
		return false
	}
	r := &s.run[ri]
	if r.onRes || r.prio > cl.w.Priority || !s.borrowsFrom(ri, cl.tenant) || s.shield[r.w.Name] {
		return false
	}
	_, over := s.runEnd(ri)
	return over
}

// planSlot reports whether w would be planned if it failed now: planning
// is on, and w is starving or the cycle's plans have not reached Depth.
func (s *snapshot) planSlot(w *workload.Workload) bool {
	if !s.planning() {
		return false
	}
	if _, ok := s.plans[w]; ok {
		return true
	}
	return s.planned < s.in.Options.Planning.Depth
}

// starving reports whether w is a gang that has waited longer than its
// class's bound, and how long it waited.
func (s *snapshot) starving(w *workload.Workload) (bool, time.Duration, time.Duration) {
	if !w.Gang() || w.Replicas < 2 {
		return false, 0, 0
	}
	bound := s.in.Options.Planning.MaxWait[w.Priority]
	waited := s.in.Now.Sub(w.SubmittedAt)
	return bound > 0 && waited > bound, waited, bound
}

// starved reports whether running workload w is a gang that started only
// after waiting longer than its class's bound: it then runs to its end
// without priority preemption (reclaim of a guarantee, a reservation's
// owner, a node failure or a policy still evict it), so that a starved
// gang, once started, is not starved again.
func (s *snapshot) starved(w *workload.Workload) bool {
	if !s.planning() || !w.Gang() || w.Replicas < 2 {
		return false
	}
	bound := s.in.Options.Planning.MaxWait[w.Priority]
	return bound > 0 && w.Running.StartedAt.Sub(w.SubmittedAt) > bound
}

// starvedRun is starved for running workload ri, computed once a cycle.
func (s *snapshot) starvedRun(ri int) bool {
	r := &s.run[ri]
	if r.starved == 0 {
		r.starved = 1
		if s.starved(r.w) {
			r.starved = 2
		}
	}
	return r.starved == 2
}

// planStarving plans, before anything else is decided, every pending gang
// that has waited longer than its class's bound (at most Depth of them,
// in order), so that their blocks are drained for them.
func (s *snapshot) planStarving(pending []*workload.Workload) {
	for _, w := range pending {
		if s.planned >= s.in.Options.Planning.Depth {
			return
		}
		if ok, waited, bound := s.starving(w); ok {
			if p := s.planOne(w, nil); p != nil {
				p.Starving, p.Waited, p.MaxWait = true, waited, bound
			}
		}
	}
}

// afterPending plans w, just left pending (the last of plan.Pending), if
// the cycle's depth allows and it is not planned yet, and attaches its
// plan to its pending decision.
func (s *snapshot) afterPending(w *workload.Workload, plan *Plan) {
	if !s.planning() {
		return
	}
	p, ok := s.plans[w]
	if !ok && s.planned < s.in.Options.Planning.Depth {
		p = s.planOne(w, plan.Pending[len(plan.Pending)-1].Blockers)
	}
	if p != nil {
		plan.Pending[len(plan.Pending)-1].Planned = p
	}
}

// planOne computes w's planned start and holds the capacity, or returns
// nil when w cannot be planned (not capacity-bound, unknown ends, a share
// of a GPU). Each workload is planned at most once per cycle; a failed
// attempt counts toward the depth too, so that the cost is bounded.
//
// blockers, when set, are w's pending blockers, one per candidate in
// order (Pending.Blockers): only the candidates that failed for room
// (NoCapacity, NoBlock) are planned; one refused by a quota or lending
// limit would not start on free GPUs either.
func (s *snapshot) planOne(w *workload.Workload, blockers []Blocker) *PlannedStart {
	if s.plans == nil {
		s.plans = map[*workload.Workload]*PlannedStart{}
	}
	if p, ok := s.plans[w]; ok {
		return p
	}
	s.planned++
	s.plans[w] = nil
	t, ok := s.tree.Lookup(w.Tenant)
	// MIG work gets no planned start: slices are not planned ahead.
	if !ok || w.GPUs < resource.PerGPU || w.Replicas < 1 || w.Reservation != "" || w.MIG != "" {
		return nil
	}
	var best *planFit
	for ci, c := range appendCandidates(nil, w) {
		if blockers != nil && (ci >= len(blockers) || (blockers[ci].Code != ReasonNoCapacity && blockers[ci].Code != ReasonNoBlock)) {
			continue
		}
		pools := s.regionModel[tenancy.Key{Model: c.model, Region: c.region}]
		if len(pools) == 0 {
			continue
		}
		cl := s.newClaim(w, t, c)
		cl.entries = s.entriesFor(t, cl.key)
		var at Blocker
		if !s.admit(cl, &at) {
			continue
		}
		cl.pools = s.planPools(cl, pools)
		if len(cl.pools) == 0 {
			continue
		}
		if f := s.earliest(cl); f != nil && (best == nil || f.start < best.start) {
			best = f
		}
	}
	if best == nil {
		return nil
	}
	p := s.hold(best)
	s.plans[w] = p
	return p
}

// planPools are the pools a plan may hold: the claim's eligible shared and
// partition pools (reserved capacity is its owner's).
func (s *snapshot) planPools(cl *claim, pools []int) []int {
	out := s.eligiblePools(cl, pools)
	return slices.DeleteFunc(out, func(pi int) bool { return s.pools[pi].key.kind == poolReservation })
}

// planFit is a claim's earliest fit: when, which nodes with how many
// replicas each, and the block for a gang.
type planFit struct {
	cl    *claim
	start time.Duration // from Now
	block fleet.BlockID
	nodes []int // node index per replica
}

// slotAt is the time from Now at which node can take one more replica.
type slotAt struct {
	at   time.Duration
	node int
}

// earliest finds the claim's earliest fit, or nil when there is none with
// known ends: for a gang, the block whose Replicas-th earliest replica
// slot comes first; otherwise the Replicas earliest slots over all nodes.
// A block's gang fit is kept for the next claim alike (blockFit): the
// alike gangs of a queue are planned one after another, and each hold
// changes a block or two.
func (s *snapshot) earliest(cl *claim) *planFit {
	gang := cl.w.Gang() && cl.w.Replicas > 1
	if !gang {
		slots := s.buf.slots[:0]
		for _, pi := range cl.pools {
			for _, i := range s.pools[pi].nodes {
				slots = s.nodeSlots(cl, i, slots)
			}
		}
		s.buf.slots = slots
		return s.fitOf(cl, slots, "")
	}
	s.initEnds()
	sig := s.victimSigOf(cl)
	var best *planFit
	for bi, b := range s.blockOrder {
		nodes := s.blocks[b]
		if len(nodes) == 0 || s.nodes[nodes[0]].node.Region != cl.cand.region {
			continue
		}
		e := &s.blockFits[bi]
		if !e.alike(s.blockVer[bi], cl, sig) || s.in.Options.noBlockFit {
			slots := s.buf.slots[:0]
			for _, i := range nodes {
				if s.inPools(cl, i) {
					slots = s.nodeSlots(cl, i, slots)
				}
			}
			s.buf.slots = slots
			e.keep(s.blockVer[bi], cl, sig, s.fitOf(cl, slots, b))
		}
		if e.found && (best == nil || e.start < best.start) {
			best = &planFit{cl: cl, block: b, start: e.start, nodes: slices.Clone(e.nodes)}
		}
	}
	return best
}

// blockFit is the last gang fit found in a block: for claims of count
// GPUs a replica, replicas replicas, sig and pools, at the block's
// version ver (nothing it read has changed since).
type blockFit struct {
	set      bool
	ver      uint32
	count    int
	replicas int
	sig      victimSig
	pools    []int
	found    bool
	start    time.Duration
	nodes    []int
}

// alike reports whether the kept fit is the claim's at version ver.
func (e *blockFit) alike(ver uint32, cl *claim, sig victimSig) bool {
	return e.set && e.ver == ver && e.count == cl.count && e.replicas == cl.w.Replicas && e.sig == sig && slices.Equal(e.pools, cl.pools)
}

// keep records f (nil: no fit) as the block's fit for the claim.
func (e *blockFit) keep(ver uint32, cl *claim, sig victimSig, f *planFit) {
	e.set, e.ver, e.count, e.replicas, e.sig = true, ver, cl.count, cl.w.Replicas, sig
	e.pools = append(e.pools[:0], cl.pools...)
	e.found = f != nil
	if f != nil {
		e.start, e.nodes = f.start, append(e.nodes[:0], f.nodes...)
	}
}

// touchBlock bumps the version of node i's block (blockFit): something
// a gang fit there reads has changed.
func (s *snapshot) touchBlock(i int) {
	if s.blockVer != nil {
		s.blockVer[s.nodeBlock[i]]++
	}
}

// fitOf takes the claim's Replicas earliest slots (ties: node order),
// or nil when there are fewer.
func (s *snapshot) fitOf(cl *claim, slots []slotAt, b fleet.BlockID) *planFit {
	r := cl.w.Replicas
	if len(slots) < r {
		return nil
	}
	slots = earliestSlots(slots, r)
	f := &planFit{cl: cl, block: b, start: slots[r-1].at, nodes: make([]int, 0, r)}
	for _, sl := range slots[:r] {
		f.nodes = append(f.nodes, sl.node)
	}
	return f
}

// earliestSlots moves the n earliest slots (by time, then node) to the
// front of slots, in that order. A few replicas over many nodes (the
// common case) cost one pass, not a sort.
func earliestSlots(slots []slotAt, n int) []slotAt {
	less := func(x, y slotAt) bool { return x.at < y.at || (x.at == y.at && x.node < y.node) }
	if n > 64 {
		slices.SortFunc(slots, func(x, y slotAt) int {
			if less(x, y) {
				return -1
			}
			if less(y, x) {
				return 1
			}
			return 0
		})
		return slots
	}
	// slots[:k] holds the k earliest so far, sorted; insertion keeps it.
	k := 0
	for i := range slots {
		x := slots[i]
		if k == n && !less(x, slots[k-1]) {
			continue
		}
		j := min(k, n-1) // the last kept one drops out when full
		if k < n {
			slots[i] = slots[k] // keep the element displaced from slots[k]
			k++
		}
		for j > 0 && less(x, slots[j-1]) {
			slots[j] = slots[j-1]
			j--
		}
		slots[j] = x
	}
	return slots
}

// nodeSlots appends node i's replica slots for the claim: the times at
// which it could hold one, two, … replicas, from when each of its GPUs is
// expected to be wholly free (gpuEnds), the GPUs already held for other
// plans taken out first.
func (s *snapshot) nodeSlots(cl *claim, i int, out []slotAt) []slotAt {
	ns := &s.nodes[i]
	held := 0
	if s.heldGPUs != nil {
		held = s.heldGPUs[i]
	}
	if ns.pool < 0 || len(ns.free) < held+cl.count {
		return out
	}
	ends := s.gpuEnds(cl, i)
	for k := held + cl.count - 1; k < len(ends); k += cl.count {
		if ends[k] == never {
			break
		}
		out = append(out, slotAt{at: ends[k], node: i})
	}
	return out
}

// gpuEnds returns, per GPU of node i, when it is expected to be wholly
// free for the claim, from Now, in ascending order: 0 if free now; else
// the latest expected end of the work on it, where work the claim may
// evict ends after its exit time, and work with an unknown end never
// ends. The part no claim changes is kept per node until the node's GPUs
// change (nodeEnds); only the work some claim could evict is read per
// claim. The result is scratch: read it before the next call.
func (s *snapshot) gpuEnds(cl *claim, i int) []time.Duration {
	c := s.nodeEnds(i)
	if len(c.victims) == 0 {
		return c.sorted
	}
	// Which victims a claim may evict depends on it only through its
	// victimSig: the last answer is kept for the next claim alike.
	sig := s.victimSigOf(cl)
	if c.sigSet && c.sig == sig {
		return c.sorted
	}
	s.touchBlock(i)
	ends := append(c.sorted[:0], c.base...)
	for _, nr := range c.victims {
		ri := int(nr.run)
		end, _ := s.runEnd(ri)
		if _, ok := s.allowed(cl, ri); ok {
			end = ExitTime(s.run[ri].w)
		}
		for _, g := range nr.gpus {
			ends[g] = max(ends[g], end)
		}
	}
	for g := range ends {
		if ends[g] < 0 {
			ends[g] = never
		}
	}
	slices.Sort(ends)
	c.sorted, c.sig, c.sigSet = ends, sig, true
	return ends
}

// victimSigOf is the claim's victimSig.
func (s *snapshot) victimSigOf(cl *claim) victimSig {
	return victimSig{tenant: cl.tenant, prio: cl.w.Priority, within: cl.within, cover: cl.cover,
		overrun: s.in.Options.Planning.PreemptOverrun && s.planSlot(cl.w)}
}

// victimSig is what allowed reads of a planned claim (one not on a
// reservation, not running): claims alike in it may evict the same work.
type victimSig struct {
	tenant  int
	prio    workload.Priority
	within  bool
	cover   int32
	overrun bool // may evict overrunning work (overrunVictim)
}

// nodeEnd is what gpuEnds keeps of a node between claims: per GPU, the
// latest expected end of the work no claim could evict (-1: none, and
// not free: only work that may be evicted, or work placed this cycle
// with an unknown end, holds it), sorted when no work may be evicted;
// the replicas of work some claim could evict; and the node's version
// it was computed at. With victims, sorted is the last claim's ends.
type nodeEnd struct {
	version uint32
	base    []time.Duration
	sorted  []time.Duration // with victims: for the claims of sig
	victims []nodeRep
	sig     victimSig
	sigSet  bool
}

// nodeEnds returns node i's nodeEnd, computing it if the node changed.
func (s *snapshot) nodeEnds(i int) *nodeEnd {
	s.initEnds()
	c := &s.ends[i]
	if c.version == s.nodeVer[i] {
		return c
	}
	c.version, c.sigSet = s.nodeVer[i], false
	s.touchBlock(i)
	ns := &s.nodes[i]
	c.base = sized(c.base, len(ns.free))
	for g, f := range ns.free {
		if f == resource.PerGPU {
			c.base[g] = 0
		} else {
			c.base[g] = -1
		}
	}
	if s.nodeReps == nil {
		s.indexReplicas()
	}
	preempt := !s.in.Options.DisablePreemption
	c.victims = c.victims[:0]
	for _, nr := range s.nodeReps[i] {
		ri := int(nr.run)
		r := &s.run[ri]
		if r.evicted {
			continue
		}
		// Only preemptible work, borrowers and (PreemptOverrun)
		// overrunning work can be victims (allowed).
		if preempt && (r.preemptible || r.borrows || s.in.Options.Planning.PreemptOverrun) {
			c.victims = append(c.victims, nr)
			continue
		}
		end, _ := s.runEnd(ri)
		for _, g := range nr.gpus {
			c.base[g] = max(c.base[g], end)
		}
	}
	if s.freshAt != nil {
		for _, fi := range s.freshAt[i] {
			f := s.fresh[fi]
			for _, g := range f.gpus {
				c.base[g] = max(c.base[g], f.end)
			}
		}
	}
	if len(c.victims) == 0 {
		c.sorted = append(c.sorted[:0], c.base...)
		for g := range c.sorted {
			if c.sorted[g] < 0 {
				c.sorted[g] = never
			}
		}
		slices.Sort(c.sorted)
	}
	return c
}

// initEnds readies what nodeEnds and blockFit keep, on first use in a
// cycle: the last snapshot's arrays, reused, all stale.
func (s *snapshot) initEnds() {
	if s.ends != nil {
		return
	}
	s.ends = sized(s.buf.nodeEnds, len(s.nodes))
	s.nodeVer = sized(s.buf.nodeVer, len(s.nodes))
	s.buf.nodeEnds, s.buf.nodeVer = s.ends, s.nodeVer
	clear(s.nodeVer)
	for k := range s.ends {
		s.ends[k].version = ^uint32(0)
	}
	s.blockVer = sized(s.buf.blockVer, len(s.blockOrder))
	s.blockFits = sized(s.buf.blockFits, len(s.blockOrder))
	s.buf.blockVer, s.buf.blockFits = s.blockVer, s.blockFits
	clear(s.blockVer)
	for k := range s.blockFits {
		s.blockFits[k].set = false
	}
}

// nodeRep is one replica of a running workload on a node.
type nodeRep struct {
	run  int32
	gpus []int
}

// indexReplicas lists each node's running replicas, in run order, in one
// buffer (gpuEnds reads a node's replicas, not every replica of the runs
// touching it: a gang has many).
func (s *snapshot) indexReplicas() {
	count := make([]int32, len(s.nodes)+1)
	total := 0
	for ri := range s.run {
		for _, rp := range s.replicas[ri] {
			count[rp.node+1]++
			total++
		}
	}
	for i := 1; i < len(count); i++ {
		count[i] += count[i-1]
	}
	flat := make([]nodeRep, total)
	fill := slices.Clone(count[:len(s.nodes)])
	for ri := range s.run {
		for _, rp := range s.replicas[ri] {
			flat[fill[rp.node]] = nodeRep{run: int32(ri), gpus: rp.gpus}
			fill[rp.node]++
		}
	}
	s.nodeReps = make([][]nodeRep, len(s.nodes))
	for i := range s.nodes {
		s.nodeReps[i] = flat[count[i]:count[i+1]:count[i+1]]
	}
}

// hold records the fit as a hold: its nodes' GPUs are kept for the
// planned start (see mayUseHeld), and later plans treat them as taken.
func (s *snapshot) hold(f *planFit) *PlannedStart {
	cl := f.cl
	start := s.in.Now.Add(f.start)
	if s.holdsAt == nil {
		s.holdsAt = make([][]int32, len(s.nodes))
		s.heldGPUs = make([]int, len(s.nodes))
		s.slack = make([]int, len(s.nodes))
		s.heldCount = make([]int, len(s.nodes))
	}
	p := &PlannedStart{Start: start, Block: f.block, Flavor: cl.cand.model, Region: cl.cand.region}
	h := int32(len(s.holds))
	s.holdSum = append(s.holdSum, make([]int, len(s.pools)))
	s.holds = append(s.holds, hold{w: cl.w, tenant: cl.tenant, prio: cl.w.Priority, within: cl.within, start: start, plan: p})
	type ending struct {
		at time.Duration
		id workload.ID
	}
	var ends []ending
	seen := map[int]bool{}
	reps := map[int]int{}
	var order []int // the fit's nodes, first use first
	for _, i := range f.nodes {
		if reps[i] == 0 {
			order = append(order, i)
		}
		reps[i]++
	}
	for _, i := range order {
		p.Nodes++
		g := reps[i] * cl.count
		free := 0 // GPUs wholly free by the start, before this hold
		for _, e := range s.gpuEnds(cl, i) {
			if e <= f.start {
				free++
			}
		}
		if len(s.holdsAt[i]) == 0 {
			s.slack[i] = free - s.heldGPUs[i] - g
		} else {
			s.slack[i] = min(s.slack[i], free-s.heldGPUs[i]) - g
		}
		s.heldGPUs[i] += g
		s.touchBlock(i)
		if len(s.holdsAt[i]) == 1 { // from now on visited by heldFree, not summed
			s.holdSum[s.holdsAt[i][0]][s.nodes[i].pool] -= s.heldCount[i]
			s.heldCount[i] = 0
			s.multiHeld = append(s.multiHeld, i)
		}
		s.holdsAt[i] = append(s.holdsAt[i], h)
		s.recount(i)
		for _, ri := range s.nodes[i].running {
			r := &s.run[ri]
			if r.evicted || seen[ri] {
				continue
			}
			seen[ri] = true
			if _, ok := s.allowed(cl, ri); ok && !s.in.Options.DisablePreemption {
				p.Evicts++
				continue
			}
			if end, _ := s.runEnd(ri); end > 0 && end <= f.start {
				ends = append(ends, ending{end, r.w.Name})
			}
		}
		if s.freshAt != nil {
			for _, fi := range s.freshAt[i] {
				if fr := s.fresh[fi]; fr.end <= f.start && !slices.ContainsFunc(ends, func(e ending) bool { return e.id == fr.id }) {
					ends = append(ends, ending{fr.end, fr.id})
				}
			}
		}
	}
	slices.SortFunc(ends, func(a, b ending) int { // the last to end first
		return cmp.Or(cmp.Compare(b.at, a.at), cmp.Compare(a.id, b.id))
	})
	p.EndingCount = len(ends)
	for _, e := range ends[:min(len(ends), maxEndingNames)] {
		p.Ending = append(p.Ending, e.id)
	}
	s.setThresholds()
	return p
}

// mayUseHeld reports whether the claim may use node i's held GPUs: it is
// within its tenant's guarantee (a guarantee is a promise, a plan is not),
// or every hold there is its own, or it is expected to end by the hold's
// start, or the hold's workload could evict it then within the honour
// window.
func (s *snapshot) mayUseHeld(cl *claim, i int) bool {
	if cl.within {
		return true
	}
	for _, hi := range s.holdsAt[i] {
		if !s.mayUseHold(cl, &s.holds[hi]) {
			return false
		}
	}
	return true
}

// mayUseHold reports whether the claim may use the GPUs of hold h (see
// mayUseHeld; the guarantee aside).
func (s *snapshot) mayUseHold(cl *claim, h *hold) bool {
	if h.w == cl.w {
		return true
	}
	if rt := s.runtime(cl.w); rt > 0 && !s.in.Now.Add(rt).After(h.start) {
		return true
	}
	return s.heldEvicts(h, cl)
}

// heldEvicts reports whether the hold's workload could evict the claim,
// once placed, at its planned start (as allowed would then): a borrower
// of the holder's guarantee, or preemptible work of lower priority of its
// tenant or borrowing; and the claim leaves within the honour window.
func (s *snapshot) heldEvicts(h *hold, cl *claim) bool {
	if s.in.Options.DisablePreemption {
		return false
	}
	if hw := s.in.Options.HonourWindow; hw > 0 && ExitTime(cl.w) > hw {
		return false
	}
	if h.within && !cl.within && h.tenant != cl.tenant {
		return true
	}
	return cl.w.Preemptible && cl.w.Priority < h.prio && (cl.tenant == h.tenant || !cl.within)
}

// heldFree sums the wholly free GPUs on the claim's pools' nodes that are
// held for planned starts it may not use (nil when none): the nodes' free
// GPUs beyond their slack. A node held for one plan is counted in its
// hold's per-pool sum (kept by recount as the node's GPUs and slack
// change), so that a claim that fails costs a pass over the holds, not
// over the held nodes; nodes held for several plans are visited.
func (s *snapshot) heldFree(cl *claim) *PlanHold {
	if cl.within {
		return nil // a guarantee ignores holds (mayUseHeld)
	}
	var h *PlanHold
	add := func(n int, start time.Time) {
		if h == nil {
			h = &PlanHold{Start: start}
		}
		h.Free += resource.GPUs(n)
		if start.Before(h.Start) {
			h.Start = start
		}
	}
	// ok[hi]: 0 not asked yet, 1 the claim may use hold hi, 2 not.
	ok := sized(s.holdOK, len(s.holds))
	clear(ok)
	s.holdOK = ok
	mayUse := func(hi int) bool {
		if ok[hi] == 0 {
			ok[hi] = 2
			if s.mayUseHold(cl, &s.holds[hi]) {
				ok[hi] = 1
			}
		}
		return ok[hi] == 1
	}
	for hi := range s.holds {
		n := 0
		for _, pi := range cl.pools {
			n += s.holdSum[hi][pi]
		}
		if n > 0 && !mayUse(hi) {
			add(n, s.holds[hi].start)
		}
	}
	for _, i := range s.multiHeld {
		if !s.inPools(cl, i) {
			continue
		}
		usable := true
		start := s.holds[s.holdsAt[i][0]].start
		for _, hi := range s.holdsAt[i] {
			usable = mayUse(int(hi)) && usable
			if st := s.holds[hi].start; st.Before(start) {
				start = st
			}
		}
		if n := s.nodes[i].whole - max(s.slack[i], 0); !usable && n > 0 {
			add(n, start)
		}
	}
	return h
}

// recount updates node i's share of its hold's per-pool sum (heldFree)
// after its free GPUs, its slack or its holds changed.
func (s *snapshot) recount(i int) {
	hs := s.holdsAt[i]
	if len(hs) != 1 {
		return // unheld, or held for several plans (visited by heldFree)
	}
	n := max(s.nodes[i].whole-max(s.slack[i], 0), 0)
	s.holdSum[hs[0]][s.nodes[i].pool] += n - s.heldCount[i]
	s.heldCount[i] = n
}

// heldReplicas bounds how many replicas of the claim node i may take given
// its holds: no bound when it has none or the claim may use held GPUs;
// otherwise its slack (whole GPUs free at every hold's start beyond what
// the holds need), and none for a share of a GPU.
func (s *snapshot) heldReplicas(cl *claim, i int) int {
	if s.holdsAt == nil || len(s.holdsAt[i]) == 0 || s.mayUseHeld(cl, i) {
		return math.MaxInt
	}
	if cl.perGPU < resource.PerGPU {
		return 0
	}
	return max(s.slack[i], 0) / cl.count
}

// useSlack charges a replica placed on node i to its slack when it may
// not use held GPUs (journaled).
func (s *snapshot) useSlack(cl *claim, i int) {
	if s.holdsAt == nil || len(s.holdsAt[i]) == 0 || s.mayUseHeld(cl, i) {
		return
	}
	s.slack[i] -= cl.count
	s.recount(i)
	s.journal = append(s.journal, change{op: opSlack, node: i, delta: int32(cl.count)})
}

// recordFresh remembers where the placements of a committed claim sit and
// when they are expected to end, for later plans in the cycle.
func (s *snapshot) recordFresh(cl *claim, placed []Placement) {
	if !s.planning() {
		return
	}
	if s.freshAt == nil {
		s.freshAt = make([][]int32, len(s.nodes))
	}
	end := never
	if rt := s.runtime(cl.w); rt > 0 {
		end = rt
	}
	for _, p := range placed {
		n, ok := s.in.Fleet.Node(p.Node)
		if !ok {
			continue
		}
		s.freshAt[n.Index] = append(s.freshAt[n.Index], int32(len(s.fresh)))
		s.fresh = append(s.fresh, freshRep{id: cl.w.Name, gpus: p.GPUs, end: end})
	}
}

// setThresholds sorts the instants at which a workload's expected end
// changes where it may go (holds' starts, upcoming reservations' starts):
// workloads whose ends fall between the same two are alike (timeClass).
func (s *snapshot) setThresholds() {
	th := s.thresholds[:0]
	for i := range s.in.Reservations {
		if r := &s.in.Reservations[i]; r.Upcoming(s.in.Now) {
			th = append(th, r.Start.Sub(s.in.Now))
		}
	}
	for _, h := range s.holds {
		th = append(th, h.start.Sub(s.in.Now))
	}
	slices.Sort(th)
	s.thresholds = slices.Compact(th)
}

// timeClass is which of the thresholds w's expected end (Now + runtime)
// lies beyond: workloads of one class are decided alike. Unknown runtime
// is its own class (-1).
func (s *snapshot) timeClass(w *workload.Workload) int {
	rt := s.runtime(w)
	if rt <= 0 {
		return -1
	}
	// The first threshold t ≥ rt (it ends by then), by binary search.
	lo, hi := 0, len(s.thresholds)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.thresholds[m] < rt {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// timed reports whether expected runtimes decide anything this cycle:
// some reservation is upcoming or some capacity is held.
func (s *snapshot) timed() bool { return s.upcoming || len(s.holds) > 0 }
