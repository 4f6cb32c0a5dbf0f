package serving

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/arbiterhq/arbiter/internal/trace"
)

// ErrNoJobs: a service distribution needs at least one job.
var ErrNoJobs = errors.New("serving: no jobs")

// maxPoints bounds the size of the discretised latency table.
const maxPoints = 180

// ServiceDist is what the queueing model needs to know about the requests a
// service receives: the mean and squared coefficient of variation of the
// occupancy (for the waiting time) and the distribution of the in-service
// latency, discretised into at most 180 weighted points — fine in the tail,
// coarse in the body — so that a percentile costs O(points) and never
// allocates.
//
// Binning: the sorted latencies are cut at probability levels 1% apart up
// to 0.9, 0.2% to 0.98, 0.05% to 0.999, 0.01% to 0.9999,
// then one last bin; each bin becomes one point, at its median sample, with
// its probability as weight (empty bins vanish). The fine bins around the
// 95th–99.9th percentiles keep tail quantiles within a fraction of a
// percent of the sample's; the mean latency is kept exact separately.
//
// A ServiceDist is immutable and safe to share.
type ServiceDist struct {
	occMean float64 // E[occupancy], seconds
	occSCV  float64 // Var[occupancy]/E[occupancy]²
	latMean float64 // E[latency], seconds

	n   int
	lat [maxPoints]float64 // ascending latency points, seconds
	w   [maxPoints]float64 // their probabilities (sum 1)
	cw  [maxPoints]float64 // cw[k] = w[0]+...+w[k]
	cwl [maxPoints]float64 // cwl[k] = w[0]·lat[0]+...+w[k]·lat[k]
}

// NewServiceDist summarises a sample of jobs (for example one per request of
// a trace, see ProfileDist).
func NewServiceDist(jobs []Job) (*ServiceDist, error) {
	if len(jobs) == 0 {
		return nil, ErrNoJobs
	}
	n := float64(len(jobs))
	lats := make([]float64, len(jobs))
	var s1, s2 float64
	for i, j := range jobs {
		if j.Occupancy < 0 || j.Latency < 0 {
			return nil, fmt.Errorf("serving: job %d has a negative duration (%v, %v)", i, j.Occupancy, j.Latency)
		}
		o := j.Occupancy.Seconds()
		s1 += o
		s2 += o * o
		lats[i] = j.Latency.Seconds()
	}
	d := &ServiceDist{occMean: s1 / n}
	if !(d.occMean > 0) {
		return nil, fmt.Errorf("serving: jobs have zero mean occupancy")
	}
	d.occSCV = max(0, s2/n/(d.occMean*d.occMean)-1)
	sort.Float64s(lats)
	d.bin(lats)
	return d, nil
}

// levels are the probability levels where latency bins are cut.
var levels = func() []float64 {
	var out []float64
	add := func(from, to, step float64) {
		for k := 0; ; k++ {
			u := from + float64(k)*step
			if u >= to-step/2 {
				return
			}
			out = append(out, u)
		}
	}
	add(0, 0.9, 0.01)
	add(0.9, 0.98, 0.002)
	add(0.98, 0.999, 0.0005)
	add(0.999, 0.9999, 0.0001)
	out = append(out, 0.9999, 1)
	return out
}()

func (d *ServiceDist) bin(sorted []float64) {
	n := len(sorted)
	prev := 0
	var sum float64
	for _, u := range levels[1:] {
		end := int(math.Round(u * float64(n)))
		if end <= prev {
			continue
		}
		for _, v := range sorted[prev:end] {
			sum += v
		}
		d.lat[d.n] = sorted[(prev+end)/2]
		d.w[d.n] = float64(end-prev) / float64(n)
		d.n++
		prev = end
	}
	d.latMean = sum / float64(n)
	var cw, cwl float64
	for k := 0; k < d.n; k++ {
		cw += d.w[k]
		cwl += d.w[k] * d.lat[k]
		d.cw[k], d.cwl[k] = cw, cwl
	}
	d.cw[d.n-1] = 1
}

// ProfileDist is the service distribution of requests of the trace's sizes
// served by replicas of profile p.
func ProfileDist(p Profile, sizes *trace.TokenDist) (*ServiceDist, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	all := sizes.Sizes()
	jobs := make([]Job, len(all))
	for i, s := range all {
		jobs[i] = p.Job(s)
	}
	return NewServiceDist(jobs)
}

// MeanOccupancy is the mean time a request keeps a replica busy; its
// inverse is a replica's capacity in requests per second.
func (d *ServiceDist) MeanOccupancy() time.Duration { return seconds(d.occMean) }

// OccupancySCV is the squared coefficient of variation of the occupancy.
func (d *ServiceDist) OccupancySCV() float64 { return d.occSCV }

// MeanLatency is the mean in-service latency.
func (d *ServiceDist) MeanLatency() time.Duration { return seconds(d.latMean) }

// Capacity is the most requests per second that c replicas can serve.
func (d *ServiceDist) Capacity(c int) Rate { return Rate(float64(c) / d.occMean) }

// LatencyQuantile is the p-quantile of the discretised in-service latency.
func (d *ServiceDist) LatencyQuantile(p float64) time.Duration {
	return seconds(d.lat[d.indexAt(p)])
}

// indexAt is the first point whose cumulative weight reaches p.
func (d *ServiceDist) indexAt(p float64) int {
	k, _ := slices.BinarySearch(d.cw[:d.n], p-1e-12)
	return min(k, d.n-1)
}

// tail returns P(L > x).
func (d *ServiceDist) tail(x float64) float64 { return d.tailAt(d.upTo(x)) }

// tailAt is tail(x) given k = upTo(x).
func (d *ServiceDist) tailAt(k int) float64 {
	if k < 0 {
		return 1
	}
	return 1 - d.cw[k]
}

// advance returns upTo(x) given k = upTo(x') for some x' ≤ x (or -1): the
// same index upTo's binary search finds, found by walking forward, so that
// evaluations at increasing x cost O(points) together.
func (d *ServiceDist) advance(k int, x float64) int {
	for k+1 < d.n && d.lat[k+1] <= x {
		k++
	}
	return k
}

// upTo returns the index of the last point ≤ x, or -1.
func (d *ServiceDist) upTo(x float64) int {
	k, found := slices.BinarySearch(d.lat[:d.n], x)
	if found {
		for k+1 < d.n && d.lat[k+1] == x {
			k++
		}
		return k
	}
	return k - 1
}

// meanMin returns E[min(L, x)], with E[min(L, x)] = x for x < 0 (so that
// its differences integrate the tail P(L > y) over any interval).
func (d *ServiceDist) meanMin(x float64) float64 {
	if x < 0 {
		return x
	}
	return d.meanMinAt(x, d.upTo(x))
}

// meanMinAt is meanMin(x) given k = upTo(x).
func (d *ServiceDist) meanMinAt(x float64, k int) float64 {
	if x < 0 || k < 0 {
		return x
	}
	return d.cwl[k] + x*(1-d.cw[k])
}

// ProfileFirstTokenDist is like ProfileDist, but its in-service latency is
// the time to the first token (overhead plus prefill of the uncached
// prompt), not to the last: stepped with the same input as ProfileDist's,
// its response time is the time to first token of the same requests, since
// both share the occupancy and hence the wait.
func ProfileFirstTokenDist(p Profile, sizes *trace.TokenDist) (*ServiceDist, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	all := sizes.Sizes()
	jobs := make([]Job, len(all))
	for i, s := range all {
		j := p.Job(s)
		jobs[i] = Job{Occupancy: j.Occupancy, Latency: j.FirstToken}
	}
	return NewServiceDist(jobs)
}

// ProfileDistAtTPOT is like ProfileDist, but a request's in-service
// latency is its time to first token plus one decode step of tpot for each
// later token: the end-to-end time on a replica whose batch decodes at
// that speed (see Profile.TPOT). The occupancy, and so the queue, is
// ProfileDist's.
func ProfileDistAtTPOT(p Profile, sizes *trace.TokenDist, tpot time.Duration) (*ServiceDist, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if tpot <= 0 {
		return nil, fmt.Errorf("serving: time per output token %v must be > 0", tpot)
	}
	all := sizes.Sizes()
	jobs := make([]Job, len(all))
	for i, s := range all {
		j := p.Job(s)
		jobs[i] = Job{Occupancy: j.Occupancy, Latency: j.FirstToken + time.Duration(max(0, int64(s.Generated)-1))*tpot}
	}
	return NewServiceDist(jobs)
}
