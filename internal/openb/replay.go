package openb

import (
	"fmt"
	"math/bits"

	"github.com/arbiterhq/arbiter/internal/sched/score"
)

// Record is the cluster after one pod attempt (placed or failed), the
// reference's [Alloc] report line.
type Record struct {
	Arrived int64 // Σ k·m of every pod attempted so far, failed ones included
	Used    int64 // GPU milli allocated
}

// Placement says where one pod went.
type Placement struct {
	Node int    // index into Cluster.Nodes, -1 when the pod failed
	GPUs uint64 // bit j set: GPU j of the node serves the pod
}

// Result is one replay of one workload, policy and seed.
type Result struct {
	Workload string
	Policy   string
	Seed     int64
	Placed   int
	Failed   int
	Used     int64       // GPU milli allocated at the end
	Records  []Record    // one per pod, in arrival order
	Places   []Placement // one per pod, in arrival order
	Curve    []float64   // allocation % at 0..130 % arrived demand (NaN: no data)
}

// Run replays one workload under a policy (a score.Names() name) for one
// seed: it builds the seed's arrivals, the scorer, places every pod and
// computes the discrete allocation curve.
func Run(c *Cluster, w *Workload, policy string, seed int64) (*Result, error) {
	a := NewArrivals(c, w, seed)
	s, err := score.New(policy, score.WithRand(a.Rand), score.WithTypicalPods(w.Typical))
	if err != nil {
		return nil, err
	}
	res := Replay(c, w, a, s)
	res.Policy = score.Canonical(policy)
	return res, nil
}

// memoEntry caches a node's score for one request class; it is valid while
// the node's version equals ver.
type memoEntry struct {
	score int64
	gpus  uint64
	ver   uint32
}

// classInfo is a request class prepared for the filter.
type classInfo struct {
	req    *score.Request
	models uint64 // bit i: Cluster.Models[i] allowed
	gpu    bool   // takes GPU capacity
}

// Replay places the arrivals one at a time (OPENB-METHOD.md §3): the nodes
// that fit are scored, the highest score wins and ties go to the lowest
// rank; a single feasible node is taken without scoring; a pod that fits
// nowhere fails. Before each attempt one Intn(100) is drawn from a.Rand (a
// metrics sample in the reference), which matters only to the random
// policy. Scores of deterministic scorers are cached per node and request
// class until the node changes.
func Replay(c *Cluster, w *Workload, a *Arrivals, s score.Scorer) *Result {
	n := len(c.Nodes)
	byRank := make([]int, n) // position -> node index
	for i, r := range a.Rank {
		byRank[r] = i
	}
	views := make([]score.Node, n)
	modelBit := make([]uint64, n)
	fullFree := make([]int, n)
	maxFree := make([]int64, n)
	version := make([]uint32, n)
	var totalGPUs int
	for _, nd := range c.Nodes {
		totalGPUs += nd.GPUs
	}
	flat := make([]int64, totalGPUs)
	off := 0
	for p, i := range byRank {
		nd := &c.Nodes[i]
		g := flat[off : off+nd.GPUs : off+nd.GPUs]
		off += nd.GPUs
		for j := range g {
			g[j] = score.MilliPerGPU
		}
		views[p] = score.Node{CPUFree: nd.CPUMilli, MemFree: nd.MemoryMiB, CPUCap: nd.CPUMilli,
			MemCap: nd.MemoryMiB, Model: nd.Model, GPUFree: g}
		if m := c.modelOf[i]; m >= 0 {
			modelBit[p] = 1 << uint(m)
		}
		fullFree[p] = nd.GPUs
		if nd.GPUs > 0 {
			maxFree[p] = score.MilliPerGPU
		}
		version[p] = 1
	}

	classes := make([]classInfo, len(w.Classes))
	for i := range w.Classes {
		r := &w.Classes[i]
		ci := classInfo{req: r, gpu: r.UsesGPU()}
		if len(r.Models) == 0 {
			ci.models = ^uint64(0)
		} else {
			for mi, m := range c.Models {
				if r.AllowsModel(m) {
					ci.models |= 1 << uint(mi)
				}
			}
		}
		classes[i] = ci
	}

	chooser, isChooser := s.(score.Chooser)
	var memo []memoEntry
	if !isChooser {
		memo = make([]memoEntry, n*len(classes))
	}
	nc := len(classes)
	feasible := make([]int32, 0, n)
	gpuBuf := make([]int, 0, 64)

	res := &Result{Workload: w.Name, Policy: s.Name(), Seed: a.Seed,
		Records: make([]Record, 0, len(a.Order)), Places: make([]Placement, 0, len(a.Order))}
	var arrived, used int64
	for _, pi := range a.Order {
		pod := &w.Pods[pi]
		ci := &classes[pod.Class]
		req := ci.req
		demand := req.GPUDemand()
		arrived += demand
		a.Rand.Intn(100)

		feasible = feasible[:0]
		for p := range views {
			v := &views[p]
			if req.CPU > v.CPUFree || req.Mem > v.MemFree || v.PodCount >= MaxPodsPerNode {
				continue
			}
			if ci.gpu {
				if ci.models&modelBit[p] == 0 {
					continue
				}
				switch {
				case req.GPUs == 1:
					if maxFree[p] < req.Milli {
						continue
					}
				case req.Milli == score.MilliPerGPU:
					if fullFree[p] < req.GPUs {
						continue
					}
				default:
					if !score.Fits(v, req) {
						continue
					}
				}
			}
			feasible = append(feasible, int32(p))
		}

		best := -1
		var gpus uint64
		switch {
		case len(feasible) == 0:
		case len(feasible) == 1 || isChooser:
			best = int(feasible[0])
			if len(feasible) > 1 {
				best = int(feasible[chooser.Choose(len(feasible))])
			}
			_, g := s.Score(&views[best], req, gpuBuf[:0])
			gpus = mask(g)
		default:
			var bestScore int64
			for _, p32 := range feasible {
				p := int(p32)
				e := &memo[p*nc+int(pod.Class)]
				if e.ver != version[p] {
					sc, g := s.Score(&views[p], req, gpuBuf[:0])
					*e = memoEntry{score: sc, gpus: mask(g), ver: version[p]}
				}
				if best < 0 || e.score > bestScore {
					best, bestScore, gpus = p, e.score, e.gpus
				}
			}
		}
		if best < 0 {
			res.Failed++
			res.Places = append(res.Places, Placement{Node: -1})
			res.Records = append(res.Records, Record{Arrived: arrived, Used: used})
			continue
		}

		// Bind the pod to the node at position best.
		v := &views[best]
		v.CPUFree -= req.CPU
		v.MemFree -= req.Mem
		v.PodCount++
		if ci.gpu {
			if bits.OnesCount64(gpus) != req.GPUs {
				panic(fmt.Sprintf("openb: scorer %s chose GPUs %b for a %d-GPU pod", s.Name(), gpus, req.GPUs))
			}
			for g := gpus; g != 0; g &= g - 1 {
				j := bits.TrailingZeros64(g)
				if j >= len(v.GPUFree) || v.GPUFree[j] < req.Milli {
					panic(fmt.Sprintf("openb: scorer %s chose GPU %d without room", s.Name(), j))
				}
				v.GPUFree[j] -= req.Milli
			}
			v.Tags |= score.TagOf(req.GPUs, req.Milli)
			full, mx := 0, int64(0)
			for _, f := range v.GPUFree {
				if f == score.MilliPerGPU {
					full++
				}
				mx = max(mx, f)
			}
			fullFree[best], maxFree[best] = full, mx
		}
		version[best]++
		used += demand
		res.Placed++
		res.Places = append(res.Places, Placement{Node: byRank[best], GPUs: gpus})
		res.Records = append(res.Records, Record{Arrived: arrived, Used: used})
	}
	res.Used = used
	res.Curve = Curve(res.Records, c.GPUs)
	return res
}

func mask(gpus []int) uint64 {
	var m uint64
	for _, j := range gpus {
		m |= 1 << uint(j)
	}
	return m
}
