// Package schedbench builds the worlds the scheduling core's benchmarks
// run on: BenchmarkSchedule's fleets and workloads, and the cases of
// `arbiter bench suite`. Both read them from here, so that the suite
// measures what the Go benchmarks measure.
package schedbench

import (
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// T0 is the benchmarks' clock.
var T0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// Fleet is n nodes of 8 A100-80G in blocks of 32 nodes, one region, and
// two tenants: "ai" guaranteed half the GPUs, "batch" with none.
func Fleet(n int) (*fleet.Fleet, *tenancy.Tree, error) {
	var blocks []fleet.BlockSpec
	for i := 0; i < n; i += 32 {
		blocks = append(blocks, fleet.BlockSpec{Name: fleet.BlockID(fmt.Sprintf("b%04d", i/32)),
			Nodes: []fleet.GroupSpec{{SKU: "Standard_ND96amsr_A100_v4", Count: min(32, n-i)}}})
	}
	f, err := fleet.Build(fleet.Spec{Regions: []fleet.RegionSpec{{Name: "eastus", Zones: []fleet.ZoneSpec{{Name: "1", Blocks: blocks}}}}}, fleet.Builtin())
	if err != nil {
		return nil, nil, err
	}
	tree, err := tenancy.NewTree([]tenancy.TenantSpec{
		{Name: "ai", Quota: []tenancy.QuotaSpec{{Flavor: "A100-80G", Region: "eastus", Guaranteed: resource.GPUs(n * 8 / 2)}}},
		{Name: "batch"},
	})
	if err != nil {
		return nil, nil, err
	}
	return f, tree, nil
}

// Workloads is n pending workloads named prefix000000…, submitted at T0.
func Workloads(n int, prefix, tenant string, gpus, replicas int, prio workload.Priority, topo workload.Topology) []*workload.Workload {
	out := make([]*workload.Workload, n)
	for i := range out {
		out[i] = &workload.Workload{Spec: workload.Spec{
			Name: workload.ID(fmt.Sprintf("%s%06d", prefix, i)), Tenant: tenant, Priority: prio,
			GPUs: resource.GPUs(gpus), Replicas: replicas, Flavors: []fleet.ModelID{"A100-80G"},
			Regions: []string{"eastus"}, Topology: topo, Preemptible: prio <= workload.PriorityLow,
			CheckpointInterval: time.Hour,
		}, SubmittedAt: T0}
	}
	return out
}

// FullOfBatch fills every node with a low-priority 8-GPU job with a
// different checkpoint age.
func FullOfBatch(f *fleet.Fleet) []*workload.Workload {
	out := Workloads(len(f.Nodes), "r", "batch", 8, 1, workload.PriorityLow, workload.TopologyAny)
	for i, w := range out {
		w.Running = &workload.Assignment{Flavor: "A100-80G", Region: "eastus", StartedAt: T0.Add(-time.Duration(i%97) * time.Minute),
			Replicas: []workload.Replica{{Node: f.Nodes[i].ID, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Milli: 1000}}}
	}
	return out
}

// Backfill is a world that plans: 9 nodes in 10 run an 8-GPU job with
// mixed expected ends (up to 2 days), 20 high-priority 256-GPU gangs do
// not fit, and 100,000 pending workloads of 1–8 GPUs with mixed expected
// runtimes backfill onto held GPUs only when they would end in time.
func Backfill(f *fleet.Fleet) []*workload.Workload {
	var out []*workload.Workload
	for i, n := range f.Nodes {
		if i%10 == 9 {
			continue
		}
		w := Workloads(1, fmt.Sprintf("run%05d-", i), "batch", 8, 1, workload.PriorityNormal, workload.TopologyAny)[0]
		w.ExpectedRuntime = time.Duration(1+(i*37)%96) * 30 * time.Minute
		w.Running = &workload.Assignment{Flavor: "A100-80G", Region: "eastus", StartedAt: T0.Add(-time.Duration(i%60) * time.Minute),
			Replicas: []workload.Replica{{Node: n.ID, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Milli: 1000}}}
		out = append(out, w)
	}
	out = append(out, Workloads(20, "G", "batch", 8, 32, workload.PriorityHigh, workload.TopologySameBlock)...)
	pending := Workloads(100_000, "p", "batch", 1, 1, workload.PriorityNormal, workload.TopologyAny)
	for i, w := range pending {
		w.GPUs = resource.GPUs(1 << (i % 4))
		w.ExpectedRuntime = time.Duration(1+(i*13)%96) * 30 * time.Minute
	}
	return append(out, pending...)
}
