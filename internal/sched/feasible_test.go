package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// TestOneNodePredicate (issue 13): every node search agrees with the one
// node-feasibility predicate (nodeAdmits, counted by replicasFit). On random worlds, half-filled by
// a first cycle, with CPU and memory asks up to a whole node's: bestNode
// and bestNodeIn return a node that fits, or -1 only when no node in the
// claim's pools fits; fits is replicasFit > 0 and replicasNow is
// replicasFit of the node's room now; and a block pickBlock
// chooses has room for the gang by replicasFit's count.
func TestOneNodePredicate(t *testing.T) {
	for seed := uint64(0); seed < 60; seed++ {
		in, _ := propertyCase(seed)
		rng := rand.New(rand.NewPCG(seed, 13))
		s, _ := newSnapshot(&in)
		s.evictUnusable(&Plan{})
		var all []int
		for i := range s.nodes {
			all = append(all, i)
		}
		for _, w0 := range in.Workloads {
			if w0.Running != nil || len(w0.Flavors) == 0 || len(w0.Regions) == 0 {
				continue
			}
			ti, ok := s.tree.Lookup(w0.Tenant)
			if !ok || w0.GPUs <= 0 {
				continue
			}
			w := *w0
			if n := in.Fleet.Nodes; len(n) > 0 && rng.IntN(2) == 0 {
				w.CPU = resource.MilliCPU(rng.Int64N(int64(n[0].CPU) + 1))
				w.Memory = resource.MiB(rng.Int64N(int64(n[0].Memory) + 1))
			}
			for _, c := range candidates(&w) {
				pools := s.regionModel[tenancy.Key{Model: c.model, Region: c.region}]
				cl := s.newClaim(&w, ti, c)
				cl.pools = s.eligiblePools(cl, pools)
				name := fmt.Sprintf("seed %d %s at %s", seed, w.Name, c)
				anyFits := false
				for i := range s.nodes {
					ns := &s.nodes[i]
					f := s.fits(cl, i)
					n := s.replicasFit(cl, i, ns.free, s.layoutsOf(i), int64(ns.cpu), int64(ns.mem))
					if f != (n > 0) {
						t.Fatalf("%s: fits(%d) disagrees with replicasFit", name, i)
					}
					if now := s.replicasNow(cl, i); now != n {
						t.Fatalf("%s: replicasNow(%d) = %d, replicasFit of its room now %d", name, i, now, n)
					}
					anyFits = anyFits || (f && s.inPools(cl, i))
				}
				if i := s.bestNode(cl); (i < 0) == anyFits || (i >= 0 && !s.fits(cl, i)) {
					t.Fatalf("%s: bestNode = %d, some node fits: %v", name, i, anyFits)
				}
				if i := s.bestNodeIn(cl, all); (i < 0) == anyFits || (i >= 0 && !s.fits(cl, i)) {
					t.Fatalf("%s: bestNodeIn = %d, some node fits: %v", name, i, anyFits)
				}
				if !w.Gang() || w.Replicas < 2 {
					continue
				}
				if b, ok := s.pickBlock(cl); ok {
					room := 0
					for _, i := range s.blocks[b] {
						if s.inPools(cl, i) {
							ns := &s.nodes[i]
							room += s.replicasFit(cl, i, ns.free, s.layoutsOf(i), int64(ns.cpu), int64(ns.mem))
						}
					}
					if room < w.Replicas {
						t.Fatalf("%s: pickBlock chose %s with room for %d of %d", name, b, room, w.Replicas)
					}
				}
			}
		}
	}
}
