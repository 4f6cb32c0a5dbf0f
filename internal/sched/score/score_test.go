package score

import (
	"errors"
	"math/rand"
	"reflect"
	"testing"
)

// node builds a view with the given free CPU (milli) and per-GPU free milli.
func node(cpu int64, model string, free ...int64) *Node {
	return &Node{CPUFree: cpu, MemFree: 1 << 20, CPUCap: 96000, MemCap: 1 << 20, Model: model,
		GPUFree: append([]int64(nil), free...)}
}

func TestRegistry(t *testing.T) {
	want := []string{"random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "arbiter"}
	if got := Names(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Names() = %v", got)
	}
	tp := []TypicalPod{{CPU: 1000, Milli: 500, GPUs: 1, P: 1}}
	for _, n := range want {
		s, err := New(n, WithSeed(1), WithTypicalPods(tp))
		if err != nil || s.Name() != n {
			t.Errorf("New(%q) = %v, %v", n, s, err)
		}
	}
	if s, err := New("06-FGD", WithTypicalPods(tp)); err != nil || s.Name() != "fgd" {
		t.Errorf("New(06-FGD) = %v, %v", s, err)
	}
	if _, err := New("nope"); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown: %v", err)
	}
	if _, err := New("random"); !errors.Is(err, ErrNeedsRand) {
		t.Errorf("random without source: %v", err)
	}
	if _, err := New("fgd"); !errors.Is(err, ErrNeedsTypical) {
		t.Errorf("fgd without typical pods: %v", err)
	}
}

func TestFits(t *testing.T) {
	n := node(8000, "T4", 1000, 300, 1000)
	tests := []struct {
		r    Request
		want bool
	}{
		{Request{CPU: 8000}, true},
		{Request{CPU: 8001}, false},
		{Request{CPU: 1000, GPUs: 2, Milli: 1000}, true},
		{Request{CPU: 1000, GPUs: 3, Milli: 1000}, false},
		{Request{CPU: 1000, GPUs: 1, Milli: 300, Models: []string{"V100", "T4"}}, true},
		{Request{CPU: 1000, GPUs: 1, Milli: 300, Models: []string{"V100"}}, false},
		{Request{CPU: 1000, Mem: 1 << 21}, false},
	}
	for _, tt := range tests {
		if got := Fits(n, &tt.r); got != tt.want {
			t.Errorf("Fits(%+v) = %v, want %v", tt.r, got, tt.want)
		}
	}
}

// TestPaperScores checks each paper scorer against values worked out by
// hand from the formulas in OPENB-METHOD.md.
func TestPaperScores(t *testing.T) {
	share := &Request{CPU: 4000, GPUs: 1, Milli: 500}
	whole := &Request{CPU: 8000, GPUs: 2, Milli: 1000}
	cpuOnly := &Request{CPU: 16000}
	busy := node(64000, "T4", 1000, 600, 1000, 0) // G = 2600
	busy.Tags = TagShare
	empty := node(96000, "T4", 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000)
	tests := []struct {
		s        Scorer
		n        *Node
		r        *Request
		score    int64
		gpus     []int
		scenario string
	}{
		// dot = 64000/128000·4000/128000 + 2600/8000·500/8000 = 0.015625 + 0.0203125
		{DotProd{}, busy, share, 98, []int{1}, "dotprod share"},
		{GpuClustering{}, busy, share, 16 + 75, []int{1}, "clustering same tag only"},
		{GpuClustering{}, busy, whole, 16, []int{0, 2}, "clustering other tag"},
		{GpuClustering{}, empty, whole, 0 + 25, []int{0, 1}, "clustering empty node"},
		{GpuClustering{}, busy, cpuOnly, 0, nil, "clustering cpu-only"},
		// sorted free: 0, 600, 1000, 1000; first ≥ 500 is 600 → r = 60 → 100 − 6
		{GpuPacking{}, busy, share, 94, []int{1}, "packing shared GPU"},
		{GpuPacking{}, busy, whole, 48, []int{0, 2}, "packing 2 free GPUs on used node"},
		{GpuPacking{}, empty, whole, 25, []int{0, 1}, "packing empty 8-GPU node"},
		{GpuPacking{}, busy, cpuOnly, 0, nil, "packing cpu-only"},
		// s = 0.5·60000/128000 + 0.5·2100/8000 = 0.234375 + 0.13125 → 63
		{BestFit{}, busy, share, 63, []int{1}, "bestfit"},
	}
	for _, tt := range tests {
		got, gpus := tt.s.Score(tt.n, tt.r, nil)
		if got != tt.score || !reflect.DeepEqual(gpus, tt.gpus) {
			t.Errorf("%s: score %d gpus %v, want %d %v", tt.scenario, got, gpus, tt.score, tt.gpus)
		}
	}
}

func TestTypicalPods(t *testing.T) {
	var reqs []Request
	add := func(n int, r Request) {
		for range n {
			reqs = append(reqs, r)
		}
	}
	add(50, Request{CPU: 4000, GPUs: 1, Milli: 500})
	add(30, Request{CPU: 8000, GPUs: 1, Milli: 1000})
	add(10, Request{CPU: 2000})
	add(10, Request{CPU: 9000, GPUs: 1, Milli: 1000, Models: []string{"T4"}})
	add(1, Request{CPU: 1, Mem: 5})
	tp := TypicalPods(reqs, 90)
	// 50+30+10 = 90 < 90.9 (90 % of 101): the fourth shape (ties on count
	// 10: higher CPU first) crosses the threshold.
	if len(tp) != 4 || tp[2].CPU != 9000 || tp[3].CPU != 2000 {
		t.Fatalf("typical = %+v", tp)
	}
	if want := (50.0 / 101) / (100.0 / 101); tp[0].P != want {
		t.Errorf("p = %v, want %v", tp[0].P, want)
	}
	if tp[2].Spec() != "T4" {
		t.Errorf("spec %q", tp[2].Spec())
	}
}

func TestFGD(t *testing.T) {
	tp := []TypicalPod{
		{CPU: 4000, Milli: 500, GPUs: 1, P: 0.5},
		{CPU: 8000, Milli: 1000, GPUs: 1, P: 0.5},
	}
	s := NewFGD(tp)
	// One GPU half used: the 500-milli pod fits (Q3, nothing lacks), the
	// whole-GPU pod cannot use that GPU (Q2 gets its 500 free milli).
	n := node(64000, "T4", 500, 1000)
	if got := s.Fragmentation(n); got != 0.5*500 {
		t.Errorf("F = %v, want 250", got)
	}
	// Putting a 500 pod on GPU 0 fills it: F drops to 0, ΔF = 250 →
	// trunc(100·σ(0.25)) = 56. On GPU 1 F rises to 0.5·(500+500)=500:
	// ΔF = −250 → 43. FGD takes GPU 0.
	sc, gpus := s.Score(n, &Request{CPU: 4000, GPUs: 1, Milli: 500}, nil)
	if sc != 56 || !reflect.DeepEqual(gpus, []int{0}) {
		t.Errorf("score %d gpus %v, want 56 [0]", sc, gpus)
	}
	// CPU running out turns satisfied pods into Q4 fragments.
	if got := s.Fragmentation(node(3000, "T4", 1000)); got != 1000 {
		t.Errorf("F without CPU = %v, want 1000", got)
	}
	// A model the typical pods may not use is all fragment.
	s2 := NewFGD([]TypicalPod{{CPU: 1, Milli: 1000, GPUs: 1, Models: []string{"V100"}, P: 1}})
	if got := s2.Fragmentation(node(64000, "T4", 1000)); got != 1000 {
		t.Errorf("F on another model = %v, want 1000", got)
	}
}

func TestArbiter(t *testing.T) {
	tp := []TypicalPod{
		{CPU: 4000, Milli: 500, GPUs: 1, P: 0.4},
		{CPU: 4000, Milli: 300, GPUs: 1, P: 0.2},
		{CPU: 8000, Milli: 1000, GPUs: 1, P: 0.4},
	}
	a, f := NewArbiter(tp), NewFGD(tp)
	// Node scores order like FGD's.
	nodes := []*Node{node(64000, "T4", 500, 1000), node(64000, "T4", 1000, 1000), node(4000, "T4", 700, 200)}
	reqs := []*Request{{CPU: 4000, GPUs: 1, Milli: 300}, {CPU: 4000, GPUs: 1, Milli: 1000}}
	for _, r := range reqs {
		for i := range nodes {
			for j := range nodes {
				ai, _ := a.Score(nodes[i], r, nil)
				aj, _ := a.Score(nodes[j], r, nil)
				fi, _ := f.Score(nodes[i], r, nil)
				fj, _ := f.Score(nodes[j], r, nil)
				if (fi > fj) != (ai > aj) {
					t.Errorf("nodes %d, %d: fgd %d vs %d, arbiter %d vs %d", i, j, fi, fj, ai, aj)
				}
			}
		}
	}
	// CPU-only ties: the node without whole free GPUs wins.
	cpu := &Request{CPU: 1000}
	s0, _ := a.Score(node(64000, "T4", 0, 300), cpu, nil)
	s2, _ := a.Score(node(64000, "T4", 1000, 1000), cpu, nil)
	if s0 <= s2 {
		t.Errorf("cpu-only: busy node %d, free node %d", s0, s2)
	}
}

func TestArbiterStranded(t *testing.T) {
	// GPU pods ask 8 CPU per whole GPU: rho = (0.5·4000 + 0.5·12000) /
	// (0.5·500 + 0.5·1500) = 8 milli-CPU per GPU milli.
	tp := []TypicalPod{
		{CPU: 4000, Milli: 500, GPUs: 1, P: 0.5},
		{CPU: 12000, Milli: 500, GPUs: 3, P: 0.5},
		{CPU: 16000, P: 0}, // CPU-only shapes do not count
	}
	a := NewArbiter(tp)
	if got := a.CPUPerGPUMilli(); got != 8 {
		t.Fatalf("rho = %v, want 8", got)
	}
	cases := []struct {
		n    *Node
		cpu  int64
		want int
	}{
		{node(64000, "T4", 0, 0), 16000, 0},       // no free GPU
		{node(64000, "T4", 1000, 1000), 16000, 0}, // 48 cores left serve both GPUs
		{node(24000, "T4", 1000, 1000), 16000, 1}, // 3 GPUs' worth of CPU -> 1: 1 GPU lost
		{node(16000, "T4", 1000, 1000), 12000, 1}, // 2 -> 0.5 GPUs: 1.5 lost, rounded down
		{node(16000, "T4", 1000, 1000), 4000, 0},  // 2 -> 1.5: half a GPU
		{node(64000, "T4", 1000, 1000, 1000, 1000), 64000, 4},
	}
	for i, c := range cases {
		if got := a.Stranded(c.n, c.cpu); got != c.want {
			t.Errorf("case %d: Stranded = %d, want %d", i, got, c.want)
		}
	}
	// A CPU-only pod prefers, among equal FGD scores, the node it strands
	// fewer GPUs on, whatever their whole free GPUs.
	cpu := &Request{CPU: 16000}
	s1, _ := a.Score(node(64000, "T4", 1000, 1000, 1000, 1000), cpu, nil)
	s2, _ := a.Score(node(24000, "T4", 1000, 1000), cpu, nil)
	f := NewFGD(tp)
	f1, _ := f.Score(node(64000, "T4", 1000, 1000, 1000, 1000), cpu, nil)
	f2, _ := f.Score(node(24000, "T4", 1000, 1000), cpu, nil)
	if f1 != f2 {
		t.Fatalf("fgd scores differ: %d, %d", f1, f2)
	}
	if s1 <= s2 {
		t.Errorf("cpu-only: spare-CPU node %d, stranding node %d", s1, s2)
	}
	// Without typical GPU pods nothing is stranded.
	if got := NewArbiter([]TypicalPod{{CPU: 1000, P: 1}}).Stranded(node(1000, "T4", 1000), 1000); got != 0 {
		t.Errorf("no GPU pods: Stranded = %d", got)
	}
}

func TestRandom(t *testing.T) {
	r := NewRandom(rand.New(rand.NewSource(7)))
	n := node(64000, "T4", 100, 600, 800, 700)
	counts := map[int]int{}
	for range 3000 {
		_, g := r.Score(n, &Request{CPU: 1, GPUs: 1, Milli: 500}, nil)
		if len(g) != 1 || n.GPUFree[g[0]] < 500 {
			t.Fatalf("bad GPU %v", g)
		}
		counts[g[0]]++
	}
	for _, j := range []int{1, 2, 3} {
		if counts[j] < 800 || counts[j] > 1200 {
			t.Errorf("GPU %d chosen %d times of 3000, want about 1000", j, counts[j])
		}
	}
	if c := r.Choose(5); c < 0 || c >= 5 {
		t.Errorf("Choose(5) = %d", c)
	}
}

// TestScoreDoesNotAllocate checks the hot path with a buffer of room.
func TestScoreDoesNotAllocate(t *testing.T) {
	tp := []TypicalPod{{CPU: 4000, Milli: 500, GPUs: 1, P: 0.5}, {CPU: 8000, Milli: 1000, GPUs: 2, P: 0.5}}
	n := node(64000, "T4", 500, 1000, 300, 1000, 1000, 0, 1000, 700)
	buf := make([]int, 0, 8)
	for _, name := range Names() {
		s, _ := New(name, WithSeed(1), WithTypicalPods(tp))
		for _, r := range []*Request{{CPU: 4000, GPUs: 1, Milli: 500}, {CPU: 8000, GPUs: 2, Milli: 1000}, {CPU: 100}} {
			if a := testing.AllocsPerRun(50, func() { s.Score(n, r, buf[:0]) }); a != 0 {
				t.Errorf("%s: %v allocations per Score", name, a)
			}
		}
	}
}
