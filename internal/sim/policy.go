package sim

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/policy/effects"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// policyRun evaluates a strategy's rules every step and applies the
// actions in force to the run, through the policy runtime
// (internal/policy/effects) that the server calls too.
type policyRun struct {
	eng    *policy.Engine
	name   string // the policy's name, as the server would know it
	firing []Firing
	rt     *effects.State
	// eff are the effects of the actions in force this step.
	eff    *effects.Effects
	values metricValues
	// windows hold the metrics the world gives (effects.Sample) and the
	// scripted samples, over the same windows as the server's.
	windows *policy.Windows
	tenants []string
	samples []MetricSample // scripted, in time order; consumed as they pass
	// recovering lists firings waiting for p99 to return under the SLO.
	recovering []int
	// nodes is the fleet as the policy runtime sees it (built once).
	nodes []effects.Node
	// capacity is the nodes' GPUs per target (summed once).
	capacity *effects.Capacity
	// busy is set when the policy reads busy_utilization (busy.go);
	// nodeIdx finds a node's place in nodes.
	busy    bool
	nodeIdx map[fleet.NodeID]int
}

// Firing is one entry of a run's policy log, with what it did.
type Firing struct {
	policy.Firing
	// Effect says what the firing rule's actions changed when it fired
	// (the caps they put on its targets); Caps are those caps.
	Effect string        `json:"effect"`
	Caps   []effects.Cap `json:"-"`
	// WorstP99 and SLO are the worst service's p99 and its SLO when the
	// rule changed state; Recovered is how long after a firing every
	// service's p99 was back under its SLO (-1 if it never was in the run,
	// 0 if it was not above at the firing).
	WorstP99  time.Duration `json:"worst_p99"`
	SLO       time.Duration `json:"slo"`
	Recovered time.Duration `json:"recovered"`
}

// metricValues are the current step's values, in the engine's base units.
type metricValues struct {
	utilization float64            // allocated / capacity, whole fleet
	tenantUtil  map[string]float64 // tenant GPUs / fleet capacity
	// latency is the time to first token at p50, p95, p99, seconds, of
	// the worst service (p50_latency, p95_latency, p99_latency: a rule
	// that names a latency metric reads TTFT).
	latency     [3]float64
	svcLatency  map[string][3]float64
	pendingGPUs float64
	failRate    float64 // capacity failures / requests this step
}

// MetricSample is a scripted sample of a metric, replayed into the run's
// policy windows at its time, as a metrics source pushes it to the server.
type MetricSample struct {
	At     time.Duration // after the scenario's start
	Metric policy.Metric
	Target policy.Target
	Value  float64
}

// policyMetrics is what the run's rules read: the windows for the metrics
// the world gives and for those scripted; the simulator's own models
// (service latency, capacity failures) for the rest.
type policyMetrics struct{ p *policyRun }

func (m policyMetrics) Value(q policy.Query) (float64, bool) {
	if effects.Sources[q.Metric][q.Target.Kind] == effects.FromWorld {
		return m.p.windows.Value(q)
	}
	if v, ok := m.p.windows.Value(q); ok {
		return v, true
	}
	return m.p.values.Value(q)
}

func (m *metricValues) Value(q policy.Query) (float64, bool) {
	lat := func(v [3]float64) (float64, bool) {
		switch q.Metric {
		case policy.MetricP50Latency:
			return v[0], true
		case policy.MetricP95Latency:
			return v[1], true
		case policy.MetricP99Latency:
			return v[2], true
		}
		return 0, false
	}
	switch q.Metric {
	case policy.MetricUtilization:
		switch q.Target.Kind {
		case policy.TargetCluster:
			return m.utilization, true
		case policy.TargetTenant:
			v, ok := m.tenantUtil[q.Target.Name]
			return v, ok
		}
	case policy.MetricP50Latency, policy.MetricP95Latency, policy.MetricP99Latency:
		switch q.Target.Kind {
		case policy.TargetCluster:
			return lat(m.latency)
		case policy.TargetService:
			if v, ok := m.svcLatency[q.Target.Name]; ok {
				return lat(v)
			}
		}
	case policy.MetricPendingGPUs:
		if q.Target.Kind == policy.TargetCluster {
			return m.pendingGPUs, true
		}
	case policy.MetricCapacityFailureRate:
		if q.Target.Kind == policy.TargetCluster {
			return m.failRate, true
		}
	}
	return 0, false
}

// loadPolicy reads the strategy's policy file, resolves its targets against
// the scenario and builds the engine. Built-in strategies name files of
// fsys; strategies from disk name files relative to themselves.
func (s *Sim) loadPolicy() error {
	if s.st.Policies == "" {
		return nil
	}
	if s.st.readFile == nil {
		return fmt.Errorf("sim: strategy %s names policies but was not loaded from a file", s.st.Name)
	}
	data, err := s.st.readFile(s.st.Policies)
	if err != nil {
		return fmt.Errorf("sim: strategy %s: policies: %w", s.st.Name, err)
	}
	p, err := policy.Load(s.st.Policies, data)
	if err != nil {
		return err
	}
	if err := p.Resolve(s.targets()); err != nil {
		return err
	}
	eng, err := policy.NewEngine(p)
	if err != nil {
		return err
	}
	s.pol = &policyRun{eng: eng, name: PolicyName(s.st.Policies), rt: effects.NewState(), eff: &effects.Effects{},
		windows: policy.NewWindows(effects.Window), samples: slices.Clone(s.samples), busy: p.Reads(policy.MetricBusyUtilization)}
	for _, t := range s.cfg.Tree.Tenants {
		s.pol.tenants = append(s.pol.tenants, t.Name)
	}
	s.pol.nodes = s.policyNodes()
	s.tally = newGPUTally(s.pol.nodes)
	for _, j := range s.jobs { // none yet, unless a caller submitted some
		s.tally.track(j)
	}
	return nil
}

// targets lists what the scenario's policies may name.
func (s *Sim) targets() policy.Targets {
	var t policy.Targets
	for _, ten := range s.cfg.Tree.Tenants {
		t.Tenants = append(t.Tenants, ten.Name)
	}
	add := func(xs *[]string, x string) {
		if !slices.Contains(*xs, x) {
			*xs = append(*xs, x)
		}
	}
	for _, g := range s.sc.Generators {
		c := g.Class
		if c == "" {
			c = g.Name
		}
		add(&t.Classes, c)
		if v := g.Labels["service"]; v != "" {
			add(&t.Services, v) // as the server knows services: by label
		}
	}
	for _, sv := range s.sc.Services {
		c := sv.Class
		if c == "" {
			c = sv.Name
		}
		add(&t.Classes, c)
		add(&t.Services, sv.Name)
	}
	t.Pools = []string{effects.LowPriorityPool}
	for _, n := range s.cfg.Fleet.Nodes {
		if p := n.Labels[sched.PoolLabel]; p != "" {
			add(&t.Pools, p)
		}
	}
	for _, m := range s.cfg.Fleet.Catalog.ModelNames() {
		t.Flavors = append(t.Flavors, string(m))
	}
	t.Regions = append(t.Regions, s.cfg.Fleet.Regions...)
	return t
}

// stepPolicy measures, evaluates the rules and applies what is in force.
func (s *Sim) stepPolicy() {
	if s.pol == nil {
		return
	}
	p := s.pol
	world := s.runtimeWorld()
	obs, tot := s.sample(world)
	s.measureFrom(&p.values, tot)
	for len(p.samples) > 0 && !s.sc.Start.Add(p.samples[0].At).After(s.now) {
		x := p.samples[0]
		p.windows.ObserveMetric(x.Metric, x.Target, s.sc.Start.Add(x.At), x.Value)
		p.samples = p.samples[1:]
	}
	s.stepProbes(p.windows)
	if p.busy {
		obs = append(obs, s.busySample(world.Nodes)...)
	}
	effects.Observe(p.windows, s.now, obs)
	step := p.eng.Evaluate(s.now, policyMetrics{p})
	active := make([]effects.Active, len(step.Active))
	for i, a := range step.Active {
		active[i] = effects.Active{Policy: p.name, ActiveAction: a}
	}
	eff := p.rt.Compute(world, active)
	for _, f := range step.Firings {
		effect := ""
		var caps []effects.Cap
		if f.Event == policy.EventFired {
			// The rule's own caps: another rule's, in force at the time,
			// are that rule's effect.
			for _, c := range eff.Limits {
				if c.Hold.Policy == p.name && c.Hold.Rule == f.Rule {
					effect += c.Why + "; "
					caps = append(caps, c)
				}
			}
		}
		worst, slo := s.worstP99()
		fr := Firing{Firing: f, Effect: effect, Caps: caps, WorstP99: worst, SLO: slo}
		if f.Event == policy.EventFired && worst > slo {
			fr.Recovered = -1
			p.recovering = append(p.recovering, len(p.firing))
		}
		p.firing = append(p.firing, fr)
		s.metrics.res.PolicyFirings++
	}
	if !reflect.DeepEqual(eff, p.eff) {
		s.dirty = true
	}
	p.eff = eff
	if len(p.recovering) > 0 {
		if worst, slo := s.worstP99(); worst <= slo {
			for _, i := range p.recovering {
				p.firing[i].Recovered = s.now.Sub(p.firing[i].Time)
			}
			p.recovering = p.recovering[:0]
		}
	}
}

// sample is effects.SampleTotals of the world, from the run's tally of
// the live jobs' GPUs when it is exact (no scan of every job each step).
func (s *Sim) sample(world effects.World) ([]effects.Observation, *effects.Totals) {
	if tot, ok := s.tally.totals(); ok {
		if s.pol.capacity == nil { // the fleet does not change: sum it once
			s.pol.capacity = effects.FleetCapacity(world.Nodes, nil)
		}
		return s.pol.capacity.Observations(s.pol.tenants, tot), tot
	}
	return effects.SampleTotals(world, s.pol.tenants, nil)
}

// worstP99 returns the TTFT p99 and SLO of the service furthest above (or
// closest to) its SLO this step.
func (s *Sim) worstP99() (p99, slo time.Duration) {
	best := -1.0
	for _, st := range s.services {
		r := float64(st.ttft[2]) / float64(st.spec.SLO)
		if r > best {
			best, p99, slo = r, min(st.ttft[2], maxLatency), st.spec.SLO
		}
	}
	return p99, slo
}

// runtimeWorld is the run as the policy runtime sees it: the fleet's
// nodes and the live jobs' workloads, with their own specs.
func (s *Sim) runtimeWorld() effects.World {
	if s.pol.nodes == nil { // the fleet does not change: list it once
		s.pol.nodes = s.policyNodes()
	}
	w := effects.World{Nodes: s.pol.nodes, Workloads: make([]*workload.Workload, 0, len(s.jobs))}
	for _, j := range s.jobs {
		if !j.done {
			w.Workloads = append(w.Workloads, j.w)
		}
	}
	return w
}

// policyNodes is the fleet as the policy runtime sees it.
func (s *Sim) policyNodes() []effects.Node {
	var out []effects.Node
	for _, n := range s.cfg.Fleet.Nodes {
		out = append(out, effects.Node{ID: n.ID, Model: n.Model, Region: n.Region, Pool: n.Labels[sched.PoolLabel], GPUs: n.GPUs})
	}
	return out
}

// PolicyName is the name a policy file is known by, as the server names
// an applied policy: its base name without the extension.
func PolicyName(file string) string {
	base := path.Base(file)
	return strings.TrimSuffix(base, path.Ext(base))
}

// applyClass sets a job's priority and preemptibility to its own (the
// policy runtime's overrides are applied to the core's copy each cycle,
// as the server does, never to the job).
func (s *Sim) applyClass(j *job) {
	j.w.Priority, j.w.Preemptible = j.basePriority, j.basePreempt
}

// measure fills this step's metric values.
func (s *Sim) measure(m *metricValues) {
	var used float64
	if m.tenantUtil == nil {
		m.tenantUtil = map[string]float64{}
		m.svcLatency = map[string][3]float64{}
	}
	clear(m.tenantUtil)
	var pending float64
	for _, j := range s.jobs {
		if j.done {
			continue
		}
		g := float64(j.gpus()) / resource.PerGPU
		if j.w.Running != nil {
			used += g
			m.tenantUtil[j.w.Tenant] += g
		} else {
			pending += g
		}
	}
	capacity := float64(s.capacity) / resource.PerGPU
	m.utilization = used / capacity
	for k := range m.tenantUtil {
		m.tenantUtil[k] /= capacity
	}
	m.pendingGPUs = pending
	s.measureLatency(m)
}

// measureFrom fills this step's metric values as measure does, reading the
// GPU sums from the policy sample's totals (summed over the same live
// jobs in the same order, so bit for bit measure's; TestMeasureFromSame)
// instead of scanning the jobs again.
func (s *Sim) measureFrom(m *metricValues, tot *effects.Totals) {
	if m.tenantUtil == nil {
		m.tenantUtil = map[string]float64{}
		m.svcLatency = map[string][3]float64{}
	}
	clear(m.tenantUtil)
	capacity := float64(s.capacity) / resource.PerGPU
	m.utilization = tot.Used(policy.Cluster) / capacity
	tot.EachUsedTenant(func(t string, g float64) { m.tenantUtil[t] = g / capacity })
	m.pendingGPUs = tot.Pending(policy.Cluster)
	s.measureLatency(m)
}

// measureLatency fills the services' TTFT percentiles and the worst.
func (s *Sim) measureLatency(m *metricValues) {
	m.latency = [3]float64{}
	for _, st := range s.services {
		v := st.ttftSeconds()
		m.svcLatency[st.spec.Name] = v
		for i := range v {
			m.latency[i] = max(m.latency[i], v[i])
		}
	}
}

// StepRecord is what one step of a run did, as the differential test
// compares it with the server: the policy firings, where every running
// workload runs (workload → its nodes, in replica order), and the
// workloads evicted by the core.
type StepRecord struct {
	Time    time.Time
	Firings []policy.Firing
	Running map[workload.ID][]string
	// Replicas are the running workloads' replicas: nodes, GPUs, shares
	// and MIG instances (the core's placements as the run applied them).
	Replicas map[workload.ID][]workload.Replica
	Evicted  []workload.ID
	Priority map[workload.ID]workload.Priority // effective, as the core saw it
	// Notifications are what the step's firings' notify actions send.
	Notifications []effects.Notification
}

func (s *Sim) stepRecord() StepRecord {
	r := StepRecord{Time: s.now, Running: map[workload.ID][]string{}, Replicas: map[workload.ID][]workload.Replica{}, Evicted: s.stepEvicted, Priority: map[workload.ID]workload.Priority{}}
	s.stepEvicted = nil
	if s.pol != nil {
		for _, f := range s.pol.firing {
			if f.Time.Equal(s.now) {
				r.Firings = append(r.Firings, f.Firing)
				r.Notifications = append(r.Notifications, effects.Notifications(s.pol.name, f.Firing)...)
			}
		}
	}
	for _, j := range s.jobs {
		if j.done {
			continue
		}
		w := j.w
		if s.pol != nil {
			w, _ = s.pol.eff.Override(j.w)
		}
		r.Priority[j.w.Name] = w.Priority
		if j.w.Running != nil {
			var nodes []string
			for _, rep := range j.w.Running.Replicas {
				nodes = append(nodes, string(rep.Node))
			}
			r.Running[j.w.Name] = nodes
			r.Replicas[j.w.Name] = slices.Clone(j.w.Running.Replicas)
		}
	}
	return r
}
