package sim

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	_ "embed"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
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
	spec     *Service
	index    int
	dist     *serving.ServiceDist
	loads    []*serving.Load // per user region
	router   serving.Router
	scalers  []*serving.Autoscaler // per serving region
	backlog  []float64
	results  []serving.StepResult
	replicas [][]*job // per serving region: pending and running replica jobs
	next     int      // replica name counter

	// base is the response time at p50, p95, p99 with no queueing and no
	// network: what the service itself takes.
	base [3]time.Duration
	// Last step, for metrics.
	p50       time.Duration
	p99       time.Duration
	p95       time.Duration
	arrivals  float64
	withinSLO float64
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
		dist, err := serving.ProfileDist(prof, sizes)
		if err != nil {
			return nil, fmt.Errorf("sim: service %s: %w", sv.Name, err)
		}
		st := &serviceState{spec: sv, index: i, dist: dist}
		idle := dist.Step(serving.StepInput{Rate: 1, Replicas: 1000, Step: Step})
		st.base = [3]time.Duration{idle.P50, idle.P95, idle.P99}
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
			as, err := serving.NewAutoscaler(dist, serving.AutoscalerConfig{
				SLO: sv.SLO, TargetUtilization: 0.8, MinReplicas: sv.MinReplicas, MaxReplicas: sv.MaxReplicas,
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
		st.replicas = make([][]*job, n)
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
			running := 0
			st.replicas[ri] = compact(st.replicas[ri])
			for _, j := range st.replicas[ri] {
				if j.w.Running != nil && !s.now.Before(j.progressFrom) {
					running++
				}
			}
			st.results[ri] = st.dist.Step(serving.StepInput{Rate: rates[ri], Replicas: running, Step: Step, Backlog: st.backlog[ri], MaxWait: 30 * time.Second})
			st.backlog[ri] = st.results[ri].Backlog
			st.router.Endpoints[ri].Healthy = serving.Probe(running, &st.results[ri], 10*time.Second)
			want := st.scalers[ri].Decide(len(st.replicas[ri]), rates[ri], st.backlog[ri]).Replicas
			s.scaleTo(st, ri, want)
		}
		parts := serving.UserLatency(flows, st.results)
		st.arrivals = 0
		for _, r := range st.results {
			st.arrivals += r.Arrivals
		}
		st.p50 = serving.MixQuantile(parts, 0.5)
		st.p99 = serving.MixQuantile(parts, 0.99)
		st.p95 = serving.MixQuantile(parts, 0.95)
		st.withinSLO = 1 - serving.MixExceed(parts, sv.SLO)
	}
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
		s.seq++
		class := sv.Class
		if class == "" {
			class = sv.Name
		}
		w := &workload.Workload{Spec: workload.Spec{
			Name:     workload.ID(fmt.Sprintf("%s-%s-r%05d", sv.Name, sv.Regions[ri], st.next)),
			Kind:     workload.KindInference,
			Tenant:   sv.Tenant,
			Priority: sv.Priority,
			GPUs:     resource.GPUs(1),
			Replicas: 1,
			Flavors:  []fleet.ModelID{sv.Flavor},
			Regions:  []string{sv.Regions[ri]},
			Labels:   map[string]string{"class": class},
		}, SubmittedAt: s.now}
		decl := s.widen(class, &w.Spec)
		j := &job{w: w, gen: -1, svc: st.index, region: ri, class: class, remaining: s.end.Sub(s.now) + time.Hour, declared: decl,
			basePriority: w.Priority, basePreempt: w.Preemptible}
		s.applyClass(j)
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

// addedLatency is what users waited beyond the service's own processing
// time at p50, p95 and p99, in seconds: network round trips plus queueing.
// This is the latency policies watch ("p95 latency above 150ms"): it is
// near zero when replicas keep up and grows as soon as they do not.
func (st *serviceState) addedLatency() [3]float64 {
	v := [3]time.Duration{st.p50, st.p95, st.p99}
	var out [3]float64
	for i := range v {
		out[i] = max(0, min(v[i], maxLatency)-st.base[i]).Seconds()
	}
	return out
}
