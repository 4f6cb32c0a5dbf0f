package sched

import (
	"slices"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/mig"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Cache keeps what a snapshot derives from the fleet, partitions,
// reservations and down nodes alone, and whether any workload names pools
// (which pool each node is in, the blocks), so that repeated cycles over
// the same ones — the simulator's — skip rebuilding it; and the nodes as
// the last cycle's running work left them, so that the next cycle applies
// only the runs that ended or started (base.go). It is a memo: a Plan is
// the same with or without it, provided the caller keeps its contract:
// a running workload's Assignment (its replicas and their GPU lists) is
// not changed in place between cycles; a new placement is a new
// Assignment, as Apply and the simulator make it. The zero value is ready
// to use; a Cache must not be shared between goroutines.
type Cache struct {
	key  cacheKey
	skel *skeleton
	buf  scratch
}

// scratch holds the buffers of the cache's last snapshot for the next one
// to reuse: a cycle's snapshots are built one after another, and each is
// dead once the next is built, so none of their memory is shared. Every
// buffer is overwritten (or cleared) before it is read.
type scratch struct {
	nodes    []nodeState
	backing  []int32
	layouts  []uint8 // MIG layouts, laid out as backing (nil without MIG nodes)
	run      []runState
	replicas [][]replicaAt
	count    []int // indexRunning
	running  []int // indexRunning
	group    []int // classifyBorrowers
	borrow   []borrowKey
	items    []orderItem
	itemIdx  []int32
	slots    []slotAt        // planned starts
	ends     []time.Duration // planned starts
	nodeEnds []nodeEnd       // planned starts (snapshot.ends)
	nodeVer  []uint32        // planned starts (snapshot.nodeVer)
	// planned gangs (snapshot.blockVer, blockFits)
	blockVer  []uint32
	blockFits []blockFit
	pending   []*workload.Workload
	// base is the last snapshot's base (base[0]) and the one before
	// (base[1]), whose buffers the next snapshot reuses; match is
	// holdFrom's.
	base     [2]baseState
	match    []int32
	runningW []*workload.Workload // holdFrom's running workloads
}

// scratchFor returns the buffers a snapshot of in may reuse: the cache's,
// or empty ones without a cache.
func scratchFor(in *Input) *scratch {
	if in.Cache == nil {
		return &scratch{}
	}
	return &in.Cache.buf
}

// sized returns b with length n, reusing its array when it is big enough.
// The elements are not cleared.
func sized[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

type cacheKey struct {
	fleet        *fleet.Fleet
	partitions   *tenancy.Partition
	nPartitions  int
	reservations *tenancy.Reservation
	active       string // which reservations have pools, one byte each: 1 active, 2 upcoming (bound, before Start)
	down         []fleet.NodeID
	cordoned     []fleet.NodeID
	byLabel      bool // pools split by PoolLabel
}

// skeleton is the part of a snapshot that depends on no workload (but for
// whether one names pools).
type skeleton struct {
	nodes       []nodeState // free points into backing; no running work
	backing     []int32
	layouts     []uint8 // MIG-mode nodes' layouts, laid out as backing; nil when there are none
	offsets     []int   // start of each node's GPUs in backing
	pools       []pool
	poolIdx     map[poolKey]int
	regionModel map[tenancy.Key][]int
	blocks      map[fleet.BlockID][]int
	blockOrder  []fleet.BlockID
	// regionBlocks lists, per region, its blocks (blockOrder indices, in
	// that order; a block's region is its first node's); blockNodes are
	// the nodes of each block, by blockOrder index.
	regionBlocks map[string][]int32
	blockNodes   [][]int
	nodeBlock    []int32 // per node, its block's blockOrder index
	// blockPool is, per block, the pool all its nodes are in (-1: none is
	// in a pool), or mixedPools: a gang's block searches skip a block
	// outside the claim's pools without reading its nodes.
	blockPool []int32
}

// mixedPools is a blockPool whose nodes are in more than one pool (or
// some in none).
const mixedPools = -2

func keyFor(in *Input) cacheKey {
	k := cacheKey{fleet: in.Fleet, nPartitions: len(in.Partitions), down: in.Down, cordoned: in.Cordoned, byLabel: poolConstrained(in)}
	if len(in.Partitions) > 0 {
		k.partitions = &in.Partitions[0]
	}
	if len(in.Reservations) > 0 {
		k.reservations = &in.Reservations[0]
		b := make([]byte, len(in.Reservations))
		for i := range in.Reservations {
			switch r := &in.Reservations[i]; {
			case r.Active(in.Now):
				b[i] = 1
			case r.Upcoming(in.Now):
				b[i] = 2
			}
		}
		k.active = string(b)
	}
	return k
}

func (a cacheKey) equal(b cacheKey) bool {
	return a.fleet == b.fleet && a.partitions == b.partitions && a.nPartitions == b.nPartitions &&
		a.reservations == b.reservations && a.active == b.active && slices.Equal(a.down, b.down) && slices.Equal(a.cordoned, b.cordoned) && a.byLabel == b.byLabel
}

// poolConstrained reports whether some workload has a pool constraint:
// only then are pools split by the nodes' PoolLabel (so that work without
// one is placed exactly as before, best fit over all of a model's nodes
// in a region).
func poolConstrained(in *Input) bool {
	if in.Options.splitPools {
		return true
	}
	for _, w := range in.Workloads {
		if len(w.Pools) > 0 {
			return true
		}
	}
	return false
}

// skeleton returns the input's skeleton, from the cache when it matches.
func (c *Cache) skeleton(in *Input) *skeleton {
	if c == nil {
		return buildSkeleton(in, poolConstrained(in))
	}
	k := keyFor(in)
	if c.skel == nil || !c.key.equal(k) {
		k.down, k.cordoned = slices.Clone(k.down), slices.Clone(k.cordoned)
		c.key, c.skel = k, buildSkeleton(in, k.byLabel)
	}
	return c.skel
}

// copyNodes makes nodes, with their GPUs' free milli in backing and MIG
// layouts in layouts (laid out as sk's), the snapshot's own.
func (s *snapshot) copyNodes(sk *skeleton, nodes []nodeState, backing []int32, layouts []uint8) {
	s.nodes = append(s.buf.nodes[:0], nodes...)
	own := append(s.buf.backing[:0], backing...)
	s.buf.nodes, s.buf.backing = s.nodes, own
	for i := range s.nodes {
		n := s.nodes[i].node.GPUs
		off := sk.offsets[i]
		s.nodes[i].free = own[off : off+n : off+n]
	}
	s.layouts = nil
	if layouts != nil {
		s.layouts = append(s.buf.layouts[:0], layouts...)
		s.buf.layouts = s.layouts
	}
}

// instantiate copies a skeleton into the snapshot's own mutable state.
func (s *snapshot) instantiate(sk *skeleton) {
	s.copyNodes(sk, sk.nodes, sk.backing, sk.layouts)
	s.pools = make([]*pool, len(sk.pools))
	for i := range sk.pools {
		p := sk.pools[i] // nodes is shared and never written
		s.pools[i] = &p
	}
	s.poolIdx, s.regionModel = sk.poolIdx, sk.regionModel
	s.blocks, s.blockOrder = sk.blocks, sk.blockOrder
	s.regionBlocks, s.blockNodes, s.nodeBlock, s.blockPool = sk.regionBlocks, sk.blockNodes, sk.nodeBlock, sk.blockPool
}

// buildSkeleton splits pools by PoolLabel when byLabel (poolConstrained).
func buildSkeleton(in *Input, byLabel bool) *skeleton {
	f := in.Fleet
	s := &skeleton{
		nodes:       make([]nodeState, len(f.Nodes)),
		offsets:     make([]int, len(f.Nodes)),
		poolIdx:     map[poolKey]int{},
		regionModel: map[tenancy.Key][]int{},
		blocks:      map[fleet.BlockID][]int{},
	}
	down := make(map[fleet.NodeID]bool, len(in.Down))
	for _, id := range in.Down {
		down[id] = true
	}
	cordoned := make(map[fleet.NodeID]bool, len(in.Cordoned))
	for _, id := range in.Cordoned {
		cordoned[id] = true
	}
	// Which pool each node belongs to: an active or upcoming reservation
	// (bound, before its Start: see eligiblePools) first, then a partition,
	// else the shared pool.
	label := func(n *fleet.Node) string {
		if byLabel {
			return n.Labels[PoolLabel]
		}
		return ""
	}
	access := make([]poolKey, len(f.Nodes))
	migMode := func(n *fleet.Node) bool { return false }
	for _, n := range f.Nodes {
		if n.MIGMode() {
			migMode = func(n *fleet.Node) bool {
				_, ok := mig.For(string(n.Model))
				return ok && n.MIGMode()
			}
			break
		}
	}
	anyMIG := false
	for i, n := range f.Nodes {
		access[i] = poolKey{region: n.Region, model: n.Model, kind: poolShared, label: label(n), mig: migMode(n)}
		anyMIG = anyMIG || access[i].mig
	}
	for pi, p := range in.Partitions {
		for _, b := range p.Blocks {
			for _, n := range f.BlockNodes(b) {
				access[n.Index] = poolKey{region: n.Region, model: n.Model, kind: poolPartition, id: pi, label: label(n), mig: migMode(n)}
			}
		}
		for _, id := range p.Nodes {
			if n, ok := f.Node(id); ok {
				access[n.Index] = poolKey{region: n.Region, model: n.Model, kind: poolPartition, id: pi, label: label(n), mig: migMode(n)}
			}
		}
	}
	for ri := range in.Reservations {
		r := &in.Reservations[ri]
		if !r.Active(in.Now) && !r.Upcoming(in.Now) {
			continue
		}
		for _, id := range r.Nodes {
			if n, ok := f.Node(id); ok {
				access[n.Index] = poolKey{region: n.Region, model: n.Model, kind: poolReservation, id: ri, label: label(n), mig: migMode(n)}
			}
		}
	}
	backing := make([]int32, 0, 8*len(f.Nodes))
	lastKey, lastPool := poolKey{}, -1
	var lastBlock fleet.BlockID
	lastBlockSet := false
	for i, n := range f.Nodes {
		start := len(backing)
		for g := 0; g < n.GPUs; g++ {
			backing = append(backing, resource.PerGPU)
		}
		ns := &s.nodes[i]
		ns.node = n
		ns.free = backing[start:len(backing):len(backing)]
		s.offsets[i] = start
		ns.whole = n.GPUs
		ns.cpu, ns.mem = n.CPU, n.Memory
		ns.pool = -1
		if access[i].mig {
			ns.migAt = int32(start + 1)
		}
		if !lastBlockSet || n.Block != lastBlock {
			if _, ok := s.blocks[n.Block]; !ok {
				s.blockOrder = append(s.blockOrder, n.Block)
			}
			lastBlock, lastBlockSet = n.Block, true
		}
		s.blocks[n.Block] = append(s.blocks[n.Block], i)
		if down[n.ID] {
			ns.down = true
			continue
		}
		if cordoned[n.ID] {
			continue // in no pool: nothing new is placed here; its running work stays
		}
		k := access[i]
		pi, ok := lastPool, lastPool >= 0 && k == lastKey
		if !ok {
			pi, ok = s.poolIdx[k]
		}
		lastKey, lastPool = k, pi
		if !ok {
			pi = len(s.pools)
			s.poolIdx[k] = pi
			s.pools = append(s.pools, pool{key: k})
			rm := tenancy.Key{Model: n.Model, Region: n.Region}
			s.regionModel[rm] = append(s.regionModel[rm], pi)
			lastPool = pi
		}
		p := &s.pools[pi]
		ns.pool, ns.pos = pi, len(p.nodes)
		p.nodes = append(p.nodes, i)
		p.maxGPUs = max(p.maxGPUs, n.GPUs)
	}
	s.backing = backing
	if anyMIG {
		s.layouts = make([]uint8, len(backing))
	}
	s.regionBlocks = map[string][]int32{}
	s.blockNodes = make([][]int, len(s.blockOrder))
	s.nodeBlock = make([]int32, len(s.nodes))
	s.blockPool = make([]int32, len(s.blockOrder))
	for bi, b := range s.blockOrder {
		nodes := s.blocks[b]
		s.blockNodes[bi] = nodes
		s.blockPool[bi] = -1
		for k, i := range nodes {
			s.nodeBlock[i] = int32(bi)
			if p := int32(s.nodes[i].pool); k == 0 {
				s.blockPool[bi] = p
			} else if p != s.blockPool[bi] {
				s.blockPool[bi] = mixedPools
			}
		}
		if len(nodes) > 0 {
			r := s.nodes[nodes[0]].node.Region
			s.regionBlocks[r] = append(s.regionBlocks[r], int32(bi))
		}
	}
	return s
}
