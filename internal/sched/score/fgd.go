package score

import (
	"math"
	"sort"
	"strings"
)

// TypicalPod is one request shape of a workload with its share among the
// typical shapes: the "target workload" of FGD.
type TypicalPod struct {
	CPU    int64    // milli-cores
	Milli  int64    // milli per GPU (0 for CPU-only)
	GPUs   int      // k
	Models []string // allowed models, empty for any
	Count  float64  // requests of this shape
	P      float64  // probability among the typical shapes
}

// Spec returns the allowed models joined by '|', the form the reference
// uses as part of the shape's identity and ordering.
func (t *TypicalPod) Spec() string { return strings.Join(t.Models, "|") }

// TypicalPods returns the most frequent request shapes (CPU, milli per GPU,
// GPU count, allowed models; memory is ignored) that together cover at least
// percent % of reqs, as the paper computes them (GetTypicalPods): shapes by
// count, highest first, ties by CPU, milli, GPU count and models, each
// descending; the shape that crosses the threshold is included; the chosen
// shapes' probabilities are renormalised to sum to 1, computed exactly as
// (count/N) / (C/N).
func TypicalPods(reqs []Request, percent int) []TypicalPod {
	type key struct {
		cpu, m int64
		k      int
		spec   string
	}
	counts := map[key]float64{}
	models := map[key][]string{}
	var total float64
	for i := range reqs {
		r := &reqs[i]
		m := r.Milli
		if !r.UsesGPU() {
			m = 0
		}
		kk := key{r.CPU, m, r.GPUs, strings.Join(r.Models, "|")}
		if _, ok := counts[kk]; !ok {
			models[kk] = r.Models
		}
		counts[kk]++
		total++
	}
	list := make([]TypicalPod, 0, len(counts))
	specs := make([]string, 0, len(counts))
	for kk, c := range counts {
		list = append(list, TypicalPod{CPU: kk.cpu, Milli: kk.m, GPUs: kk.k,
			Models: append([]string(nil), models[kk]...), Count: c})
		specs = append(specs, kk.spec)
	}
	idx := make([]int, len(list))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		x, y := &list[idx[a]], &list[idx[b]]
		switch {
		case x.Count != y.Count:
			return x.Count > y.Count
		case x.CPU != y.CPU:
			return x.CPU > y.CPU
		case x.Milli != y.Milli:
			return x.Milli > y.Milli
		case x.GPUs != y.GPUs:
			return x.GPUs > y.GPUs
		}
		return specs[idx[a]] > specs[idx[b]]
	})
	sorted := make([]TypicalPod, len(list))
	for i, j := range idx {
		sorted[i] = list[j]
	}
	expected := float64(percent) * total / 100.0
	var cum float64
	i := 0
	for cum < expected && i < len(sorted) {
		cum += sorted[i].Count
		sorted[i].P = sorted[i].Count / total
		i++
	}
	if i >= len(sorted) {
		return sorted
	}
	out := sorted[:i:i]
	for j := range out {
		out[j].P /= cum / total
	}
	return out
}

// fragKey is a typical pod prepared for fast fragmentation sums.
type fragKey struct {
	cpu, m int64
	k      int
	p      float64
	any    bool   // any model allowed
	allow  uint64 // bit i: model i of fragModels allowed
}

// fragModel measures node fragmentation against typical pods.
type fragModel struct {
	keys   []fragKey
	models []string // models named by some key (at most 64 are told apart)
}

func newFragModel(typical []TypicalPod) fragModel {
	var fm fragModel
	for _, t := range typical {
		fk := fragKey{cpu: t.CPU, m: t.Milli, k: t.GPUs, p: t.P}
		names := 0
		for _, name := range t.Models {
			if name == "" {
				continue
			}
			names++
			i := indexOf(fm.models, name)
			if i < 0 && len(fm.models) < 64 {
				fm.models = append(fm.models, name)
				i = len(fm.models) - 1
			}
			if i >= 0 {
				fk.allow |= 1 << uint(i)
			}
		}
		fk.any = names == 0
		fm.keys = append(fm.keys, fk)
	}
	return fm
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// modelBit returns the bit of a node model among the keys' models (0 when no
// key names it).
func (fm *fragModel) modelBit(model string) uint64 {
	if model == "" {
		return 0
	}
	if i := indexOf(fm.models, model); i >= 0 {
		return 1 << uint(i)
	}
	return 0
}

// Fragment accumulators, in the reference's order.
const (
	accQ1 = iota // lacks GPU and CPU
	accQ2        // lacks GPU (or the part of Q3 GPUs too small for the pod)
	accQ3        // satisfied: left out of the sum
	accQ4        // lacks CPU
	accXL        // CPU-only pod fits: all free GPU is fragment
	accXR        // CPU-only pod does not fit
	accNA        // model not allowed
	numAcc
)

// frag returns the expected fragmented GPU milli of a node with c free CPU
// and the given free GPU milli (NodeGpuShareFragAmountScore): for each
// typical pod, weighted by its probability, the free GPU milli it could not
// use. The float operations follow the reference one by one, so that ties
// come out the same.
func (fm *fragModel) frag(c int64, free []int64, model uint64) float64 {
	var g int64
	for _, f := range free {
		g += f
	}
	if g == 0 {
		return 0
	}
	gf := float64(g)
	var acc [numAcc]float64
	for i := range fm.keys {
		key := &fm.keys[i]
		cpuFits := c >= key.cpu
		if key.m == 0 {
			if cpuFits {
				acc[accXL] += float64(key.p * gf)
			} else {
				acc[accXR] += float64(key.p * gf)
			}
			continue
		}
		if !key.any && key.allow&model == 0 {
			acc[accNA] += float64(key.p * gf)
			continue
		}
		// The reference counts down k and succeeds at the first fitting GPU
		// even when k is 0.
		need := max(key.k, 1)
		var fits int
		var small int64
		for _, f := range free {
			if f >= key.m {
				fits++
			} else {
				small += f
			}
		}
		switch {
		case fits >= need && cpuFits:
			acc[accQ2] += float64(key.p * float64(small))
			acc[accQ3] += float64(key.p * float64(g-small))
		case fits >= need:
			acc[accQ4] += float64(key.p * gf)
		case cpuFits:
			acc[accQ2] += float64(key.p * gf)
		default:
			acc[accQ1] += float64(key.p * gf)
		}
	}
	var out float64
	for i := 0; i < numAcc; i++ {
		if i != accQ3 {
			out += acc[i]
		}
	}
	return out
}

func sigmoid(x float64) float64 { return 1.0 / (1.0 + math.Exp(-x)) }

// maxStackGPUs is the node size up to which scoring needs no allocation.
const maxStackGPUs = 16

// FGD is the paper's fragmentation gradient descent: the score is
// trunc(100·σ((F_before − F_after)/1000)) where F is the node's expected
// fragmented GPU milli under the typical pods. A sharing pod tries every GPU
// that holds it and takes the lowest index reaching the best truncated
// score; other pods take the lowest-index free GPUs.
type FGD struct{ fm fragModel }

// NewFGD returns FGD for the given typical pods (see TypicalPods).
func NewFGD(typical []TypicalPod) *FGD { return &FGD{fm: newFragModel(typical)} }

// Name implements Scorer.
func (*FGD) Name() string { return "fgd" }

// Fragmentation returns the node's expected fragmented GPU milli.
func (s *FGD) Fragmentation(n *Node) float64 {
	return s.fm.frag(n.CPUFree, n.GPUFree, s.fm.modelBit(n.Model))
}

// Score implements Scorer.
func (s *FGD) Score(n *Node, r *Request, gpus []int) (int64, []int) {
	model := s.fm.modelBit(n.Model)
	before := s.fm.frag(n.CPUFree, n.GPUFree, model)
	var buf [maxStackGPUs]int64
	tmp := buf[:0]
	if len(n.GPUFree) > maxStackGPUs {
		tmp = make([]int64, 0, len(n.GPUFree))
	}
	tmp = append(tmp, n.GPUFree...)
	c := n.CPUFree - r.CPU
	if r.Sharing() {
		best, pick := int64(0), -1
		for j, f := range n.GPUFree {
			if f < r.Milli || seenBefore(n.GPUFree, j) {
				continue
			}
			tmp[j] -= r.Milli
			after := s.fm.frag(c, tmp, model)
			tmp[j] = f
			sc := int64(sigmoid((before-after)/1000) * float64(100))
			if pick < 0 || sc > best {
				best, pick = sc, j
			}
		}
		if pick >= 0 {
			gpus = append(gpus, pick)
		}
		return best, gpus
	}
	start := len(gpus)
	if r.UsesGPU() {
		gpus = PickLowest(n.GPUFree, r.Milli, r.GPUs, gpus)
		for _, j := range gpus[start:] {
			tmp[j] -= r.Milli
		}
	}
	after := s.fm.frag(c, tmp, model)
	return int64(sigmoid((before-after)/1000) * float64(100)), gpus
}

// seenBefore reports whether free[j] occurs at a lower index: such a GPU
// leaves the node in the same state, so it cannot score higher.
func seenBefore(free []int64, j int) bool {
	for i := 0; i < j; i++ {
		if free[i] == free[j] {
			return true
		}
	}
	return false
}
