package score

import "math"

// ArbiterConfig tunes Arbiter's default scorer.
type ArbiterConfig struct {
	// Exact compares fragmentation changes at full precision instead of
	// FGD's trunc(100·σ(ΔF/1000)), which merges changes closer than ~40
	// milli into ties.
	Exact bool
	// PackWeight (with Exact) adds PackWeight × (free GPU milli left on the
	// node) as a penalty, in milli of fragmentation.
	PackWeight float64
	// TieBestFit breaks ties of the node score by the least free GPU milli
	// left.
	TieBestFit bool
	// TieCPUOnly breaks ties of the node score for CPU-only pods by the
	// least free GPU milli on the node, so that CPU-only pods go where they
	// strand the fewest GPUs.
	TieCPUOnly bool
	// RawGPU picks a sharing pod's GPU by the best raw fragmentation change
	// (ties: lowest index) instead of the lowest index reaching the best
	// truncated score.
	RawGPU bool
}

// DefaultArbiterConfig is the configuration of the "arbiter" scorer.
var DefaultArbiterConfig = ArbiterConfig{RawGPU: true}

// Arbiter is Arbiter's default scorer.
type Arbiter struct {
	fm  fragModel
	cfg ArbiterConfig
}

// NewArbiter returns Arbiter's default scorer for the given typical pods.
func NewArbiter(typical []TypicalPod) *Arbiter {
	return NewArbiterWith(typical, DefaultArbiterConfig)
}

// NewArbiterWith returns Arbiter's scorer with a custom configuration.
func NewArbiterWith(typical []TypicalPod, cfg ArbiterConfig) *Arbiter {
	return &Arbiter{fm: newFragModel(typical), cfg: cfg}
}

// Name implements Scorer.
func (*Arbiter) Name() string { return "arbiter" }

// tieRoom is the room left below the node score for the tie-break.
const tieRoom = 1 << 20

// merit returns the node-level merit of a fragmentation change d = F_before
// − F_after with left free GPU milli left.
func (s *Arbiter) merit(d float64, left int64) int64 {
	if !s.cfg.Exact {
		return int64(sigmoid(d/1000) * 100)
	}
	return int64(math.Round((d - s.cfg.PackWeight*float64(left)) * 1000))
}

// Score implements Scorer.
func (s *Arbiter) Score(n *Node, r *Request, gpus []int) (int64, []int) {
	model := s.fm.modelBit(n.Model)
	before := s.fm.frag(n.CPUFree, n.GPUFree, model)
	var buf [maxStackGPUs]int64
	tmp := buf[:0]
	if len(n.GPUFree) > maxStackGPUs {
		tmp = make([]int64, 0, len(n.GPUFree))
	}
	tmp = append(tmp, n.GPUFree...)
	c := n.CPUFree - r.CPU
	left := n.FreeGPUMilli() - r.GPUDemand()
	var sc int64
	if r.Sharing() {
		pick := -1
		var bestRaw float64
		for j, f := range n.GPUFree {
			if f < r.Milli || seenBefore(n.GPUFree, j) {
				continue
			}
			tmp[j] -= r.Milli
			d := before - s.fm.frag(c, tmp, model)
			tmp[j] = f
			m := s.merit(d, left)
			switch {
			case pick < 0:
				pick, bestRaw, sc = j, d, m
			case s.cfg.RawGPU && d > bestRaw, !s.cfg.RawGPU && m > sc:
				pick, bestRaw = j, d
			}
			sc = max(sc, m)
		}
		if pick >= 0 {
			gpus = append(gpus, pick)
		}
	} else {
		start := len(gpus)
		if r.UsesGPU() {
			gpus = PickLowest(n.GPUFree, r.Milli, r.GPUs, gpus)
			for _, j := range gpus[start:] {
				tmp[j] -= r.Milli
			}
		}
		sc = s.merit(before-s.fm.frag(c, tmp, model), left)
	}
	switch {
	case s.cfg.TieBestFit, s.cfg.TieCPUOnly && !r.UsesGPU():
		sc = sc*tieRoom - left
	case s.cfg.TieCPUOnly:
		sc = sc * tieRoom
	}
	return sc, gpus
}
