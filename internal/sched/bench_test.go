package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// benchFleet is n nodes of 8 A100-80G in blocks of 32 nodes, one region.
func benchFleet(b *testing.B, n int) (*fleet.Fleet, *tenancy.Tree) {
	b.Helper()
	var blocks []fleet.BlockSpec
	for i := 0; i < n; i += 32 {
		blocks = append(blocks, fleet.BlockSpec{Name: fleet.BlockID(fmt.Sprintf("b%04d", i/32)),
			Nodes: []fleet.GroupSpec{{SKU: "Standard_ND96amsr_A100_v4", Count: min(32, n-i)}}})
	}
	f, err := fleet.Build(fleet.Spec{Regions: []fleet.RegionSpec{{Name: "eastus", Zones: []fleet.ZoneSpec{{Name: "1", Blocks: blocks}}}}}, fleet.Builtin())
	if err != nil {
		b.Fatal(err)
	}
	tree, err := tenancy.NewTree([]tenancy.TenantSpec{
		{Name: "ai", Quota: []tenancy.QuotaSpec{{Flavor: "A100-80G", Region: "eastus", Guaranteed: resource.GPUs(n * 8 / 2)}}},
		{Name: "batch"},
	})
	if err != nil {
		b.Fatal(err)
	}
	return f, tree
}

func benchWorkloads(n int, prefix, tenant string, gpus, replicas int, prio workload.Priority, topo workload.Topology) []*workload.Workload {
	out := make([]*workload.Workload, n)
	for i := range out {
		out[i] = &workload.Workload{Spec: workload.Spec{
			Name: workload.ID(fmt.Sprintf("%s%06d", prefix, i)), Tenant: tenant, Priority: prio,
			GPUs: resource.GPUs(gpus), Replicas: replicas, Flavors: []fleet.ModelID{"A100-80G"},
			Regions: []string{"eastus"}, Topology: topo, Preemptible: prio <= workload.PriorityLow,
			CheckpointInterval: time.Hour,
		}, SubmittedAt: t0}
	}
	return out
}

// fullOfBatch fills every node with a low-priority 8-GPU job with a
// different checkpoint age.
func fullOfBatch(f *fleet.Fleet) []*workload.Workload {
	out := benchWorkloads(len(f.Nodes), "r", "batch", 8, 1, workload.PriorityLow, workload.TopologyAny)
	for i, w := range out {
		w.Running = &workload.Assignment{Flavor: "A100-80G", Region: "eastus", StartedAt: t0.Add(-time.Duration(i%97) * time.Minute),
			Replicas: []workload.Replica{{Node: f.Nodes[i].ID, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Milli: 1000}}}
	}
	return out
}

// BenchmarkSchedule measures whole cycles (snapshot, order, admit, place,
// preempt) over fleets of 8-GPU nodes.
//
//	go test ./internal/sched -run '^$' -bench BenchmarkSchedule -benchmem
func BenchmarkSchedule(b *testing.B) {
	for _, nodes := range []int{1000, 5000, 10000} {
		// Pending work is 100,000 workloads or the fleet's GPUs, whichever is
		// smaller, so that every decision is a placement.
		gpus := nodes * 8
		cases := []struct {
			name         string
			pending      []*workload.Workload
			running      func(f *fleet.Fleet) []*workload.Workload
			placeAll     bool
			decisionOnly bool
		}{
			{name: "single-gpu", pending: benchWorkloads(min(100_000, gpus), "s", "ai", 1, 1, workload.PriorityNormal, workload.TopologyAny), placeAll: true},
			{name: "8-gpu", pending: benchWorkloads(min(100_000, nodes), "e", "ai", 8, 1, workload.PriorityNormal, workload.TopologyAny), placeAll: true},
			{name: "gang-64", pending: benchWorkloads(min(1000, gpus/64), "g", "ai", 8, 8, workload.PriorityHigh, workload.TopologySameBlock), placeAll: true},
			{name: "gang-256-preempt", decisionOnly: true, running: fullOfBatch, pending: benchWorkloads(1, "G", "ai", 8, 32, workload.PriorityHigh, workload.TopologySameBlock)},
			{name: "gang-256-preempt-cycle", pending: benchWorkloads(1, "G", "ai", 8, 32, workload.PriorityHigh, workload.TopologySameBlock),
				running: fullOfBatch},
		}
		if nodes == 10000 {
			cases = append(cases, struct {
				name         string
				pending      []*workload.Workload
				running      func(f *fleet.Fleet) []*workload.Workload
				placeAll     bool
				decisionOnly bool
			}{name: "backfill"})
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("nodes=%d/%s", nodes, c.name), func(b *testing.B) {
				f, tree := benchFleet(b, nodes)
				in := Input{Now: t0, Fleet: f, Tenants: tree, Workloads: c.pending}
				if c.running != nil {
					in.Workloads = append(c.running(f), c.pending...)
				}
				if c.name == "backfill" {
					in.Workloads, c.pending = backfillCase(f), nil
					in.Options.Planning = DefaultPlanning()
					in.Options.Planning.Depth = 20
					in.Options.TerseReasons = true // as the simulator runs
					p := Schedule(in)
					planned := 0
					for _, x := range p.Pending {
						if x.Planned != nil && x.Planned.Block != "" {
							planned++
						}
					}
					if planned != 20 || len(p.Placements) == 0 {
						b.Fatalf("%d gangs planned, %d placements (backfill)", planned, len(p.Placements))
					}
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						Schedule(in)
					}
					b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/cycle")
					return
				}
				// The work must be real: check the plan before timing.
				p := Schedule(in)
				if c.placeAll && len(p.Pending) != 0 {
					b.Fatalf("%d pending, first: %+v", len(p.Pending), p.Pending[0])
				}
				if c.running != nil && (len(p.Preemptions) != 32 || len(p.Placements) != 32) {
					b.Fatalf("gang not placed by preemption: %d placements, %d preemptions, pending %+v", len(p.Placements), len(p.Preemptions), p.Pending)
				}
				placements := len(p.Placements)
				b.ReportAllocs()
				b.ResetTimer()
				if c.decisionOnly {
					// Time the decision alone: the snapshot (which a server
					// keeps between cycles) is built outside the timer.
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						s, _ := newSnapshot(&in)
						var plan Plan
						b.StartTimer()
						if !s.scheduleOne(c.pending[0], &plan) {
							b.Fatal("gang not placed")
						}
					}
				} else {
					for i := 0; i < b.N; i++ {
						Schedule(in)
					}
				}
				el := b.Elapsed().Seconds()
				b.ReportMetric(float64(placements)*float64(b.N)/el, "placements/s")
				b.ReportMetric(el*1000/float64(b.N)/float64(len(c.pending)), "ms/decision")
			})
		}
	}
}

// BenchmarkBackfill measures a cycle that plans: nodes=10000 of which 9
// in 10 run an 8-GPU job with mixed expected ends (up to 2 days), 20
// high-priority 256-GPU gangs that do not fit (each gets a planned start
// and holds a block) and 100,000 pending workloads of 1-8 GPUs with mixed
// expected runtimes, which backfill onto held GPUs only when they would
// end in time. It is BenchmarkSchedule's nodes=10000/backfill case.
//
//	go test ./internal/sched -run '^$' -bench 'BenchmarkSchedule/nodes=10000/backfill' -benchmem -cpu 1
func backfillCase(f *fleet.Fleet) []*workload.Workload {
	var out []*workload.Workload
	for i, n := range f.Nodes {
		if i%10 == 9 {
			continue
		}
		w := benchWorkloads(1, fmt.Sprintf("run%05d-", i), "batch", 8, 1, workload.PriorityNormal, workload.TopologyAny)[0]
		w.ExpectedRuntime = time.Duration(1+(i*37)%96) * 30 * time.Minute
		w.Running = &workload.Assignment{Flavor: "A100-80G", Region: "eastus", StartedAt: t0.Add(-time.Duration(i%60) * time.Minute),
			Replicas: []workload.Replica{{Node: n.ID, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Milli: 1000}}}
		out = append(out, w)
	}
	out = append(out, benchWorkloads(20, "G", "batch", 8, 32, workload.PriorityHigh, workload.TopologySameBlock)...)
	pending := benchWorkloads(100_000, "p", "batch", 1, 1, workload.PriorityNormal, workload.TopologyAny)
	for i, w := range pending {
		w.GPUs = resource.GPUs(1 << (i % 4))
		w.ExpectedRuntime = time.Duration(1+(i*13)%96) * 30 * time.Minute
	}
	return append(out, pending...)
}

// BenchmarkBacklog measures a cycle over a long queue that cannot be
// placed: a full 100-node fleet and 60,000 pending single-GPU workloads of
// one tenant, the server's state after a storm of submissions. Alike
// pending workloads are decided once per state (the repeat memo), so the
// cycle is ordering and bookkeeping; "no-repeat" decides each one.
//
//	go test ./internal/sched -run '^$' -bench Backlog -benchmem
func BenchmarkBacklog(b *testing.B) {
	for _, noRepeat := range []bool{false, true} {
		name := "repeat"
		if noRepeat {
			name = "no-repeat"
		}
		b.Run(name, func(b *testing.B) {
			f, tree := benchFleet(b, 100)
			pending := benchWorkloads(60_000, "p", "batch", 1, 1, workload.PriorityLow, workload.TopologyAny)
			for i, w := range pending {
				w.SubmittedAt = t0.Add(time.Duration(i) * time.Millisecond)
			}
			in := Input{Now: t0, Fleet: f, Tenants: tree, Workloads: append(fullOfBatch(f), pending...)}
			in.Options.noRepeat = noRepeat
			if p := Schedule(in); len(p.Pending) != len(pending) || len(p.Placements) != 0 {
				b.Fatalf("%d pending, %d placements", len(p.Pending), len(p.Placements))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				Schedule(in)
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(len(pending)), "ns/pending")
		})
	}
}
