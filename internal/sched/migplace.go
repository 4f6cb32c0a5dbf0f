package sched

import (
	"math"

	"github.com/arbiterhq/arbiter/internal/mig"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// MIG placement. A node in MIG mode (fleet.Node.MIGMode, of a model
// internal/mig knows) is in pools of its own (poolKey.mig) that only MIG
// claims use. Each of its GPUs has a layout, the memory slices its
// instances occupy (snapshot.layoutsOf); an instance also takes its profile's
// share of the GPU's milli, so that free capacity, quota and the pool
// indexes count it as they count a share of a GPU. Where an instance goes
// is chosen the FGD way: among the GPUs of the claim's pools and the
// starts NVIDIA allows, the one that adds the least fragmentation to its
// GPU (mig.GPU.Best, Frag), then the first node in pool order, the lowest
// GPU index, the lowest start.

// gpuFit says whether candidate c's GPU model can serve w (with a MIG
// profile or a GPU memory) at all: a MIG profile it has, at least w's GPU
// memory; when not, why in at. (Callers test w's fields first: work
// without either pays no call.)
func (s *snapshot) gpuFit(w *workload.Workload, c candidate, at *Blocker) bool {
	b := Blocker{Code: ReasonNoFlavor, Flavor: c.model, Region: c.region, Pools: w.Pools}
	if w.MIG != "" {
		if g, ok := mig.For(string(c.model)); !ok || g.Index(w.MIG) < 0 {
			b.MIG = migName(w.MIG)
			*at = b
			return false
		}
	}
	if w.GPUMemory > 0 {
		m, ok := s.in.Fleet.Catalog.Model(c.model)
		if !ok || resource.MiB(m.MemoryGiB)*1024 < resource.MiB(w.GPUMemory) {
			b.GPUMemory = int32(min(int64(w.GPUMemory), math.MaxInt32)) // Validate bounds it at 1 TiB
			if ok {
				b.ModelMemoryGiB = int32(m.MemoryGiB)
			}
			*at = b
			return false
		}
	}
	return true
}

// noMIGPools reports whether none of the candidate's pools is in MIG mode.
func (s *snapshot) noMIGPools(cl *claim, pools []int) bool {
	for _, pi := range pools {
		if s.pools[pi].key.mig {
			return false
		}
	}
	return true
}

// migSlots is how many instances of the claim's profile the layouts of
// one node's GPUs can still take.
func migSlots(cl *claim, layouts []uint8) int {
	n := 0
	for _, l := range layouts {
		n += cl.mg.Count(mig.Layout(l), cl.prof)
	}
	return n
}

// migBest is where on a node with these layouts an instance of the
// claim's profile goes: the GPU and start of least loss (lowest GPU on
// ties), or gpu -1.
func migBest(cl *claim, layouts []uint8) (gpu, start, loss int) {
	gpu, loss = -1, 0
	for g, l := range layouts {
		st, ls, ok := cl.mg.Best(mig.Layout(l), cl.prof)
		if ok && (gpu < 0 || ls < loss) {
			gpu, start, loss = g, st, ls
		}
	}
	return gpu, start, loss
}

// bestNodeMIG is bestNode for a MIG claim: in pool order, the node whose
// best instance placement adds the least fragmentation, first in the pool
// on ties.
func (s *snapshot) bestNodeMIG(cl *claim) int {
	for _, pi := range cl.pools {
		best, bestLoss := -1, 0
		for _, i := range s.pools[pi].nodes {
			ns := &s.nodes[i]
			if !s.nodeAdmits(cl, i, int64(ns.cpu), int64(ns.mem)) {
				continue
			}
			if g, _, loss := migBest(cl, s.layoutsOf(i)); g >= 0 && (best < 0 || loss < bestLoss) {
				best, bestLoss = i, loss
			}
		}
		if best >= 0 {
			return best
		}
	}
	return -1
}

// assignMIG takes an instance of the claim's profile on node i, where
// migBest puts it.
func (s *snapshot) assignMIG(cl *claim, r, i int) Placement {
	ns := &s.nodes[i]
	g, start, _ := migBest(cl, s.layoutsOf(i))
	mask := uint8(cl.mg.Mask(cl.prof, start))
	gpus := []int{g}
	s.take(i, gpus, cl.perGPU, mask, cl.w.CPU, cl.w.Memory)
	s.useSlack(cl, i)
	return Placement{
		Workload: cl.w.Name, Replica: r, Node: ns.node.ID, GPUs: gpus, Milli: int64(cl.perGPU),
		Flavor: cl.cand.model, Region: cl.cand.region, OnReservation: cl.onRes >= 0,
		MIG: placedMIG(cl.mg.Profiles[cl.prof].Name, start),
	}
}
