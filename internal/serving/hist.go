package serving

import (
	"fmt"
	"math"
	"time"
)

// Hist is a distribution of latencies over requests, accumulated step by
// step: each step adds its requests' exact response-time distribution (a
// mixture of Parts) weighted by how many requests it had, so that a
// quantile of the Hist is a quantile over every request of a run, not an
// average of per-step quantiles.
//
// Bins are log-spaced from Min to Max, each Ratio times the previous
// (Ratio 1.02: quantiles within 1% of the exact mixture's); a quantile is
// interpolated within its bin. Requests slower than Max, turned away, or
// never served count as slower than Max: a quantile that falls among them
// is reported as Max with Beyond set.
//
// A Hist is a small value with no goroutines; it is not safe for
// concurrent use.
type Hist struct {
	min, max float64   // seconds
	logR     float64   // ln(ratio)
	edges    []float64 // edges[k] = edge(k), k ≤ len(w)
	walks    []walk    // AddMix's scratch
	w        []float64
	over     float64 // weight beyond max (or never served)
	total    float64
}

// NewHist makes an empty histogram of latencies in [lo, hi] with bins of the
// given ratio (> 1).
func NewHist(lo, hi time.Duration, ratio float64) (*Hist, error) {
	if lo <= 0 || hi <= lo || !(ratio > 1) || math.IsInf(ratio, 1) {
		return nil, fmt.Errorf("serving: histogram: need 0 < lo (%v) < hi (%v) and ratio %v > 1", lo, hi, ratio)
	}
	h := &Hist{min: lo.Seconds(), max: hi.Seconds(), logR: math.Log(ratio)}
	n := int(math.Ceil(math.Log(h.max/h.min) / h.logR))
	h.w = make([]float64, n)
	h.edges = make([]float64, n+1)
	for k := range h.edges {
		h.edges[k] = h.min * math.Exp(float64(k)*h.logR)
	}
	return h, nil
}

// edge is the lower edge of bin k (edge(len) ≥ max).
func (h *Hist) edge(k int) float64 {
	if k >= 0 && k < len(h.edges) {
		return h.edges[k]
	}
	return h.min * math.Exp(float64(k)*h.logR)
}

// bin is the bin of a latency of x seconds: -1 below min, len(w) at or
// beyond max.
func (h *Hist) bin(x float64) int {
	switch {
	case x < h.min:
		return -1
	case x >= h.max:
		return len(h.w)
	}
	return min(len(h.w)-1, int(math.Log(x/h.min)/h.logR))
}

// AddPoint adds weight w of requests that all took v.
func (h *Hist) AddPoint(v time.Duration, w float64) {
	if !(w > 0) || math.IsInf(w, 1) {
		return
	}
	h.total += w
	switch k := h.bin(v.Seconds()); {
	case k < 0:
		h.w[0] += w
	case k >= len(h.w):
		h.over += w
	default:
		h.w[k] += w
	}
}

// AddNever adds weight w of requests that were never answered (turned
// away or with no replica).
func (h *Hist) AddNever(w float64) {
	if w > 0 && !math.IsInf(w, 1) {
		h.total += w
		h.over += w
	}
}

// mixTail is the probability that a response of the mixture's servable
// parts exceeds t, and the total weight of the parts.
func mixTail(parts []Part, t float64) float64 {
	var g, w float64
	for _, p := range parts {
		if p.Weight > 0 && !p.Resp.never {
			g += p.Weight * p.Resp.exceed(t-p.Shift.Seconds())
			w += p.Weight
		}
	}
	if w == 0 {
		return 0
	}
	return g / w
}

// mixTailWalk is mixTail(parts, t) for t no smaller than at the previous
// call with the same walks (one per part, from newWalk).
func mixTailWalk(parts []Part, t float64, walks []walk) float64 {
	var g, w float64
	for i, p := range parts {
		if p.Weight > 0 && !p.Resp.never {
			g += p.Weight * p.Resp.exceedWalk(t-p.Shift.Seconds(), &walks[i])
			w += p.Weight
		}
	}
	if w == 0 {
		return 0
	}
	return g / w
}

// tailEps is where AddMix stops walking the bins: the mass left beyond is
// put in the next bin.
const tailEps = 1e-9

// AddMix adds the mixture's requests: each part's weight is its number of
// requests, and parts that cannot be served count as never answered. It
// walks the bins from the fastest possible response up, evaluating the
// mixture's tail at each edge, until less than 1e-9 of it remains.
func (h *Hist) AddMix(parts []Part) {
	var w, lo float64
	lo = math.Inf(1)
	for _, p := range parts {
		if !(p.Weight > 0) {
			continue
		}
		if p.Resp.never {
			h.AddNever(p.Weight)
			continue
		}
		w += p.Weight
		lo = min(lo, p.Shift.Seconds()+p.Resp.d.lat[0])
	}
	if w == 0 {
		return
	}
	h.total += w
	k := max(0, h.bin(lo))
	if k >= len(h.w) {
		h.over += w
		return
	}
	prev := 1.0 // P(R > edge(k)); the mass below edge(k) (none) goes in bin k
	walks := h.walks[:0]
	for range parts {
		walks = append(walks, newWalk)
	}
	h.walks = walks
	for ; k < len(h.w); k++ {
		g := mixTailWalk(parts, h.edge(k+1), walks)
		h.w[k] += w * (prev - g)
		prev = g
		if g < tailEps {
			if k+1 < len(h.w) {
				h.w[k+1] += w * g
			} else {
				h.over += w * g
			}
			return
		}
	}
	h.over += w * prev
}

// Total is the weight (requests) added.
func (h *Hist) Total() float64 { return h.total }

// Quantile returns the p-quantile (0 < p < 1) of the latencies added, and
// beyond = true when it lies past Max (then the value is Max). An empty
// histogram returns 0, false.
func (h *Hist) Quantile(p float64) (q time.Duration, beyond bool) {
	if h.total == 0 {
		return 0, false
	}
	target := p * h.total
	var cum float64
	for k, x := range h.w {
		if x > 0 && cum+x >= target {
			// Log-linear interpolation within the bin.
			f := (target - cum) / x
			return seconds(h.edge(k) * math.Exp(f*h.logR)), false
		}
		cum += x
	}
	return seconds(h.max), true
}

// Merge adds another histogram's requests; both must have the same bins.
func (h *Hist) Merge(o *Hist) error {
	if o.min != h.min || o.max != h.max || o.logR != h.logR || len(o.w) != len(h.w) {
		return fmt.Errorf("serving: histogram: merging different bins")
	}
	for k := range h.w {
		h.w[k] += o.w[k]
	}
	h.over += o.over
	h.total += o.total
	return nil
}
