package sim

import (
	"time"

	"github.com/arbiterhq/arbiter/internal/serving"
)

// ServiceLatency is one inference service's latency over every request of
// a run, in milliseconds, in the terms of LLM serving practice:
//
//   - TTFTMs, time to first token: network round trip, queueing, per
//     request overhead and prefill of the prompt tokens not in the
//     context cache;
//   - TPOTMs, time per output token after the first: one decode step of
//     the replica at its batch (a busier replica decodes slower);
//   - E2EMs, time to the last token: the TTFT plus one decode step, at
//     the step's TPOT, per later token.
//
// Requests turned away (waiting past 30 s, or with no replica) count as
// slower than 60 s; a percentile among them reads 60000.
type ServiceLatency struct {
	Requests float64 `json:"requests"`
	// Rejected are the requests turned away.
	Rejected     float64     `json:"rejected"`
	SLOTTFTP99Ms float64     `json:"slo_ttft_p99_ms"`
	TTFTMs       Percentiles `json:"ttft_ms"`
	TPOTMs       Percentiles `json:"tpot_ms"`
	E2EMs        Percentiles `json:"e2e_ms"`
}

// Percentiles are a latency's p50, p95 and p99 over requests, in ms.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

func percentiles(h *serving.Hist, digits int) Percentiles {
	q := func(p float64) float64 {
		v, _ := h.Quantile(p)
		return roundTo(float64(v)/float64(time.Millisecond), digits)
	}
	return Percentiles{P50: q(0.50), P95: q(0.95), P99: q(0.99)}
}

// inference summarises every service's latencies, and the TTFT p99 over
// all their requests together (nil, 0 without services).
func (r *recorder) inference() (map[string]ServiceLatency, float64) {
	if len(r.s.services) == 0 {
		return nil, 0
	}
	out := map[string]ServiceLatency{}
	var all *serving.Hist
	for _, st := range r.s.services {
		l := st.lat
		out[st.spec.Name] = ServiceLatency{
			Requests:     roundTo(l.ttft.Total(), 0),
			Rejected:     roundTo(l.rejected, 0),
			SLOTTFTP99Ms: float64(st.spec.SLO) / float64(time.Millisecond),
			TTFTMs:       percentiles(l.ttft, 1),
			TPOTMs:       percentiles(l.tpot, 2),
			E2EMs:        percentiles(l.e2e, 1),
		}
		if all == nil {
			all, _ = serving.NewHist(time.Millisecond, maxLatency, histRatio)
		}
		_ = all.Merge(l.ttft) // same bins by construction
	}
	v, _ := all.Quantile(0.99)
	return out, roundTo(float64(v)/float64(time.Millisecond), 1)
}
