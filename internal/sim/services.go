package sim

import (
	"bytes"
	"fmt"
	"math"
	"sync"
	"time"

	_ "embed"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/serving"
	"github.com/arbiterhq/arbiter/internal/trace"
	"github.com/arbiterhq/arbiter/internal/workload"
)

//go:embed data/AzureLLMInferenceTrace_code.csv
var azureCode []byte

var (
	tokenOnce sync.Once
	tokenDist *trace.TokenDist
	tokenErr  error
)

// codeTokens is the request-size distribution of the embedded Azure code
// trace, read once.
func codeTokens() (*trace.TokenDist, error) {
	tokenOnce.Do(func() {
		reqs, err := trace.ReadAzure(bytes.NewReader(azureCode), "AzureLLMInferenceTrace_code.csv")
		if err != nil {
			tokenErr = err
			return
		}
		tokenDist, tokenErr = trace.NewTokenDist(reqs)
	})
	return tokenDist, tokenErr
}

// serviceState is one inference service during a run.
type serviceState struct {
	// classLabels is its replicas' labels, one map shared by them all.
	classLabels map[string]string
	spec        *Service
	index       int
	prof        serving.Profile
	// e2eDists have the in-service latency to the last token at a ladder
	// of decode speeds, from one stream's step to a full batch's (tpots):
	// each step uses the one nearest its replicas' TPOT.
	e2eDists []*serving.ServiceDist
	tpots    []time.Duration
	// ttftDist has the same occupancy (so the same queue) with the
	// in-service latency to the first token.
	ttftDist *serving.ServiceDist
	meanGen  float64         // mean generated tokens per request
	loads    []*serving.Load // per user region
	router   serving.Router
	scalers  []*serving.Autoscaler // per serving region
	backlog  []float64
	results  []serving.StepResult // per serving region: to the last token
	tpot     []time.Duration      // per serving region: this step's time per output token
	ttftRes  []serving.StepResult // per serving region: to the first token
	replicas [][]*job             // per serving region: pending and running replica jobs
	// elastic is, for an elastic service (Service.Elastic), each serving
	// region's one elastic workload (nil until its first step); replicas
	// is then unused.
	elastic []*job
	running []int // per serving region: replicas serving this step
	next    int   // replica name counter
	// erlang memoises the queue's probability of waiting between the
	// step's two distributions (same occupancy, same input).
	erlang serving.ErlangTable

	// Last step, for metrics and policies: TTFT as users see it at p50,
	// p95, p99, the step's requests and the share answered within the SLO.
	ttft      [3]time.Duration
	arrivals  float64
	withinSLO float64

	// lat holds the whole run's latencies over requests.
	lat *serviceLatency

	// ttftParts is the last step's TTFT distribution as users saw it;
	// grid its quantiles for probes, when gridOK (see probes.go).
	ttftParts []serving.Part
	grid      [probeGrid]time.Duration
	gridOK    bool
}

func newServices(s *Sim, seed uint64) ([]*serviceState, error) {
	var out []*serviceState
	if len(s.sc.Services) == 0 {
		return nil, nil
	}
	sizes, err := codeTokens()
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	for i := range s.sc.Services {
		sv := &s.sc.Services[i]
		prof, ok := serving.LookupProfile(serving.GPUModel(sv.Flavor))
		if !ok {
			return nil, fmt.Errorf("sim: service %s: no serving profile for %s", sv.Name, sv.Flavor)
		}
		prof.ContextCacheHit = sv.ContextCacheHit
		tpots := tpotLadder(prof)
		e2e := make([]*serving.ServiceDist, len(tpots))
		for k, tp := range tpots {
			if e2e[k], err = serving.ProfileDistAtTPOT(prof, sizes, tp); err != nil {
				return nil, fmt.Errorf("sim: service %s: %w", sv.Name, err)
			}
		}
		ttft, err := serving.ProfileFirstTokenDist(prof, sizes)
		if err != nil {
			return nil, fmt.Errorf("sim: service %s: %w", sv.Name, err)
		}
		_, gen := sizes.Mean()
		lat, err := newServiceLatency()
		if err != nil {
			return nil, fmt.Errorf("sim: service %s: %w", sv.Name, err)
		}
		st := &serviceState{spec: sv, index: i, prof: prof, e2eDists: e2e, tpots: tpots, ttftDist: ttft, meanGen: gen, lat: lat}
		method := map[string]serving.RoutingMethod{"": serving.Performance, "performance": serving.Performance,
			"priority": serving.Priority, "weighted": serving.Weighted}[sv.Routing]
		st.router = serving.Router{Method: method, RTT: serving.DefaultRTT()}
		for ri, r := range sv.Regions {
			if !s.cfg.Fleet.HasRegion(r) {
				return nil, fmt.Errorf("sim: service %s: region %q is not in the fleet", sv.Name, r)
			}
			weight := 1.0
			if ri < len(sv.Weights) {
				weight = sv.Weights[ri]
			}
			st.router.Endpoints = append(st.router.Endpoints, serving.Endpoint{Region: serving.Region(r), Priority: ri, Weight: weight, Healthy: true})
			as, err := serving.NewAutoscaler(ttft, serving.AutoscalerConfig{
				SLO: autoscalerSLO(sv.SLO), TargetUtilization: 0.8, MinReplicas: sv.MinReplicas, MaxReplicas: sv.MaxReplicas,
				DownStabilization: 10, MaxScaleDown: 8,
			})
			if err != nil {
				return nil, fmt.Errorf("sim: service %s: %w", sv.Name, err)
			}
			st.scalers = append(st.scalers, as)
		}
		for ui, u := range sv.Users {
			l, err := serving.NewLoad(serving.CodingAssistantLoad(u.PeakHour), seed*1000+uint64(i*10+ui), s.end.Sub(s.sc.Start)+time.Hour, s.sc.Start.Weekday())
			if err != nil {
				return nil, fmt.Errorf("sim: service %s: %w", sv.Name, err)
			}
			st.loads = append(st.loads, l)
		}
		n := len(sv.Regions)
		st.backlog = make([]float64, n)
		st.results = make([]serving.StepResult, n)
		st.tpot = make([]time.Duration, n)
		st.ttftRes = make([]serving.StepResult, n)
		st.running = make([]int, n)
		st.replicas = make([][]*job, n)
		if sv.Elastic {
			st.elastic = make([]*job, n)
		}
		out = append(out, st)
	}
	return out, nil
}

// stepServices serves one step of every service with the replicas that run
// now, records what users saw, and asks for the replicas the autoscalers
// want (new pending replica workloads, or cancelled ones).
func (s *Sim) stepServices() {
	t := s.now.Sub(s.sc.Start)
	for _, st := range s.services {
		sv := st.spec
		demand := make([]serving.Demand, len(sv.Users))
		for ui, u := range sv.Users {
			share := u.Share
			if share == 0 {
				share = 1
			}
			demand[ui] = serving.Demand{From: serving.Region(u.Region), Rate: st.loads[ui].Rate(t) * serving.Rate(sv.Scale*share)}
		}
		flows, err := st.router.Route(demand)
		if err != nil {
			continue
		}
		rates := st.router.EndpointRates(flows)
		for ri := range sv.Regions {
			var running, have int
			if st.elastic != nil {
				running, have = st.elasticReplicas(s.now, ri)
			} else {
				st.replicas[ri] = compact(st.replicas[ri])
				for _, j := range st.replicas[ri] {
					if j.running && !s.now.Before(j.progressFrom) {
						running++
					}
				}
				have = len(st.replicas[ri])
			}
			st.running[ri] = running
			in := serving.StepInput{Rate: rates[ri], Replicas: running, Step: Step, Backlog: st.backlog[ri], MaxWait: 30 * time.Second, Erlang: &st.erlang}
			st.ttftRes[ri] = st.ttftDist.Step(in)
			st.tpot[ri] = st.stepTPOT(&st.ttftRes[ri], running)
			st.results[ri] = st.e2eAt(st.tpot[ri]).Step(in)
			st.backlog[ri] = st.results[ri].Backlog
			st.router.Endpoints[ri].Healthy = serving.Probe(running, &st.results[ri], 10*time.Second)
			want := st.scalers[ri].Decide(have, rates[ri], st.backlog[ri]).Replicas
			if st.elastic != nil {
				s.scaleElastic(st, ri, want)
			} else {
				s.scaleTo(st, ri, want)
			}
		}
		st.observe(flows)
	}
}

// autoscalerSLO is the TTFT bound a region's autoscaler aims at: the SLO
// less the in-region network round trip, which replicas cannot shorten.
func autoscalerSLO(slo time.Duration) time.Duration {
	if slo > 2*serving.UserAccessRTT {
		return slo - serving.UserAccessRTT
	}
	return slo
}

// observe records what the step's users saw: per-step TTFT percentiles for
// policies and the series, and the step's requests into the run's
// histograms of TTFT, TPOT and end-to-end time.
func (st *serviceState) observe(flows []serving.Flow) {
	var rejected float64
	st.arrivals = 0
	for _, r := range st.results {
		st.arrivals += r.Arrivals
		rejected += max(0, r.Rejected)
	}
	// The requests turned away are one more part, never answered.
	ttft := append(requestParts(flows, st.ttftRes), serving.NeverPart(rejected))
	e2e := append(requestParts(flows, st.results), serving.NeverPart(rejected))
	st.ttft = [3]time.Duration{serving.MixQuantile(ttft, 0.5), serving.MixQuantile(ttft, 0.95), serving.MixQuantile(ttft, 0.99)}
	st.ttftParts, st.gridOK = ttft, false
	st.withinSLO = 1 - serving.MixExceed(ttft, st.spec.SLO)
	st.lat.ttft.AddMix(ttft)
	st.lat.e2e.AddMix(e2e)
	st.lat.rejected += rejected
	for ri, r := range st.results {
		if r.Served <= 0 || st.running[ri] == 0 {
			continue
		}
		var w float64
		for _, f := range flows {
			if f.Endpoint == ri {
				w += acceptedOf(f, &r)
			}
		}
		st.lat.tpot.AddPoint(st.tpot[ri], w)
	}
}

// stepTPOT is the time per output token of a region's replicas this
// step: each generates the mean output tokens of the requests it started.
func (st *serviceState) stepTPOT(r *serving.StepResult, running int) time.Duration {
	if running == 0 {
		return st.prof.TPOT(0)
	}
	return st.prof.TPOT(r.Served / Step.Seconds() / float64(running) * st.meanGen)
}

// tpotLadder is the decode speeds the end-to-end distributions are built
// at: tpotLevels steps in geometric progression from one stream's decode
// step to a full batch's (each within 4% of the next), or the profile's
// one speed without a step model.
func tpotLadder(p serving.Profile) []time.Duration {
	lo, hi := p.TPOT(0), p.TPOT(math.MaxFloat64) // idle and saturated
	if hi <= lo {
		return []time.Duration{hi}
	}
	out := make([]time.Duration, tpotLevels)
	for k := range out {
		f := float64(k) / float64(tpotLevels-1)
		out[k] = time.Duration(float64(lo) * math.Pow(float64(hi)/float64(lo), f))
	}
	return out
}

const tpotLevels = 16

// e2eAt is the end-to-end distribution at the ladder's speed nearest tpot.
func (st *serviceState) e2eAt(tpot time.Duration) *serving.ServiceDist {
	best, gap := 0, math.Inf(1)
	for k, v := range st.tpots {
		if g := math.Abs(math.Log(float64(v) / float64(tpot))); g < gap {
			best, gap = k, g
		}
	}
	return st.e2eDists[best]
}

// requestParts are the flows' response-time distributions, each shifted
// by its round trip and weighted by its accepted requests this step.
func requestParts(flows []serving.Flow, results []serving.StepResult) []serving.Part {
	parts := serving.UserLatency(flows, results)
	for i, f := range flows {
		parts[i].Weight = acceptedOf(f, &results[f.Endpoint])
	}
	return parts
}

// acceptedOf is how many of a flow's requests its endpoint accepted this
// step (those it turned away are its share of the endpoint's rejections).
func acceptedOf(f serving.Flow, r *serving.StepResult) float64 {
	n := float64(f.Rate) * Step.Seconds()
	if r.Arrivals > 0 {
		n *= max(0, 1-r.Rejected/r.Arrivals)
	}
	return n
}

func compact(js []*job) []*job {
	out := js[:0]
	for _, j := range js {
		if !j.done {
			out = append(out, j)
		}
	}
	return out
}

// scaleTo submits or cancels replica workloads of a service in one region:
// pending replicas are cancelled before running ones, newest first.
func (s *Sim) scaleTo(st *serviceState, ri, want int) {
	have := len(st.replicas[ri])
	sv := st.spec
	for ; have < want; have++ {
		st.next++
		j := s.serviceJob(st, ri, fmt.Sprintf("%s-%s-r%05d", sv.Name, sv.Regions[ri], st.next), nil)
		st.replicas[ri] = append(st.replicas[ri], j)
		s.submit(j)
	}
	for have > want {
		// Cancel a pending replica if there is one, else the newest running.
		idx := -1
		for k := len(st.replicas[ri]) - 1; k >= 0; k-- {
			if st.replicas[ri][k].w.Running == nil {
				idx = k
				break
			}
		}
		if idx < 0 {
			idx = len(st.replicas[ri]) - 1
		}
		j := st.replicas[ri][idx]
		st.replicas[ri] = append(st.replicas[ri][:idx], st.replicas[ri][idx+1:]...)
		s.finish(j)
		have--
	}
}

// serviceJob is a new inference workload of a service in serving region
// ri, named name, not yet submitted: one replica of one GPU, or for an
// elastic service (el set) the region's elastic workload, pending at its
// min.
func (s *Sim) serviceJob(st *serviceState, ri int, name string, el *workload.Elastic) *job {
	sv := st.spec
	s.seq++
	class := sv.Class
	if class == "" {
		class = sv.Name
	}
	replicas := 1
	if el != nil {
		replicas = el.Min
	}
	w := &workload.Workload{Spec: workload.Spec{
		Name:     workload.ID(name),
		Kind:     workload.KindInference,
		Tenant:   sv.Tenant,
		Priority: sv.Priority,
		GPUs:     resource.GPUs(1),
		Replicas: replicas,
		Elastic:  el,
		Flavors:  []fleet.ModelID{sv.Flavor},
		Regions:  []string{sv.Regions[ri]},
		Labels:   st.labels(class),
	}, SubmittedAt: s.now}
	decl := s.widen(class, &w.Spec)
	j := &job{w: w, gen: -1, svc: st.index, region: ri, class: class, remaining: s.end.Sub(s.now) + time.Hour, declared: decl,
		basePriority: w.Priority, basePreempt: w.Preemptible}
	s.applyClass(j)
	return j
}

// elasticReplicas is, for an elastic service's region ri, how many
// replicas serve this step and how many the autoscaler last asked for
// (the workload's max: what the per-replica path counts as its pending
// and running replicas). Replicas serve as the per-replica path's do: from
// the run's progressFrom (after victims' grace periods); a growth's
// replicas join from the cycle that placed them, so from the next step.
func (st *serviceState) elasticReplicas(now time.Time, ri int) (running, have int) {
	j := st.elastic[ri]
	if j == nil {
		return 0, 0
	}
	if j.running && !now.Before(j.progressFrom) {
		running = len(j.w.Running.Replicas)
	}
	return running, j.w.Elastic.Max
}

// scaleElastic sets an elastic service region's workload's max to the
// replicas the autoscaler wants, within [min, max_replicas]: the core
// grows it toward that into idle capacity, as borrowing, and on reclaim
// shrinks it down to min before it preempts other work. Replicas above a
// lowered max are given back now, the highest first (a shrink, as the
// core's). The first call submits the workload, pending at its min; it
// runs to the end of the run (preempted whole, it waits again at min).
func (s *Sim) scaleElastic(st *serviceState, ri, want int) {
	sv := st.spec
	lo := max(1, sv.MinReplicas)
	want = min(max(want, lo), max(sv.MaxReplicas, lo))
	j := st.elastic[ri]
	if j == nil {
		el := &workload.Elastic{Min: lo, Max: want, Step: 1}
		j = s.serviceJob(st, ri, fmt.Sprintf("%s-%s", sv.Name, sv.Regions[ri]), el)
		st.elastic[ri] = j
		s.submit(j)
		return
	}
	el := j.w.Elastic
	if want == el.Max {
		return
	}
	grows := want > el.Max
	el.Max = want
	if j.w.Running == nil {
		return // pending at its min; placed, the core grows it
	}
	if n := len(j.w.Running.Replicas); n > want {
		s.resize(j, sched.Resize{Workload: j.w.Name, From: n, To: want, Reason: "its autoscaler wants fewer replicas"})
	} else if grows {
		s.dirty = true // the next cycle may grow it
	}
}

// ttftSeconds is this step's TTFT at p50, p95 and p99 in seconds, capped
// at maxLatency: the latency policies watch ("p95 latency above 150ms").
func (st *serviceState) ttftSeconds() [3]float64 {
	var out [3]float64
	for i, v := range st.ttft {
		out[i] = min(v, maxLatency).Seconds()
	}
	return out
}

// Histogram ranges: TTFT and end-to-end time from 1 ms to maxLatency in
// bins 2% apart (quantiles within 1%); TPOT from 0.1 ms to 10 s.
const histRatio = 1.02

// serviceLatency is a service's latencies over every request of a run.
type serviceLatency struct {
	ttft, tpot, e2e *serving.Hist
	rejected        float64 // requests turned away
}

func newServiceLatency() (*serviceLatency, error) {
	ttft, err := serving.NewHist(time.Millisecond, maxLatency, histRatio)
	if err != nil {
		return nil, err
	}
	e2e, _ := serving.NewHist(time.Millisecond, maxLatency, histRatio)
	tpot, _ := serving.NewHist(100*time.Microsecond, 10*time.Second, histRatio)
	return &serviceLatency{ttft: ttft, tpot: tpot, e2e: e2e}, nil
}

// labels returns the service's replicas' labels, {"class": class}: one
// map for them all (nothing writes a workload's labels).
func (st *serviceState) labels(class string) map[string]string {
	if st.classLabels == nil || st.classLabels["class"] != class {
		st.classLabels = map[string]string{"class": class}
	}
	return st.classLabels
}
