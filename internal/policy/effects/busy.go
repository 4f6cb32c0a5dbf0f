package effects

import "github.com/arbiterhq/arbiter/internal/policy"

// BusyTotals sums how busy GPUs were (NVML's utilization as a ratio,
// 0..1) per target, for the busy_utilization metric (policy.FromAgents).
// Each side adds its own readings: the server the agents' heartbeats, the
// simulator its model of each kind of work. A target's value is the mean
// over the GPUs measured on it; a target with none measured has no value
// (no observation), so that no data never reads as idle.
//
// Nodes give the cluster, flavor, region and pool values (every GPU of a
// node in service with a reading, allocated or not: an unallocated GPU is
// idle and counts as such); tenants the GPUs their replicas hold.
type BusyTotals struct {
	cluster, clusterN float64
	sum, n            sums // flavors, regions and pools, in the order first added
	tenant, tenantN   named
}

// AddNode adds gpus GPUs of node n measured with busy ratios summing to
// busy (GPUs, not whole ones: the simulator counts shares of a GPU).
func (b *BusyTotals) AddNode(n Node, busy, gpus float64) {
	if gpus <= 0 {
		return
	}
	g := gpus
	b.cluster += busy
	b.clusterN += g
	b.sum.add(policy.TargetFlavor, string(n.Model), busy)
	b.n.add(policy.TargetFlavor, string(n.Model), g)
	b.sum.add(policy.TargetRegion, n.Region, busy)
	b.n.add(policy.TargetRegion, n.Region, g)
	if n.Pool != "" {
		b.sum.add(policy.TargetPool, n.Pool, busy)
		b.n.add(policy.TargetPool, n.Pool, g)
	}
}

// AddTenant adds gpus GPUs a tenant's replicas hold, measured with busy
// ratios summing to busy.
func (b *BusyTotals) AddTenant(tenant string, busy, gpus float64) {
	if gpus <= 0 {
		return
	}
	b.tenant.add(tenant, busy)
	b.tenantN.add(tenant, gpus)
}

// Tenant returns a tenant's mean busy ratio and whether any GPU of it
// was measured.
func (b *BusyTotals) Tenant(name string) (float64, bool) {
	n := b.tenantN.get(name)
	if n == 0 {
		return 0, false
	}
	return b.tenant.get(name) / n, true
}

// Observations are the busy_utilization observations: the cluster, the
// flavors, regions and pools in the order first added, then tenants in
// the order given (those with a GPU measured).
func (b *BusyTotals) Observations(tenants []string) []Observation {
	var out []Observation
	if b.clusterN > 0 {
		out = append(out, Observation{policy.MetricBusyUtilization, policy.Cluster, b.cluster / b.clusterN})
	}
	for i, t := range b.sum.names {
		out = append(out, Observation{policy.MetricBusyUtilization, t, b.sum.vals[i] / b.n.vals[i]})
	}
	for _, name := range tenants {
		if v, ok := b.Tenant(name); ok {
			out = append(out, Observation{policy.MetricBusyUtilization, policy.Target{Kind: policy.TargetTenant, Name: name}, v})
		}
	}
	return out
}
