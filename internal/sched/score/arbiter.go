package score

// Arbiter is Arbiter's default scorer. It keeps FGD's node score, the
// truncated fragmentation gradient trunc(100·σ((F_before − F_after)/1000)),
// whose coarse ties are what lets the caller's tie-break pack pods onto
// few nodes, and changes two decisions FGD makes blindly:
//
//   - GPU choice: a sharing pod goes to the GPU with the best raw
//     fragmentation change (lowest index on exact ties), not to the lowest
//     index that reaches the best truncated score;
//   - CPU-only pods: among nodes of equal score, those with fewer whole free
//     GPUs come first (none, then one, then two or more), so that CPU goes
//     from nodes whose GPUs are already taken rather than from nodes whose
//     whole GPUs later GPU pods will need CPU to use.
//
// The same settings serve every workload; all it knows of the workload is
// the typical pods, as FGD.
type Arbiter struct{ fm fragModel }

// NewArbiter returns Arbiter's default scorer for the given typical pods.
func NewArbiter(typical []TypicalPod) *Arbiter { return &Arbiter{fm: newFragModel(typical)} }

// Name implements Scorer.
func (*Arbiter) Name() string { return "arbiter" }

// arbiterFreeGPUCap is the number of whole free GPUs from which nodes count
// as equally valuable in the CPU-only tie-break.
const arbiterFreeGPUCap = 2

// Score implements Scorer. The score is FGD's node score times 4 minus the
// tie-break (0..2, CPU-only pods only), so it orders nodes by FGD's score
// first.
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
	var d float64 // F_before − F_after of the chosen placement
	switch {
	case r.Sharing():
		pick := -1
		for j, f := range n.GPUFree {
			if f < r.Milli || seenBefore(n.GPUFree, j) {
				continue
			}
			tmp[j] -= r.Milli
			dj := before - s.fm.frag(c, tmp, model)
			tmp[j] = f
			if pick < 0 || dj > d {
				pick, d = j, dj
			}
		}
		if pick >= 0 {
			gpus = append(gpus, pick)
		}
	default:
		start := len(gpus)
		if r.UsesGPU() {
			gpus = PickLowest(n.GPUFree, r.Milli, r.GPUs, gpus)
			for _, j := range gpus[start:] {
				tmp[j] -= r.Milli
			}
		}
		d = before - s.fm.frag(c, tmp, model)
	}
	sc := int64(sigmoid(d/1000)*float64(100)) * (arbiterFreeGPUCap + 2)
	if !r.UsesGPU() {
		sc -= int64(min(n.FullyFreeGPUs(), arbiterFreeGPUCap))
	}
	return sc, gpus
}
