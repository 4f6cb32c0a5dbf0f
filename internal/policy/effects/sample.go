package effects

import (
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// Window is the width of the metric windows policies read, in the server
// and in the simulator.
const Window = 5 * time.Minute

// Observation is one sample of a metric of a target.
type Observation struct {
	Metric policy.Metric
	Target policy.Target
	Value  float64
}

// Sources is the one table of policy metrics × target kinds
// (policy.MetricSources): which the world gives (Sample, on both sides)
// and which must be pushed.
var Sources = policy.MetricSources

// FromWorld marks the pairs Sample measures.
const FromWorld = policy.FromWorld

// Sample measures, from the world, the metrics Sources says it gives:
// utilization (GPUs running over the GPUs of the nodes in service) of the
// cluster, each tenant (over the whole fleet), flavor, region and pool, and
// the GPUs pending for the cluster, each tenant, and each flavor and region
// a pending workload may use. tenants lists the tenants to report (zero
// for those with nothing running or pending); down are nodes out of
// service. Observations come in a fixed order.
func Sample(w World, tenants []string, down []fleet.NodeID) []Observation {
	obs, _ := SampleTotals(w, tenants, down)
	return obs
}

// Totals are the GPUs of a world's workloads as Sample sums them (in
// workload order, per target): those running and those pending. A caller
// that needs these sums too reads them here instead of scanning the
// workloads again; they are bit for bit what Sample divided.
type Totals struct{ used, pending byKind }

// Used is the GPUs running on a target (cluster, tenant, flavor, region,
// pool).
func (t *Totals) Used(target policy.Target) float64 { return t.used.get(target) }

// Pending is the GPUs pending for a target (cluster, tenant, or a flavor
// or region a pending workload may use).
func (t *Totals) Pending(target policy.Target) float64 { return t.pending.get(target) }

// EachUsedTenant calls f for every tenant with a workload running, with
// its GPUs running, in the order the tenants were first seen.
func (t *Totals) EachUsedTenant(f func(tenant string, gpus float64)) {
	for i, name := range t.used.tenant.names {
		f(name, t.used.tenant.vals[i])
	}
}

// SampleTotals is Sample, also returning the sums it measured.
func SampleTotals(w World, tenants []string, down []fleet.NodeID) ([]Observation, *Totals) {
	tot := TallyWorkloads(w)
	return Observations(w.Nodes, tenants, down, tot), tot
}

// TallyWorkloads sums the world's workloads' GPUs per target, in workload
// order, as Sample does.
func TallyWorkloads(w World) *Totals {
	pool := map[fleet.NodeID]string{} // nodes in a pool; the rest read ""
	for _, n := range w.Nodes {
		if n.Pool != "" {
			pool[n.ID] = n.Pool
		}
	}
	// Each target's sum is added to in workload order, as by a map, but
	// found by a scan of a few names per kind: no hashing per workload.
	tot := &Totals{}
	used, pending := &tot.used, &tot.pending
	for _, x := range w.Workloads {
		g := float64(x.TotalGPUs()) / resource.PerGPU
		if x.Running == nil {
			pending.cluster += g
			pending.tenant.add(x.Tenant, g)
			for _, f := range x.Flavors {
				pending.flavor.add(string(f), g)
			}
			for _, r := range x.Regions {
				pending.region.add(r, g)
			}
			continue
		}
		used.cluster += g
		used.tenant.add(x.Tenant, g)
		used.flavor.add(string(x.Running.Flavor), g)
		used.region.add(x.Running.Region, g)
		if len(x.Running.Replicas) > 0 && len(pool) > 0 {
			if p := pool[x.Running.Replicas[0].Node]; p != "" {
				used.pool.add(p, g)
			}
		}
	}
	return tot
}

// SetUsed sets the GPUs running on a target, SetPending those pending for
// it: for a caller that keeps the sums itself (exactly: the simulator, see
// its gpuTally) and passes them to Observations. Set each target once.
func (t *Totals) SetUsed(target policy.Target, gpus float64) { t.used.set(target, gpus) }

// SetPending sets the GPUs pending for a target; see SetUsed.
func (t *Totals) SetPending(target policy.Target, gpus float64) { t.pending.set(target, gpus) }

// Observations are Sample's observations of a fleet (nodes, less those
// down) with the workloads' sums tot, in Sample's order.
func Observations(nodes []Node, tenants []string, down []fleet.NodeID, tot *Totals) []Observation {
	return FleetCapacity(nodes, down).Observations(tenants, tot)
}

// Capacity is the GPUs in service of a fleet, whole and per flavor,
// region and pool: what Observations divides by. A caller whose fleet does
// not change computes it once.
type Capacity struct {
	all  float64
	caps sums
}

// FleetCapacity sums the GPUs of the nodes not down, in node order.
func FleetCapacity(nodes []Node, down []fleet.NodeID) *Capacity {
	isDown := map[fleet.NodeID]bool{}
	for _, id := range down {
		isDown[id] = true
	}
	var caps sums // GPUs in service per flavor, region and pool
	var all float64
	for _, n := range nodes {
		if isDown[n.ID] {
			continue
		}
		g := float64(n.GPUs)
		all += g
		caps.add(policy.TargetFlavor, string(n.Model), g)
		caps.add(policy.TargetRegion, n.Region, g)
		if n.Pool != "" {
			caps.add(policy.TargetPool, n.Pool, g)
		}
	}
	return &Capacity{all: all, caps: caps}
}

// Observations are Sample's observations of the fleet's capacity with the
// workloads' sums tot, in Sample's order.
func (cp *Capacity) Observations(tenants []string, tot *Totals) []Observation {
	all, caps := cp.all, &cp.caps
	used, pending := &tot.used, &tot.pending
	var out []Observation
	util := func(t policy.Target, c float64) {
		if c > 0 {
			out = append(out, Observation{policy.MetricUtilization, t, used.get(t) / c})
		}
	}
	util(policy.Cluster, all)
	for i, t := range caps.names {
		util(t, caps.vals[i])
	}
	out = append(out, Observation{policy.MetricPendingGPUs, policy.Cluster, pending.cluster})
	for _, t := range caps.names {
		if t.Kind == policy.TargetFlavor || t.Kind == policy.TargetRegion {
			out = append(out, Observation{policy.MetricPendingGPUs, t, pending.get(t)})
		}
	}
	for _, name := range tenants {
		tt := policy.Target{Kind: policy.TargetTenant, Name: name}
		util(tt, all)
		out = append(out, Observation{policy.MetricPendingGPUs, tt, pending.get(tt)})
	}
	return out
}

// Observe records observations in windows at now and advances them.
func Observe(ws *policy.Windows, now time.Time, obs []Observation) {
	for _, o := range obs {
		ws.ObserveMetric(o.Metric, o.Target, now, o.Value)
	}
	ws.Advance(now)
}

// sums are GPU totals per target in the order first seen (a fleet has few
// flavors, regions and pools).
type sums struct {
	names []policy.Target
	vals  []float64
}

func (s *sums) add(kind policy.TargetKind, name string, g float64) {
	for i := range s.names {
		if s.names[i].Kind == kind && s.names[i].Name == name {
			s.vals[i] += g
			return
		}
	}
	s.names = append(s.names, policy.Target{Kind: kind, Name: name})
	s.vals = append(s.vals, g)
}

// byKind are GPU totals per target, by kind: the cluster's and per name
// for tenants, flavors, regions and pools.
type byKind struct {
	cluster                      float64
	tenant, flavor, region, pool named
}

func (b *byKind) set(t policy.Target, g float64) {
	switch t.Kind {
	case policy.TargetCluster:
		b.cluster = g
	case policy.TargetTenant:
		b.tenant.add(t.Name, g)
	case policy.TargetFlavor:
		b.flavor.add(t.Name, g)
	case policy.TargetRegion:
		b.region.add(t.Name, g)
	case policy.TargetPool:
		b.pool.add(t.Name, g)
	}
}

func (b *byKind) get(t policy.Target) float64 {
	switch t.Kind {
	case policy.TargetCluster:
		return b.cluster
	case policy.TargetTenant:
		return b.tenant.get(t.Name)
	case policy.TargetFlavor:
		return b.flavor.get(t.Name)
	case policy.TargetRegion:
		return b.region.get(t.Name)
	case policy.TargetPool:
		return b.pool.get(t.Name)
	}
	return 0
}

// named sums per name, trying the last name added first (work of one
// tenant or flavor often comes in runs).
type named struct {
	names []string
	vals  []float64
	last  int
}

func (n *named) add(name string, g float64) {
	if n.last < len(n.names) && n.names[n.last] == name {
		n.vals[n.last] += g
		return
	}
	for i, x := range n.names {
		if x == name {
			n.vals[i] += g
			n.last = i
			return
		}
	}
	n.names = append(n.names, name)
	n.vals = append(n.vals, g)
	n.last = len(n.names) - 1
}

func (n *named) get(name string) float64 {
	for i, x := range n.names {
		if x == name {
			return n.vals[i]
		}
	}
	return 0
}
