package sched

import (
	"fmt"
	"strings"

	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched/score"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// ScorerNames lists the node scorers Options.Scorer accepts: "" is Arbiter's
// index-accelerated best fit (the default); the others are the scorers of
// package score (the FGD paper's six and "arbiter", its fragmentation-aware
// scorer), which rate every feasible node of a pool.
func ScorerNames() []string { return append([]string{""}, score.Names()...) }

// newScorer builds the named scorer for a cycle. FGD-style scorers learn
// the workload's typical request shapes from the pending workloads (all
// of in's when pending is nil: a cycle that defers work builds its scorer
// again from those it decides).
func newScorer(in *Input, pending []*workload.Workload) (score.Scorer, error) {
	name := strings.TrimSpace(in.Options.Scorer)
	if name == "" {
		return nil, nil
	}
	var reqs []score.Request
	if pending != nil {
		for _, w := range pending {
			reqs = append(reqs, requestOf(w, ""))
		}
	} else {
		for _, w := range in.Workloads {
			if w.Running == nil {
				reqs = append(reqs, requestOf(w, ""))
			}
		}
	}
	if len(reqs) == 0 {
		return nil, nil // nothing to place this cycle
	}
	s, err := score.New(name, score.WithSeed(int64(in.Seed)), score.WithTypicalPods(score.TypicalPods(reqs, 95)))
	if err != nil {
		return nil, fmt.Errorf("sched: %w", err)
	}
	return s, nil
}

func requestOf(w *workload.Workload, model string) score.Request {
	r := score.Request{CPU: int64(w.CPU), Mem: int64(w.Memory), GPUs: 1, Milli: int64(w.GPUs)}
	if w.GPUs >= resource.PerGPU {
		r.GPUs, r.Milli = w.GPUs.WholeGPUs(), resource.PerGPU
	}
	if model != "" {
		r.Models = []string{model}
	}
	return r
}

// bestNodeScored picks the node for one replica with the configured scorer:
// in pool order, the feasible node with the highest score, lowest index on
// ties (a Chooser such as random picks among the feasible nodes itself).
// It returns the node and the GPUs the scorer chose.
func (s *snapshot) bestNodeScored(cl *claim) (int, []int) {
	req := requestOf(cl.w, string(cl.cand.model))
	for _, pi := range cl.pools {
		p := s.pools[pi]
		best, bestScore := -1, int64(0)
		var cands []int
		for _, i := range p.nodes {
			if !s.fits(cl, i) {
				continue
			}
			if _, ok := s.scorer.(score.Chooser); ok {
				cands = append(cands, i)
				continue
			}
			v, _ := s.scorer.Score(s.view(i), &req, s.gpuBuf[:0])
			if best < 0 || v > bestScore {
				best, bestScore = i, v
			}
		}
		if c, ok := s.scorer.(score.Chooser); ok && len(cands) > 0 {
			best = cands[c.Choose(len(cands))]
		}
		if best >= 0 {
			_, gpus := s.scorer.Score(s.view(best), &req, nil)
			return best, gpus
		}
	}
	return -1, nil
}

// view fills the scratch score.Node with node i's free capacity.
func (s *snapshot) view(i int) *score.Node {
	ns := &s.nodes[i]
	v := &s.scoreNode
	v.GPUFree = v.GPUFree[:0]
	for _, f := range ns.free {
		v.GPUFree = append(v.GPUFree, int64(f))
	}
	v.CPUFree, v.MemFree = int64(ns.cpu), int64(ns.mem)
	v.CPUCap, v.MemCap = int64(ns.node.CPU), int64(ns.node.Memory)
	v.Model = string(ns.node.Model)
	return v
}
