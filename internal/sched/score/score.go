package score

import (
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
)

// MilliPerGPU is the capacity of one GPU in thousandths.
const MilliPerGPU = 1000

// Normalisers of the paper scorers: the largest node of the openb cluster
// (128 CPU cores, 8 GPUs). The reference simulator hard-codes them, even for
// clusters with other shapes.
const (
	PaperMaxCPUMilli = 128000
	PaperMaxGPUMilli = 8 * MilliPerGPU
)

// Tags is the set of GPU pod shapes on a node, used by GpuClustering:
// bit 0 stands for GPU-sharing pods, bit k (1..31) for pods of k whole GPUs.
type Tags uint32

// TagShare marks a node holding GPU-sharing pods.
const TagShare Tags = 1

// TagOf returns the tag of a pod of k GPUs of m milli each (0 for CPU-only
// pods).
func TagOf(k int, m int64) Tags {
	switch {
	case k <= 0 || m <= 0:
		return 0
	case k == 1 && m < MilliPerGPU:
		return TagShare
	case k > 31:
		return 1 << 31
	}
	return 1 << uint(k)
}

// Node is a scorer's view of one node. GPUFree is owned by the caller; the
// scorer reads it and never keeps it.
type Node struct {
	CPUFree  int64   // free CPU, milli-cores
	MemFree  int64   // free memory, MiB
	CPUCap   int64   // CPU capacity, milli-cores
	MemCap   int64   // memory capacity, MiB
	Model    string  // GPU model ("" when the node has no GPU)
	GPUFree  []int64 // free milli per GPU, indexed by GPU index (0..1000 each)
	Tags     Tags    // shapes of the GPU pods placed on the node
	PodCount int     // pods placed on the node
}

// FreeGPUMilli returns the node's total free GPU milli.
func (n *Node) FreeGPUMilli() int64 {
	var g int64
	for _, f := range n.GPUFree {
		g += f
	}
	return g
}

// FullyFreeGPUs returns how many GPUs of the node are entirely free.
func (n *Node) FullyFreeGPUs() int {
	c := 0
	for _, f := range n.GPUFree {
		if f >= MilliPerGPU {
			c++
		}
	}
	return c
}

// Request is what one pod asks for.
type Request struct {
	CPU    int64    // milli-cores
	Mem    int64    // MiB
	GPUs   int      // k: number of GPUs
	Milli  int64    // m: milli per GPU (1000 for whole GPUs; 0 for CPU-only)
	Models []string // allowed GPU models; empty means any
}

// GPUDemand returns k·m, the GPU milli the request takes.
func (r *Request) GPUDemand() int64 {
	if r.Milli <= 0 {
		return 0
	}
	return int64(r.GPUs) * r.Milli
}

// UsesGPU reports whether the request takes GPU capacity.
func (r *Request) UsesGPU() bool { return r.Milli > 0 && r.GPUs > 0 }

// Sharing reports whether the request takes a share of a single GPU.
func (r *Request) Sharing() bool { return r.GPUs == 1 && r.Milli > 0 && r.Milli < MilliPerGPU }

// AllowsModel reports whether a GPU of the given model may serve r.
func (r *Request) AllowsModel(model string) bool {
	if len(r.Models) == 0 {
		return true
	}
	for _, m := range r.Models {
		if m == model {
			return true
		}
	}
	return false
}

// Fits reports whether r fits on n: CPU and memory, and for GPU requests an
// allowed model with at least k GPUs that each have m milli free. (The
// paper's per-node pod limit is the caller's business.)
func Fits(n *Node, r *Request) bool {
	if r.CPU > n.CPUFree || r.Mem > n.MemFree {
		return false
	}
	if !r.UsesGPU() {
		return true
	}
	if len(n.GPUFree) == 0 || !r.AllowsModel(n.Model) {
		return false
	}
	return countFit(n.GPUFree, r.Milli) >= r.GPUs
}

func countFit(free []int64, m int64) int {
	c := 0
	for _, f := range free {
		if f >= m {
			c++
		}
	}
	return c
}

// A Scorer rates placing a request on a node.
type Scorer interface {
	// Name returns the registry name.
	Name() string
	// Score returns the score of placing r on n (higher is better) and
	// appends to gpus the indices of the GPUs it would use (none for a
	// CPU-only request). n must fit r (see Fits).
	Score(n *Node, r *Request, gpus []int) (int64, []int)
}

// A Chooser picks a node among candidates by itself instead of rating each
// (Random). Choose returns an index in [0, candidates).
type Chooser interface {
	Scorer
	Choose(candidates int) int
}

// Errors returned by New.
var (
	ErrUnknown      = errors.New("score: unknown scorer")
	ErrNeedsRand    = errors.New("score: scorer needs a random source (WithRand or WithSeed)")
	ErrNeedsTypical = errors.New("score: scorer needs typical pods (WithTypicalPods)")
)

type options struct {
	rng     *rand.Rand
	typical []TypicalPod
}

// Option configures New.
type Option func(*options)

// WithRand gives a random scorer its source.
func WithRand(r *rand.Rand) Option { return func(o *options) { o.rng = r } }

// WithSeed gives a random scorer a new source seeded with seed.
func WithSeed(seed int64) Option {
	return func(o *options) { o.rng = rand.New(rand.NewSource(seed)) }
}

// WithTypicalPods gives the fragmentation scorers (fgd, arbiter) the
// workload's typical pods (see TypicalPods).
func WithTypicalPods(tp []TypicalPod) Option { return func(o *options) { o.typical = tp } }

type factory func(o *options) (Scorer, error)

// Names in the paper's order, then Arbiter's own.
var names = []string{"random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "arbiter"}

var registry = map[string]factory{
	"random": func(o *options) (Scorer, error) {
		if o.rng == nil {
			return nil, ErrNeedsRand
		}
		return NewRandom(o.rng), nil
	},
	"dotprod":       func(*options) (Scorer, error) { return DotProd{}, nil },
	"gpuclustering": func(*options) (Scorer, error) { return GpuClustering{}, nil },
	"gpupacking":    func(*options) (Scorer, error) { return GpuPacking{}, nil },
	"bestfit":       func(*options) (Scorer, error) { return BestFit{}, nil },
	"fgd": func(o *options) (Scorer, error) {
		if len(o.typical) == 0 {
			return nil, ErrNeedsTypical
		}
		return NewFGD(o.typical), nil
	},
	"arbiter": func(o *options) (Scorer, error) {
		if len(o.typical) == 0 {
			return nil, ErrNeedsTypical
		}
		return NewArbiter(o.typical), nil
	},
}

// Names returns the registered scorer names: the paper's six in its order,
// then "arbiter".
func Names() []string { return append([]string(nil), names...) }

// Default is the name of Arbiter's default scorer.
const Default = "arbiter"

// New returns the scorer registered under name (case-insensitive; the
// reference's "06-FGD" style is accepted too).
func New(name string, opts ...Option) (Scorer, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	f, ok := registry[Canonical(name)]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknown, name, strings.Join(names, ", "))
	}
	return f(&o)
}

// Canonical maps a scorer name as users or the reference write it ("FGD",
// "06-FGD", "GpuPacking") to its registry name; unknown names are returned
// lower-cased.
func Canonical(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	if len(n) > 3 && n[0] >= '0' && n[0] <= '9' && n[1] >= '0' && n[1] <= '9' && n[2] == '-' {
		n = n[3:]
	}
	return n
}

// PickBest appends the GPUs the paper's "best" rule uses for r on n: the k
// GPUs with the least free milli that still hold m, lower index first on
// ties. For a sharing pod that is the tightest GPU; for whole GPUs, the
// lowest-index fully free ones.
func PickBest(n *Node, r *Request, gpus []int) []int {
	if !r.UsesGPU() {
		return gpus
	}
	if r.GPUs == 1 {
		best := -1
		for j, f := range n.GPUFree {
			if f >= r.Milli && (best < 0 || f < n.GPUFree[best]) {
				best = j
			}
		}
		if best >= 0 {
			gpus = append(gpus, best)
		}
		return gpus
	}
	return pickTightest(n.GPUFree, r.Milli, r.GPUs, gpus)
}

// pickTightest appends the k GPUs with the least free milli ≥ m (index
// order on ties), in ascending index order.
func pickTightest(free []int64, m int64, k int, gpus []int) []int {
	start := len(gpus)
	var used uint64
	for c := 0; c < k; c++ {
		best := -1
		for j, f := range free {
			if f >= m && used&(1<<uint(j&63)) == 0 && (best < 0 || f < free[best]) {
				best = j
			}
		}
		if best < 0 {
			break
		}
		used |= 1 << uint(best&63)
		gpus = append(gpus, best)
	}
	sort.Ints(gpus[start:])
	return gpus
}

// PickLowest appends the k lowest-index GPUs with at least m milli free.
func PickLowest(free []int64, m int64, k int, gpus []int) []int {
	for j, f := range free {
		if k == 0 {
			break
		}
		if f >= m {
			gpus = append(gpus, j)
			k--
		}
	}
	return gpus
}
