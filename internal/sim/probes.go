package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/probe"
	"github.com/arbiterhq/arbiter/internal/serving"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// Probes in the simulator. A scenario's probes: list is the server
// config's (internal/probe; the URL, method, body, headers file and from:
// are read but mean nothing here). Each probe targets a service of the
// scenario (service:<name>, by default its own name). Every interval it
// makes one attempt, which is one request as that service's users see it
// that step: its time to first token is drawn from the step's TTFT
// distribution (queueing, network and rejections included). An attempt
// slower than the timeout, or one that no replica serves, fails and counts
// as its timeout, as on the server. The attempts become the same samples
// the server records: p50/p95/p99_latency and success_ratio of the
// probe's target and of the cluster, in the policies' windows, so a rule
// keyed to a probe is tested on the simulator before it goes live.
//
// The draws are deterministic (a hash of the run's seed, the probe and the
// attempt) and touch no other random stream: a scenario without probes
// runs exactly as before.

// probeGrid is how many quantiles of a step's TTFT distribution an
// attempt's draw interpolates between (at (i+½)/probeGrid).
const probeGrid = 64

type simProbe struct {
	p    probe.Probe
	svc  *serviceState
	next time.Time
	n    uint64
	key  uint64
}

// checkProbes checks the scenario's probes: as the server does, and each
// must measure one of the scenario's services.
func (s *Scenario) checkProbes(file string, errs *yamlfile.Errors) {
	ps, pe := probe.Check(file, "probes", s.Probes)
	*errs = append(*errs, pe...)
	names := map[string]bool{}
	for _, sv := range s.Services {
		names[sv.Name] = true
	}
	for i, p := range ps {
		if p.Target.Kind != policy.TargetService || !names[p.Target.Name] {
			pos := s.Probes[i].Pos
			if pos.Line == 0 {
				pos = yamlfile.Pos{File: file, Line: 1, Col: 1}
			}
			errs.Add(pos, fmt.Sprintf("probes[%d].target", i), "in a scenario a probe measures one of its services: %s is none (set target: service:NAME)", p.Target)
		}
	}
	s.probes = ps
}

// newProbes pairs the scenario's probes with their services.
func (s *Sim) newProbes(seed uint64) []*simProbe {
	var out []*simProbe
	for _, p := range s.sc.probes {
		for _, st := range s.services {
			if st.spec.Name == p.Target.Name {
				h := fnv.New64a()
				h.Write([]byte(p.Name))
				out = append(out, &simProbe{p: p, svc: st, next: s.sc.Start, key: h.Sum64() ^ seed*0x9e3779b97f4a7c15})
			}
		}
	}
	return out
}

// stepProbes makes the attempts due by now, each one request of this
// step's TTFT distribution of its service, into ws.
func (s *Sim) stepProbes(ws *policy.Windows) {
	for _, sp := range s.probes {
		if sp.next.After(s.now) {
			continue
		}
		grid := sp.svc.ttftGrid()
		for ; !sp.next.After(s.now); sp.next = sp.next.Add(sp.p.Interval) {
			lat, ok := sp.draw(grid)
			secs, v := lat.Seconds(), 0.0
			if ok {
				v = 1
			}
			for _, t := range []policy.Target{sp.p.Target, policy.Cluster} {
				ws.ObserveMetric(policy.MetricP95Latency, t, sp.next, secs)
				ws.ObserveMetric(policy.MetricSuccessRatio, t, sp.next, v)
			}
		}
	}
}

// draw is the latency of the probe's next attempt, and whether it
// succeeded (a failure takes the timeout).
func (sp *simProbe) draw(grid *[probeGrid]time.Duration) (time.Duration, bool) {
	sp.n++
	u := float64(splitmix(sp.key+sp.n)>>11) / (1 << 53) // [0, 1)
	x := u*probeGrid - 0.5
	i := int(math.Floor(x))
	var lat time.Duration
	switch {
	case i < 0:
		lat = grid[0]
	case i >= probeGrid-1:
		lat = grid[probeGrid-1]
	case grid[i+1] == serving.Unbounded || grid[i] == serving.Unbounded:
		lat = serving.Unbounded
	default:
		f := x - float64(i)
		lat = grid[i] + time.Duration(f*float64(grid[i+1]-grid[i]))
	}
	if lat >= sp.p.Timeout {
		return sp.p.Timeout, false
	}
	return lat, true
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// ttftGrid is the step's TTFT distribution at probeGrid quantiles,
// computed once per step and only for probed services.
func (st *serviceState) ttftGrid() *[probeGrid]time.Duration {
	if !st.gridOK {
		for i := range st.grid {
			st.grid[i] = serving.MixQuantile(st.ttftParts, (float64(i)+0.5)/probeGrid)
		}
		st.gridOK = true
	}
	return &st.grid
}
