package openb

import "math/rand"

// Tune is the arrived GPU demand the reference builds, as a multiple of the
// cluster's GPU capacity.
const Tune = 1.3

// Arrivals is one seed's input to the replay: the pods in the order they
// arrive and the node ranks that break score ties.
type Arrivals struct {
	Seed   int64
	Order  []int32 // indices into Workload.Pods, in arrival order
	Rank   []int   // Rank[i] is the rank of Cluster.Nodes[i]; lower wins ties
	Demand int64   // Σ k·m over Order
	// Rand is the seed's source, positioned after the draws above; the
	// random policy keeps drawing from it during placement.
	Rand *rand.Rand
}

// NewArrivals draws the pod sequence and node ranks of one seed exactly as
// the reference simulator does (OPENB-METHOD.md §2), all from one math/rand
// source seeded with seed:
//
//  1. one Int63, thrown away;
//  2. Shuffle of the name-sorted pods;
//  3. if their demand S is below T = Tune × capacity: draw i = Intn(n) from
//     the name-sorted pods, stop (discarding the draw) when S + m_i > T —
//     note m_i, the per-GPU milli, not k_i·m_i — else append pod i and add
//     k_i·m_i; if S is above T: remove the element at Intn(len) until S ≤ T;
//  4. ten Int63, thrown away (informer start-up in the reference);
//  5. Perm(len(nodes)) over the name-sorted nodes: node i gets rank perm[i].
func NewArrivals(c *Cluster, w *Workload, seed int64) *Arrivals {
	rng := rand.New(rand.NewSource(seed))
	rng.Int63()
	n := len(w.Pods)
	order := make([]int32, n, n+n/2)
	for i := range order {
		order[i] = int32(i)
	}
	rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })

	target := float64(c.GPUMilli) * Tune
	s := w.Demand
	switch {
	case float64(s) < target && n > 0:
		for {
			i := rng.Intn(n)
			p := &w.Pods[i].Req
			if float64(s+p.Milli) > target {
				break
			}
			order = append(order, int32(i))
			s += p.GPUDemand()
		}
	case float64(s) > target:
		for float64(s) > target && len(order) > 0 {
			j := rng.Intn(len(order))
			s -= w.Pods[order[j]].Req.GPUDemand()
			order = append(order[:j], order[j+1:]...)
		}
	}
	for range 10 {
		rng.Int63()
	}
	return &Arrivals{Seed: seed, Order: order, Rank: rng.Perm(len(c.Nodes)), Demand: s, Rand: rng}
}
