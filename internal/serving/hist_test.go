package serving

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/trace"
)

func histExpDist(t *testing.T, n int, mean time.Duration) *ServiceDist {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	jobs := make([]Job, n)
	for i := range jobs {
		x := seconds(r.ExpFloat64() * mean.Seconds())
		jobs[i] = Job{Occupancy: x, Latency: x}
	}
	d, err := NewServiceDist(jobs)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func near(a, b time.Duration, rel float64) bool {
	return math.Abs(a.Seconds()-b.Seconds()) <= rel*b.Seconds()
}

// A histogram of one step's mixture has that mixture's quantiles (within
// the bins' 1%), stationary or with a backlog.
func TestHistMatchesMixture(t *testing.T) {
	d := histExpDist(t, 5000, 100*time.Millisecond)
	for _, in := range []StepInput{
		{Rate: 70, Replicas: 10, Step: time.Minute},
		{Rate: 120, Replicas: 10, Step: time.Minute, Backlog: 50, MaxWait: 30 * time.Second},
	} {
		r := d.Step(in)
		parts := []Part{{Weight: 3, Shift: 20 * time.Millisecond, Resp: &r.Response}, {Weight: 1, Shift: 90 * time.Millisecond, Resp: &r.Response}}
		h, err := NewHist(time.Millisecond, time.Minute, 1.02)
		if err != nil {
			t.Fatal(err)
		}
		h.AddMix(parts)
		if math.Abs(h.Total()-4) > 1e-9 {
			t.Fatalf("total %v, want 4", h.Total())
		}
		for _, p := range []float64{0.5, 0.95, 0.99} {
			got, beyond := h.Quantile(p)
			want := MixQuantile(parts, p)
			if beyond || !near(got, want, 0.011) {
				t.Errorf("%+v: p%.0f %v (beyond %v), mixture %v", in, 100*p, got, beyond, want)
			}
		}
	}
}

// Percentiles over requests weigh each step by its requests: a busy slow
// step outweighs a quiet fast one, unlike a time-average of step p99s; and
// requests turned away sit past the top.
func TestHistWeighsRequests(t *testing.T) {
	h, _ := NewHist(time.Millisecond, time.Minute, 1.02)
	h.AddPoint(10*time.Millisecond, 1)   // a quiet step
	h.AddPoint(500*time.Millisecond, 99) // a busy one
	if q, _ := h.Quantile(0.5); !near(q, 500*time.Millisecond, 0.02) {
		t.Errorf("median %v, want about 500ms", q)
	}
	h.AddNever(100)
	if q, beyond := h.Quantile(0.99); !beyond || q != time.Minute {
		t.Errorf("p99 with half the requests turned away: %v beyond=%v, want 1m0s beyond", q, beyond)
	}
	if q, beyond := h.Quantile(0.25); beyond || !near(q, 500*time.Millisecond, 0.02) {
		t.Errorf("p25 %v beyond=%v", q, beyond)
	}
	var empty Hist
	if q, beyond := empty.Quantile(0.5); q != 0 || beyond {
		t.Errorf("empty: %v %v", q, beyond)
	}
}

func TestHistBadInput(t *testing.T) {
	for _, c := range []struct {
		lo, hi time.Duration
		ratio  float64
	}{{0, time.Second, 1.02}, {time.Second, time.Second, 1.02}, {time.Millisecond, time.Second, 1}, {time.Millisecond, time.Second, math.NaN()}} {
		if _, err := NewHist(c.lo, c.hi, c.ratio); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	h, _ := NewHist(time.Millisecond, time.Second, 1.5)
	h.AddPoint(time.Millisecond, math.NaN())
	h.AddPoint(time.Millisecond, -1)
	h.AddNever(math.Inf(1))
	if h.Total() != 0 {
		t.Errorf("bad weights counted: %v", h.Total())
	}
	o, _ := NewHist(time.Millisecond, time.Second, 1.02)
	if h.Merge(o) == nil {
		t.Error("merged histograms with different bins")
	}
}

// TPOT is one decode step at the batch Little's law gives: faster on a
// quiet replica, a full batch's step (1/DecodeTPS) at saturation.
func TestTPOT(t *testing.T) {
	p := h100(t)
	full := seconds(1 / p.DecodeTPS)
	if got := p.TPOT(1e9); !near(got, full, 1e-5) { // both round to the ns
		t.Errorf("saturated TPOT %v, want the full batch's %v", got, full)
	}
	if got, want := p.TPOT(0), p.StepBase+p.StepPerStream; got != want {
		t.Errorf("idle TPOT %v, want one stream's step %v", got, want)
	}
	prev := time.Duration(0)
	for _, tps := range []float64{10, 100, 300, 600, 1000, 1500} {
		got := p.TPOT(tps)
		if got < prev || got > full {
			t.Errorf("TPOT(%v) = %v after %v, full %v", tps, got, prev, full)
		}
		// Little's law holds at the answer: streams = tokens/s × step.
		b := tps * got.Seconds()
		if b >= 1 && b <= float64(p.Batch) {
			if step := p.StepBase + time.Duration(b*float64(p.StepPerStream)); !near(step, got, 1e-3) {
				t.Errorf("TPOT(%v) = %v, but %g streams step in %v", tps, got, b, step)
			}
		}
		prev = got
	}
	hand := Profile{GPU: "X", GPUsPerReplica: 1, PrefillTPS: 1, DecodeTPS: 50, Batch: 4}
	if got := hand.TPOT(123); got != 20*time.Millisecond {
		t.Errorf("hand profile TPOT %v, want 1/DecodeTPS", got)
	}
}

func TestContextCache(t *testing.T) {
	p := Profile{GPU: "X", GPUsPerReplica: 1, PrefillTPS: 1000, DecodeTPS: 10, Batch: 4, Overhead: 10 * time.Millisecond, ContextCacheHit: 0.9}
	j := p.Job(trace.TokenSizes{Context: 500, Generated: 20})
	// prefill 50 of 500 tokens: 0.05 s; occupancy 0.05 + 0.5; first token 0.06 s.
	if !near(j.FirstToken, 60*time.Millisecond, 1e-6) || !near(j.Occupancy, 550*time.Millisecond, 1e-6) || !near(j.Latency, 2060*time.Millisecond, 1e-6) {
		t.Fatalf("got %+v", j)
	}
	for _, h := range []float64{-0.1, 1, math.NaN()} {
		p.ContextCacheHit = h
		if p.Validate() == nil {
			t.Errorf("cache hit %v accepted", h)
		}
	}
}

// End to end at a decode speed: the first token after prefill, then one
// step per later token; the occupancy stays ProfileDist's.
func TestProfileDistAtTPOT(t *testing.T) {
	p := Profile{GPU: "X", GPUsPerReplica: 1, PrefillTPS: 1000, DecodeTPS: 10, Batch: 4, Overhead: 10 * time.Millisecond}
	sizes, err := trace.NewTokenDist([]trace.AzureRequest{{TokenSizes: trace.TokenSizes{Context: 500, Generated: 21}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := ProfileDistAtTPOT(p, sizes, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := ProfileDist(p, sizes)
	// 0.01 + 0.5 + 20 × 0.005 = 0.61 s.
	if got := d.LatencyQuantile(0.5); !near(got, 610*time.Millisecond, 1e-6) || d.MeanOccupancy() != full.MeanOccupancy() {
		t.Errorf("latency %v occupancy %v (full %v)", got, d.MeanOccupancy(), full.MeanOccupancy())
	}
	if _, err := ProfileDistAtTPOT(p, sizes, 0); err == nil {
		t.Error("zero TPOT accepted")
	}
}

// addMixScan is AddMix as it was before the walks: each edge's tail by
// binary searches and each edge by math.Exp.
func (h *Hist) addMixScan(parts []Part) {
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
	prev := 1.0
	for ; k < len(h.w); k++ {
		g := mixTail(parts, h.min*math.Exp(float64(k+1)*h.logR))
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

// AddMix's walks find the indices the binary searches found and its
// cached edges are the edges: on random steps (stationary, backlogged,
// truncated, rejecting), random shifts and weights, and point masses
// with ties, the bins are equal bit for bit to the former scan's.
func TestAddMixSameAsScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	dists := []*ServiceDist{histExpDist(t, 3000, 80*time.Millisecond), histExpDist(t, 50, 2*time.Second)}
	ties := make([]Job, 40)
	for i := range ties {
		x := time.Duration(1+i%4) * 25 * time.Millisecond // many equal points
		ties[i] = Job{Occupancy: x, Latency: x}
	}
	d, err := NewServiceDist(ties)
	if err != nil {
		t.Fatal(err)
	}
	dists = append(dists, d)
	for trial := 0; trial < 400; trial++ {
		d := dists[trial%len(dists)]
		var parts []Part
		for range 1 + rng.IntN(4) {
			in := StepInput{Rate: Rate(rng.Float64() * 200), Replicas: 1 + rng.IntN(20), Step: time.Minute}
			if rng.IntN(2) == 0 {
				in.Backlog = rng.Float64() * 500
			}
			if rng.IntN(2) == 0 {
				in.MaxWait = time.Duration(rng.IntN(60)+1) * time.Second
			}
			r := d.Step(in)
			parts = append(parts, Part{Weight: rng.Float64() * 10, Shift: time.Duration(rng.IntN(200)) * time.Millisecond, Resp: &r.Response})
		}
		if rng.IntN(4) == 0 {
			parts = append(parts, NeverPart(rng.Float64()))
		}
		a, _ := NewHist(time.Millisecond, time.Minute, 1.02)
		b, _ := NewHist(time.Millisecond, time.Minute, 1.02)
		for range 3 {
			a.AddMix(parts)
			b.addMixScan(parts)
		}
		if a.total != b.total || a.over != b.over {
			t.Fatalf("trial %d: total/over %v/%v, scan %v/%v", trial, a.total, a.over, b.total, b.over)
		}
		for k := range a.w {
			if a.w[k] != b.w[k] {
				t.Fatalf("trial %d: bin %d is %v, scan %v", trial, k, a.w[k], b.w[k])
			}
		}
	}
}

// advance finds upTo's index from any earlier index, also at the points
// themselves and among equal points.
func TestAdvanceSameAsUpTo(t *testing.T) {
	ties := make([]Job, 60)
	for i := range ties {
		x := time.Duration(1+i%5) * 10 * time.Millisecond
		ties[i] = Job{Occupancy: x, Latency: x}
	}
	d, err := NewServiceDist(ties)
	if err != nil {
		t.Fatal(err)
	}
	var xs []float64
	for k := 0; k < d.n; k++ {
		xs = append(xs, d.lat[k], d.lat[k]-1e-12, d.lat[k]+1e-12)
	}
	xs = append(xs, -1, 0, 1e9)
	slices.Sort(xs)
	k := -1
	for _, x := range xs {
		k = d.advance(k, x)
		if want := d.upTo(x); k != want {
			t.Fatalf("advance to %v: %d, upTo %d", x, k, want)
		}
	}
}
