package score

import "math/rand"

// Random gives one uniformly chosen feasible node the top score (the
// paper's Random). Node choice goes through Choose; Score picks the GPU of a
// sharing pod by reservoir sampling over the GPUs that hold it, one draw per
// such GPU, as the reference does (whole GPUs: lowest-index free ones).
type Random struct{ rng *rand.Rand }

// NewRandom returns a Random drawing from rng.
func NewRandom(rng *rand.Rand) *Random { return &Random{rng: rng} }

// Name implements Scorer.
func (*Random) Name() string { return "random" }

// Choose implements Chooser.
func (s *Random) Choose(candidates int) int { return s.rng.Intn(candidates) }

// Score implements Scorer. Every node scores 0: the choice is Choose's.
func (s *Random) Score(n *Node, r *Request, gpus []int) (int64, []int) {
	if !r.UsesGPU() {
		return 0, gpus
	}
	if !r.Sharing() {
		return 0, PickLowest(n.GPUFree, r.Milli, r.GPUs, gpus)
	}
	pick, cnt := -1, 0
	for j, f := range n.GPUFree {
		if f >= r.Milli {
			cnt++
			if s.rng.Intn(cnt) == 0 {
				pick = j
			}
		}
	}
	if pick >= 0 {
		gpus = append(gpus, pick)
	}
	return 0, gpus
}

// DotProd is the Tetris-style alignment score of the paper (merge/max):
// with node (c/128000, G/8000) and pod (cpu/128000, k·m/8000), the score is
// trunc(100·(1 − dot/2)). GPUs by the best-fit rule.
type DotProd struct{}

// Name implements Scorer.
func (DotProd) Name() string { return "dotprod" }

// Score implements Scorer.
func (DotProd) Score(n *Node, r *Request, gpus []int) (int64, []int) {
	nc := float64(n.CPUFree) / float64(PaperMaxCPUMilli)
	ng := float64(n.FreeGPUMilli()) / float64(PaperMaxGPUMilli)
	pc := float64(r.CPU) / float64(PaperMaxCPUMilli)
	pg := float64(r.GPUDemand()) / float64(PaperMaxGPUMilli)
	var dot float64
	dot += float64(nc * pc)
	dot += float64(ng * pg)
	s := 1 - dot/2
	return int64(float64(100) * s), PickBest(n, r, gpus)
}

// GpuClustering keeps pods of one GPU shape together: with
// b = ⌊25·(8000−G)/8000⌋, b+75 when the pod's shape is the node's only one,
// b+50 when it is one of several, b+25 on a node without GPU pods, b
// otherwise; CPU-only pods score 0. GPUs by the best-fit rule.
type GpuClustering struct{}

// Name implements Scorer.
func (GpuClustering) Name() string { return "gpuclustering" }

// Score implements Scorer.
func (GpuClustering) Score(n *Node, r *Request, gpus []int) (int64, []int) {
	tag := TagOf(r.GPUs, r.Milli)
	if tag == 0 {
		return 0, gpus
	}
	b := int64(25) * (PaperMaxGPUMilli - n.FreeGPUMilli()) / PaperMaxGPUMilli
	switch {
	case n.Tags&tag != 0 && n.Tags == tag:
		b += 75
	case n.Tags&tag != 0:
		b += 50
	case n.Tags == 0:
		b += 25
	}
	return b, PickBest(n, r, gpus)
}

// GpuPacking prefers, in order: GPUs already shared (100 − ⌊Σ free%/10⌋,
// at least 50), fully free GPUs on a used node (50 − count, at least 33),
// then empty nodes (max(33 − g, g)). CPU-only pods score 0. GPUs by the
// best-fit rule.
type GpuPacking struct{}

// Name implements Scorer.
func (GpuPacking) Name() string { return "gpupacking" }

// Score implements Scorer.
func (GpuPacking) Score(n *Node, r *Request, gpus []int) (int64, []int) {
	if !r.UsesGPU() {
		return 0, gpus
	}
	gpus = PickBest(n, r, gpus)
	g := len(n.GPUFree)
	full := n.FullyFreeGPUs()
	if full == g {
		return max(int64(33-g), int64(g)), gpus
	}
	// The first k GPUs with f ≥ m in ascending free order (stable).
	var idx [64]int8
	order := idx[:0]
	for j := range n.GPUFree {
		if j < len(idx) {
			order = append(order, int8(j))
		}
	}
	for a := 1; a < len(order); a++ { // stable insertion sort by free milli
		for b := a; b > 0 && n.GPUFree[order[b]] < n.GPUFree[order[b-1]]; b-- {
			order[b], order[b-1] = order[b-1], order[b]
		}
	}
	need, fullUsed := r.GPUs, 0
	var ratio int64
	for _, j := range order {
		if need == 0 {
			break
		}
		if f := n.GPUFree[j]; f >= r.Milli {
			need--
			ratio += f * 100 / MilliPerGPU
			if f == MilliPerGPU {
				fullUsed++
			}
		}
	}
	if fullUsed > 0 {
		return max(int64(50-fullUsed), 33), gpus
	}
	return max(100-ratio/10, 50), gpus
}

// BestFit prefers the node with the least CPU and GPU left over:
// trunc(100·(1 − (0.5·(c−cpu)/128000 + 0.5·(G−k·m)/8000))). The reference
// then rescales scores min–max to 0..100, which changes neither the winner
// nor the ties, so it is left out. GPUs by the best-fit rule.
type BestFit struct{}

// Name implements Scorer.
func (BestFit) Name() string { return "bestfit" }

// Score implements Scorer.
func (BestFit) Score(n *Node, r *Request, gpus []int) (int64, []int) {
	var s float64
	s += float64(float64(n.CPUFree)-float64(r.CPU)) / float64(PaperMaxCPUMilli) * 0.5
	s += float64(float64(n.FreeGPUMilli())-float64(r.GPUDemand())) / float64(PaperMaxGPUMilli) * 0.5
	return int64((1.0 - s) * 100), PickBest(n, r, gpus)
}
