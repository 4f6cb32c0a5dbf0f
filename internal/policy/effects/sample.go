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
	isDown := map[fleet.NodeID]bool{}
	for _, id := range down {
		isDown[id] = true
	}
	type cap struct {
		t policy.Target
		c float64
	}
	var caps []cap
	capIdx := map[policy.Target]int{}
	addCap := func(t policy.Target, g float64) {
		i, ok := capIdx[t]
		if !ok {
			i = len(caps)
			capIdx[t] = i
			caps = append(caps, cap{t: t})
		}
		caps[i].c += g
	}
	var all float64
	for _, n := range w.Nodes {
		if isDown[n.ID] {
			continue
		}
		g := float64(n.GPUs)
		all += g
		addCap(policy.Target{Kind: policy.TargetFlavor, Name: string(n.Model)}, g)
		addCap(policy.Target{Kind: policy.TargetRegion, Name: n.Region}, g)
		if n.Pool != "" {
			addCap(policy.Target{Kind: policy.TargetPool, Name: n.Pool}, g)
		}
	}
	pool := map[fleet.NodeID]string{}
	for _, n := range w.Nodes {
		pool[n.ID] = n.Pool
	}
	used := map[policy.Target]float64{}
	pending := map[policy.Target]float64{}
	for _, x := range w.Workloads {
		g := float64(x.TotalGPUs()) / resource.PerGPU
		tt := policy.Target{Kind: policy.TargetTenant, Name: x.Tenant}
		if x.Running == nil {
			pending[policy.Cluster] += g
			pending[tt] += g
			for _, f := range x.Flavors {
				pending[policy.Target{Kind: policy.TargetFlavor, Name: string(f)}] += g
			}
			for _, r := range x.Regions {
				pending[policy.Target{Kind: policy.TargetRegion, Name: r}] += g
			}
			continue
		}
		used[policy.Cluster] += g
		used[tt] += g
		used[policy.Target{Kind: policy.TargetFlavor, Name: string(x.Running.Flavor)}] += g
		used[policy.Target{Kind: policy.TargetRegion, Name: x.Running.Region}] += g
		if len(x.Running.Replicas) > 0 {
			if p := pool[x.Running.Replicas[0].Node]; p != "" {
				used[policy.Target{Kind: policy.TargetPool, Name: p}] += g
			}
		}
	}
	var out []Observation
	util := func(t policy.Target, c float64) {
		if c > 0 {
			out = append(out, Observation{policy.MetricUtilization, t, used[t] / c})
		}
	}
	util(policy.Cluster, all)
	for _, c := range caps {
		util(c.t, c.c)
	}
	out = append(out, Observation{policy.MetricPendingGPUs, policy.Cluster, pending[policy.Cluster]})
	for _, c := range caps {
		if c.t.Kind == policy.TargetFlavor || c.t.Kind == policy.TargetRegion {
			out = append(out, Observation{policy.MetricPendingGPUs, c.t, pending[c.t]})
		}
	}
	for _, name := range tenants {
		tt := policy.Target{Kind: policy.TargetTenant, Name: name}
		util(tt, all)
		out = append(out, Observation{policy.MetricPendingGPUs, tt, pending[tt]})
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
