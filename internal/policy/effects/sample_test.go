package effects

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestSampleSameAsMaps: Sample gives exactly (bit for bit, in the same
// order) the observations of its former map-based version on random
// worlds: fractional GPUs, pools, down nodes, pending work listing
// several (and repeated) flavors and regions.
func TestSampleSameAsMaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	models := []fleet.ModelID{"A100-80G", "H100-80G", "T4"}
	regions := []string{"eastus", "westus2", "centralus"}
	pools := []string{"", "", "low_priority_pool", "p2"}
	tenants := []string{"a", "b", "c", "d"}
	for trial := 0; trial < 300; trial++ {
		var w World
		for i := 0; i < 1+rng.IntN(40); i++ {
			w.Nodes = append(w.Nodes, Node{ID: fleet.NodeID(fmt.Sprintf("n%d", i)), Model: models[rng.IntN(3)],
				Region: regions[rng.IntN(3)], Pool: pools[rng.IntN(4)], GPUs: 1 + rng.IntN(8)})
		}
		var down []fleet.NodeID
		for _, n := range w.Nodes {
			if rng.IntN(10) == 0 {
				down = append(down, n.ID)
			}
		}
		for i := 0; i < rng.IntN(200); i++ {
			x := &workload.Workload{Spec: workload.Spec{Name: workload.ID(fmt.Sprint(i)), Tenant: tenants[rng.IntN(4)],
				GPUs: resource.MilliGPU(1 + rng.IntN(3000)), Replicas: 1 + rng.IntN(3)}}
			for k := 0; k < 1+rng.IntN(3); k++ {
				x.Flavors = append(x.Flavors, models[rng.IntN(3)])
				x.Regions = append(x.Regions, regions[rng.IntN(3)])
			}
			if rng.IntN(2) == 0 {
				n := w.Nodes[rng.IntN(len(w.Nodes))]
				x.Running = &workload.Assignment{Flavor: n.Model, Region: n.Region, Replicas: []workload.Replica{{Node: n.ID}}}
			}
			w.Workloads = append(w.Workloads, x)
		}
		ts := tenants[:1+trial%4]
		got, want := Sample(w, ts, down), sampleByMaps(w, ts, down)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("trial %d: Sample differs from the map-based version:\n got %v\nwant %v", trial, got, want)
		}
	}
}

// sampleByMaps is Sample as it was before its sums were found by scan
// (the reference of TestSampleSameAsMaps).
func sampleByMaps(w World, tenants []string, down []fleet.NodeID) []Observation {
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
