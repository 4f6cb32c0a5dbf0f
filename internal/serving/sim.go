package serving

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// SimConfig describes a per-request simulation of one deployment: Poisson
// arrivals at a rate that is constant within each step, Servers FCFS
// servers, and optional rejection of requests that would wait longer than
// MaxWait. It is the reference the per-step model (ServiceDist.Step) is
// checked against.
type SimConfig struct {
	Servers int
	Step    time.Duration
	Rates   []Rate // arrival rate of each step
	MaxWait time.Duration
}

// SimStep is what the simulation saw in one step, with StepResult's
// meanings: latencies are over the requests that arrived in the step.
type SimStep struct {
	Arrivals, Served, Rejected int
	Backlog                    int // requests waiting at the end of the step
	Utilization                float64
	MeanWait, MeanResponse     time.Duration
	P50, P95, P99              time.Duration
	WaitProb                   float64 // fraction of accepted requests that waited
}

// SimResult holds every step and the totals over the run.
type SimResult struct {
	Steps []SimStep
	Total SimStep
}

// Simulate runs the per-request simulation. jobs draws the next request's
// cost; every random number comes from rng, so a seed fixes the run.
func Simulate(cfg SimConfig, jobs func(*rand.Rand) Job, rng *rand.Rand) (SimResult, error) {
	if cfg.Servers < 1 || cfg.Step <= 0 || len(cfg.Rates) == 0 {
		return SimResult{}, fmt.Errorf("serving: simulate: need servers ≥ 1 (%d), step > 0 (%v) and rates", cfg.Servers, cfg.Step)
	}
	for i, r := range cfg.Rates {
		if !(r >= 0) {
			return SimResult{}, fmt.Errorf("serving: simulate: step %d has rate %v", i, r)
		}
	}
	if jobs == nil || rng == nil {
		return SimResult{}, errors.New("serving: simulate: nil job source or random source")
	}
	T := cfg.Step.Seconds()
	nSteps := len(cfg.Rates)
	horizon := T * float64(nSteps)
	maxWait := cfg.MaxWait.Seconds()

	free := make([]float64, cfg.Servers) // a min-heap of server free times
	steps := make([]SimStep, nSteps)
	arrived := make([]int, nSteps) // accepted arrivals per step
	started := make([]int, nSteps) // service starts per step
	busy := make([]float64, nSteps)
	sumWait := make([]float64, nSteps)
	waited := make([]int, nSteps)
	var resp []float64 // responses, contiguous per step of arrival
	bounds := make([]int, nSteps+1)

	t := 0.0
	for k := 0; k < nSteps; k++ {
		bounds[k] = len(resp)
		end := T * float64(k+1)
		lambda := float64(cfg.Rates[k])
		t = max(t, T*float64(k))
		for lambda > 0 {
			t += rng.ExpFloat64() / lambda
			if t >= end {
				t = end
				break
			}
			j := jobs(rng)
			steps[k].Arrivals++
			start := max(t, free[0])
			wait := start - t
			if maxWait > 0 && wait > maxWait {
				steps[k].Rejected++
				continue
			}
			occ := j.Occupancy.Seconds()
			free[0] = start + occ
			siftDown(free)
			arrived[k]++
			sumWait[k] += wait
			if wait > 0 {
				waited[k]++
			}
			resp = append(resp, wait+j.Latency.Seconds())
			if start < horizon {
				started[min(nSteps-1, int(start/T))]++
			}
			// Spread the busy interval over the steps it covers.
			s, e := start, start+occ
			for i := int(start / T); s < e && i < nSteps; i++ {
				stepEnd := T * float64(i+1)
				if stepEnd > s {
					busy[i] += min(e, stepEnd) - s
					s = stepEnd
				}
			}
		}
	}
	bounds[nSteps] = len(resp)

	var res SimResult
	res.Steps = steps
	var cumArr, cumStart int
	var tot SimStep
	var totWait float64
	for k := range steps {
		s := &steps[k]
		cumArr += arrived[k]
		cumStart += started[k]
		s.Served = started[k]
		s.Backlog = cumArr - cumStart
		s.Utilization = busy[k] / (T * float64(cfg.Servers))
		fillLatencies(s, resp[bounds[k]:bounds[k+1]], sumWait[k], waited[k])
		tot.Arrivals += s.Arrivals
		tot.Served += s.Served
		tot.Rejected += s.Rejected
		tot.Utilization += s.Utilization / float64(nSteps)
		totWait += sumWait[k]
	}
	tot.Backlog = steps[nSteps-1].Backlog
	var w int
	for _, x := range waited {
		w += x
	}
	fillLatencies(&tot, resp, totWait, w)
	res.Total = tot
	return res, nil
}

func fillLatencies(s *SimStep, resp []float64, sumWait float64, waited int) {
	n := len(resp)
	if n == 0 {
		return
	}
	var sum float64
	for _, r := range resp {
		sum += r
	}
	s.MeanWait = seconds(sumWait / float64(n))
	s.MeanResponse = seconds(sum / float64(n))
	s.WaitProb = float64(waited) / float64(n)
	// Nearest-rank quantiles by selection, highest first: each selection
	// leaves the smaller values to its left, where the next one looks.
	rank := func(p float64) int { return max(0, min(n-1, int(math.Ceil(p*float64(n)))-1)) }
	k99 := rank(0.99)
	s.P99 = seconds(selectK(resp, k99))
	k95 := rank(0.95)
	s.P95 = seconds(selectK(resp[:k99+1], k95))
	s.P50 = seconds(selectK(resp[:k95+1], rank(0.50)))
}

// selectK reorders a so that a[k] is the value of rank k, smaller values
// before it and larger after (quickselect with a median-of-three pivot;
// deterministic), and returns a[k].
func selectK(a []float64, k int) float64 {
	lo, hi := 0, len(a)-1
	for hi > lo {
		m := lo + (hi-lo)/2
		if a[m] < a[lo] {
			a[m], a[lo] = a[lo], a[m]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[m] {
			a[hi], a[m] = a[m], a[hi]
		}
		pivot := a[m]
		i, j := lo, hi
		for i <= j {
			for a[i] < pivot {
				i++
			}
			for a[j] > pivot {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return a[k]
		}
	}
	return a[k]
}

// siftDown restores the min-heap after h[0] grew.
func siftDown(h []float64) {
	i, n := 0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
