package score

import "math"

// Arbiter is Arbiter's default scorer. It keeps FGD's node score, the
// truncated fragmentation gradient trunc(100·σ((F_before − F_after)/1000)),
// whose coarse ties are what lets the caller's tie-break pack pods onto
// few nodes, and changes two decisions FGD makes blindly:
//
//   - GPU choice: a sharing pod goes to the GPU with the best raw
//     fragmentation change (lowest index on exact ties), not to the lowest
//     index that reaches the best truncated score;
//   - CPU-only pods: among nodes of equal score, first those where the pod's
//     CPU strands fewer whole GPUs (see Stranded), then those with fewer
//     whole free GPUs (none, then one, then two or more), so that CPU goes
//     from nodes whose GPUs are already taken, or that have CPU to spare,
//     rather than from nodes whose free GPUs later GPU pods will need CPU
//     to use.
//
// The same settings serve every workload; all it knows of the workload is
// the typical pods, as FGD.
type Arbiter struct {
	fm fragModel
	// rho is the CPU milli the typical GPU pods ask per GPU milli
	// (Σ p·cpu / Σ p·k·m over the typical pods that use GPUs); +Inf when
	// no typical pod uses a GPU.
	rho float64
}

// NewArbiter returns Arbiter's default scorer for the given typical pods.
func NewArbiter(typical []TypicalPod) *Arbiter {
	var cpu, gpu float64
	for _, t := range typical {
		if t.Milli > 0 && t.GPUs > 0 {
			cpu += t.P * float64(t.CPU)
			gpu += t.P * float64(int64(t.GPUs)*t.Milli)
		}
	}
	s := &Arbiter{fm: newFragModel(typical), rho: math.Inf(1)}
	if gpu > 0 {
		s.rho = cpu / gpu
	}
	return s
}

// Name implements Scorer.
func (*Arbiter) Name() string { return "arbiter" }

// CPUPerGPUMilli returns the CPU milli the typical GPU pods ask per GPU
// milli, the ratio Stranded uses.
func (s *Arbiter) CPUPerGPUMilli() float64 { return s.rho }

// usable returns the free GPU milli that c free CPU can serve when GPU pods
// ask rho CPU per GPU milli.
func (s *Arbiter) usable(c int64, g float64) float64 {
	if s.rho == 0 {
		return g
	}
	return min(g, float64(max(c, 0))/s.rho)
}

// Stranded returns how many whole GPUs of n taking cpu milli-cores strands:
// the free GPU milli that the node's free CPU can serve at the typical GPU
// pods' CPU per GPU milli, before minus after, in whole GPUs rounded down.
// It is 0 on a node without free GPU or with CPU to spare.
func (s *Arbiter) Stranded(n *Node, cpu int64) int {
	g := float64(n.FreeGPUMilli())
	d := s.usable(n.CPUFree, g) - s.usable(n.CPUFree-cpu, g)
	return int(d / MilliPerGPU)
}

// arbiterFreeGPUCap is the number of whole free GPUs from which nodes count
// as equally valuable in the CPU-only tie-break.
const arbiterFreeGPUCap = 2

// arbiterMaxStranded bounds the stranded-GPU key so that the tie-break
// stays below one step of FGD's score.
const arbiterMaxStranded = 64

// Score implements Scorer. The score is FGD's node score times
// (arbiterMaxStranded+1)·(arbiterFreeGPUCap+1) minus, for CPU-only pods,
// the tie-break stranded·(arbiterFreeGPUCap+1) + min(whole free GPUs,
// arbiterFreeGPUCap), so it orders nodes by FGD's score first.
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
	const step = arbiterFreeGPUCap + 1
	sc := int64(sigmoid(d/1000)*float64(100)) * (arbiterMaxStranded + 1) * step
	if !r.UsesGPU() {
		st := int64(min(s.Stranded(n, r.CPU), arbiterMaxStranded))
		sc -= st*step + int64(min(n.FullyFreeGPUs(), arbiterFreeGPUCap))
	}
	return sc, gpus
}
