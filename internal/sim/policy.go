package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Pools the simulator knows for migrate actions: moving a class to the
// low-priority pool makes it low priority and preemptible, so that anyone
// of higher priority may take its GPUs (its running work is not forcibly
// requeued: it is first in line to be preempted, from its checkpoint).
// A migrate to a region, or to a pool the fleet's nodes carry (their
// "pool" label), narrows the class's acceptable regions or pools to it, as
// the server does: its jobs running elsewhere are evicted and placed again
// there. The low-priority pool keeps its meaning above when no node
// carries it.
const lowPriorityPool = "low_priority_pool"

// policyRun evaluates a strategy's rules every step and applies the
// actions in force to the run.
type policyRun struct {
	eng    *policy.Engine
	firing []Firing
	// Per class: the overrides in force.
	prio    map[string]workload.Priority
	preempt map[string]bool
	capFrac map[string]float64 // scale_down: keep at most this fraction
	capGPUs map[string]float64 // of the class's GPUs when the rule fired
	drained map[string]bool
	regions map[string]string // migrate to a region: the class's only region
	pools   map[string]string // migrate to a pool of the fleet: the class's only pool
	// fleetPools are the pools the fleet's nodes are in.
	fleetPools map[string]bool
	// unapplied counts actions the simulator does not model (set_limit).
	unapplied int
	values    metricValues
	// recovering lists firings waiting for p99 to return under the SLO.
	recovering []int
}

// Firing is one entry of a run's policy log, with what it did.
type Firing struct {
	policy.Firing
	Effect string `json:"effect"`
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
	latency     [3]float64         // added p50, p95, p99 latency, seconds, all services
	svcLatency  map[string][3]float64
	pendingGPUs float64
	failRate    float64 // capacity failures / requests this step
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
	s.pol = &policyRun{eng: eng, prio: map[string]workload.Priority{}, preempt: map[string]bool{},
		capFrac: map[string]float64{}, capGPUs: map[string]float64{}, drained: map[string]bool{}, regions: map[string]string{}, pools: map[string]string{},
		fleetPools: map[string]bool{}}
	for _, n := range s.cfg.Fleet.Nodes {
		if p := n.Labels[sched.PoolLabel]; p != "" {
			s.pol.fleetPools[p] = true
		}
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
	}
	for _, sv := range s.sc.Services {
		c := sv.Class
		if c == "" {
			c = sv.Name
		}
		add(&t.Classes, c)
		add(&t.Services, sv.Name)
	}
	t.Pools = []string{lowPriorityPool}
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
	s.measure(&p.values)
	step := p.eng.Evaluate(s.now, &p.values)
	// Desired state from the active actions.
	prio := map[string]workload.Priority{}
	preempt := map[string]bool{}
	capFrac := map[string]float64{}
	drained := map[string]bool{}
	regions, pools := map[string]string{}, map[string]string{}
	for _, a := range step.Active {
		act := a.Action
		switch act.Type {
		case policy.ActionReallocate:
			for _, r := range act.Resources {
				if r.Kind == policy.TargetClass && act.Priority != policy.PriorityNone {
					prio[r.Name] = workload.Priority(act.Priority - 1)
				}
			}
		case policy.ActionSetPriority:
			if act.Target.Kind == policy.TargetClass {
				prio[act.Target.Name] = workload.Priority(act.Priority - 1)
			}
		case policy.ActionMigrate:
			if act.Target.Kind != policy.TargetClass {
				break
			}
			switch d := act.Destination; {
			case d.Kind == policy.TargetRegion:
				regions[act.Target.Name] = d.Name
			case s.hasPool(d.Name):
				pools[act.Target.Name] = d.Name
			case d.Name == lowPriorityPool:
				prio[act.Target.Name] = workload.PriorityLow
				preempt[act.Target.Name] = true
			}
		case policy.ActionScaleDown:
			if act.Target.Kind == policy.TargetClass {
				capFrac[act.Target.Name] = act.MinCapacity.Value
			}
		case policy.ActionDrain:
			if act.Target.Kind == policy.TargetClass {
				drained[act.Target.Name] = true
			}
		}
	}
	for _, f := range step.Firings {
		effect := ""
		for _, a := range f.Actions {
			if f.Event == policy.EventFired {
				if a.Type == policy.ActionSetLimit || a.Type == policy.ActionSetSpotPrice {
					effect += fmt.Sprintf("%s not modelled by the simulator; ", a.Type)
					p.unapplied++
				}
				if a.Type == policy.ActionScaleDown && a.Target.Kind == policy.TargetClass {
					gpus := s.classGPUs(a.Target.Name)
					p.capGPUs[a.Target.Name] = gpus
					effect += fmt.Sprintf("%s capped at %.0f of %.0f GPUs; ", a.Target.Name, a.MinCapacity.Value*gpus, gpus)
				}
			}
		}
		worst, slo := s.worstP99()
		fr := Firing{Firing: f, Effect: effect, WorstP99: worst, SLO: slo}
		if f.Event == policy.EventFired && worst > slo {
			fr.Recovered = -1
			p.recovering = append(p.recovering, len(p.firing))
		}
		p.firing = append(p.firing, fr)
		s.metrics.res.PolicyFirings++
	}
	changed := !mapsEqual(prio, p.prio) || !mapsEqual(preempt, p.preempt) || !mapsEqual(drained, p.drained) || !mapsEqual(capFrac, p.capFrac) ||
		!mapsEqual(regions, p.regions) || !mapsEqual(pools, p.pools)
	p.prio, p.preempt, p.capFrac, p.drained, p.regions, p.pools = prio, preempt, capFrac, drained, regions, pools
	if changed {
		for _, j := range s.jobs {
			if !j.done {
				s.applyClass(j)
			}
		}
		s.dirty = true
	}
	s.enforceCaps()
	if len(p.recovering) > 0 {
		if worst, slo := s.worstP99(); worst <= slo {
			for _, i := range p.recovering {
				p.firing[i].Recovered = s.now.Sub(p.firing[i].Time)
			}
			p.recovering = p.recovering[:0]
		}
	}
}

// worstP99 returns the p99 and SLO of the service furthest above (or
// closest to) its SLO this step.
func (s *Sim) worstP99() (p99, slo time.Duration) {
	best := -1.0
	for _, st := range s.services {
		r := float64(st.p99) / float64(st.spec.SLO)
		if r > best {
			best, p99, slo = r, min(st.p99, maxLatency), st.spec.SLO
		}
	}
	return p99, slo
}

func mapsEqual[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// applyClass sets a job's priority and preemptibility from its base and
// the overrides in force.
func (s *Sim) applyClass(j *job) {
	j.w.Priority, j.w.Preemptible = j.basePriority, j.basePreempt
	if s.pol == nil {
		return
	}
	// A migrate to a region narrows the class's regions to it, for the
	// jobs that accept it (as the server does); the core then evicts those
	// running elsewhere, and they are placed again there.
	if j.baseRegions == nil {
		j.baseRegions, j.basePools = j.w.Regions, j.w.Pools
	}
	j.w.Regions, j.w.Pools = j.baseRegions, j.basePools
	if r, ok := s.pol.regions[j.class]; ok && len(j.baseRegions) > 1 && slices.Contains(j.baseRegions, r) {
		j.w.Regions = []string{r}
	}
	if p, ok := s.pol.pools[j.class]; ok && (len(j.basePools) == 0 || slices.Contains(j.basePools, p)) {
		j.w.Pools = []string{p}
	}
	if p, ok := s.pol.prio[j.class]; ok {
		j.w.Priority = p
	}
	if s.pol.preempt[j.class] {
		j.w.Preemptible = true
	}
}

// held reports whether a pending job must wait because its class is
// drained or at its scale_down cap.
func (s *Sim) held(j *job, classGPUs map[string]float64) bool {
	if s.pol.drained[j.class] {
		return true
	}
	if f, ok := s.pol.capFrac[j.class]; ok {
		return classGPUs[j.class]+float64(j.gpus())/resource.PerGPU > f*s.pol.capGPUs[j.class]
	}
	return false
}

func (s *Sim) classGPUs(class string) float64 {
	var g float64
	for _, j := range s.jobs {
		if !j.done && j.w.Running != nil && j.class == class {
			g += float64(j.gpus()) / resource.PerGPU
		}
	}
	return g
}

// hasPool reports whether some node of the fleet is in pool name.
func (s *Sim) hasPool(name string) bool { return s.pol.fleetPools[name] }

// enforceCaps evicts preemptible work of scaled-down classes beyond their
// cap, newest first, gracefully (their work since the last checkpoint is
// lost, as with any preemption).
func (s *Sim) enforceCaps() {
	for class, f := range s.pol.capFrac {
		limit := f * s.pol.capGPUs[class]
		used := s.classGPUs(class)
		for i := len(s.jobs) - 1; i >= 0 && used > limit; i-- {
			j := s.jobs[i]
			if j.done || j.w.Running == nil || j.class != class || !j.w.Preemptible {
				continue
			}
			used -= float64(j.gpus()) / resource.PerGPU
			s.evictForPolicy(j)
		}
	}
}

func (s *Sim) evictForPolicy(j *job) {
	lost := j.w.WorkLost(s.now) / (float64(j.gpus()) / resource.PerGPU)
	s.metrics.res.Preemptions++
	if j.customerRequest() {
		s.metrics.res.CustomerVMPreemptions++
	}
	s.metrics.res.WorkLostGPUHours += lost / 3600 * float64(j.gpus()) / resource.PerGPU
	s.release(j)
	j.remaining += time.Duration(lost * float64(time.Second))
	s.dirty = true
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
	m.latency = [3]float64{}
	for _, st := range s.services {
		v := st.addedLatency()
		m.svcLatency[st.spec.Name] = v
		for i := range v {
			m.latency[i] = max(m.latency[i], v[i])
		}
	}
}
