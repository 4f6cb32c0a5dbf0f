package sched

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/sched/schedbench"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// benchFleet is schedbench.Fleet.
func benchFleet(b *testing.B, n int) (*fleet.Fleet, *tenancy.Tree) {
	b.Helper()
	f, tree, err := schedbench.Fleet(n)
	if err != nil {
		b.Fatal(err)
	}
	return f, tree
}

var (
	benchWorkloads = schedbench.Workloads
	fullOfBatch    = schedbench.FullOfBatch
	// backfillCase is BenchmarkSchedule's nodes=10000/backfill case
	// (schedbench.Backfill):
	//
	//	go test ./internal/sched -run '^$' -bench 'BenchmarkSchedule/nodes=10000/backfill' -benchmem -cpu 1
	backfillCase = schedbench.Backfill
)

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

// BenchmarkScheduleMixed is BenchmarkSchedule's heterogeneous queue
// (issue 19; the distribution is schedbench.Mixed's): 200,000 pending
// workloads over 10,000 nodes in 3 regions and 4 flavors, 50 tenants.
//
//   - full: a cycle from scratch (no Cache).
//
//   - steady: a cycle with a Cache after 100 submissions and 100
//     completions, from a state the cycles have settled (nothing more to
//     place); each iteration is another such change of the same state.
//
//     go test ./internal/sched -run '^$' -bench 'BenchmarkScheduleMixed' -benchmem -cpu 1
func BenchmarkScheduleMixed(b *testing.B) {
	m, err := schedbench.NewMixed(10000, 200_000, 1)
	if err != nil {
		b.Fatal(err)
	}
	base := Input{Now: t0, Fleet: m.Fleet, Tenants: m.Tenants, Workloads: append(slices.Clip(m.Running), m.Pending...)}
	base.Options.Planning = DefaultPlanning()
	base.Options.TerseReasons = true
	b.Run("nodes=10000/mixed-200k/full", func(b *testing.B) {
		p := Schedule(base)
		if len(p.Pending) == 0 {
			b.Fatal("nothing pending: the queue must be real")
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			Schedule(base)
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/cycle")
	})
	b.Run("nodes=10000/mixed-200k/steady", func(b *testing.B) {
		// Settle: cycles until one places and evicts nothing.
		in := base
		in.Workloads = slices.Clone(base.Workloads)
		in = settle(in)
		// Changes of the settled state: 100 running workloads end, 100
		// new ones arrive.
		const variants = 16
		rng := rand.New(rand.NewPCG(7, 7))
		var running []int
		for i, w := range in.Workloads {
			if w.Running != nil {
				running = append(running, i)
			}
		}
		ins := make([]Input, variants)
		for v := range ins {
			gone := map[int]bool{}
			for len(gone) < 100 {
				gone[running[rng.IntN(len(running))]] = true
			}
			ws := make([]*workload.Workload, 0, len(in.Workloads)+100)
			for i, w := range in.Workloads {
				if !gone[i] {
					ws = append(ws, w)
				}
			}
			ins[v] = in
			ins[v].Workloads = append(ws, m.Draw(100)...)
		}
		cache := &Cache{}
		for v := range ins {
			ins[v].Cache = cache
		}
		Schedule(ins[variants-1]) // the cache's first state
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			Schedule(ins[i%variants])
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/cycle")
	})
	// One tenant's 100,000 of the mix queued behind the settled fleet, the
	// others' 2,000, with the server's tenant bound: a cycle after 100
	// more of the others' arrive (BenchmarkSubmitMixed's
	// ARBITER_BENCH_NOISY, the core alone).
	b.Run("nodes=10000/noisy-100k/bounded", func(b *testing.B) {
		noise := m.Draw(100_000)
		for _, w := range noise {
			w.Tenant = m.Pending[0].Tenant
		}
		in := base
		in.Options.TenantBound = DefaultTenantBound
		in.Workloads = append(slices.Clip(m.Running), noise...)
		for _, w := range m.Draw(2000) {
			if w.Tenant != noise[0].Tenant {
				in.Workloads = append(in.Workloads, w)
			}
		}
		in = settle(in)
		const variants = 16
		ins := make([]Input, variants)
		cache := &Cache{}
		for v := range ins {
			ins[v] = in
			ins[v].Cache = cache
			ins[v].Workloads = slices.Clip(in.Workloads)
			for _, w := range m.Draw(100) {
				if w.Tenant != noise[0].Tenant {
					ins[v].Workloads = append(ins[v].Workloads, w)
				}
			}
		}
		p := Schedule(ins[variants-1])
		deferred := 0
		for _, x := range p.Pending {
			if x.Code == ReasonDeferred {
				deferred++
			}
		}
		if deferred == 0 {
			b.Fatal("nothing deferred: the noisy queue must exceed the bound")
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			Schedule(ins[i%variants])
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/cycle")
		b.ReportMetric(float64(deferred), "deferred")
		b.ReportMetric(float64(len(p.Pending)), "pending")
	})
}

// settle applies cycles to in until one places and evicts nothing (at
// most 20).
func settle(in Input) Input {
	for round := 0; round < 20; round++ {
		p := Schedule(in)
		in.Workloads = Apply(in.Workloads, p, in.Now)
		if len(p.Placements)+len(p.Preemptions) == 0 {
			break
		}
	}
	return in
}

// TestMixedSearchMemo checks on BenchmarkScheduleMixed's distribution (a
// tenth of its size) that the victim searches' memos change no plan.
func TestMixedSearchMemo(t *testing.T) {
	m, err := schedbench.NewMixed(1000, 20_000, 3)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Now: t0, Fleet: m.Fleet, Tenants: m.Tenants, Workloads: append(slices.Clip(m.Running), m.Pending...)}
	in.Options.Planning = DefaultPlanning()
	got := Schedule(in)
	in.Options.noSearchMemo = true
	want := Schedule(in)
	if len(want.Placements) == 0 || len(want.Preemptions) == 0 {
		t.Fatalf("the world must place and preempt: %d placements, %d preemptions", len(want.Placements), len(want.Preemptions))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plans differ with the search memos: %d/%d placements, %d/%d preemptions, %d/%d pending",
			len(got.Placements), len(want.Placements), len(got.Preemptions), len(want.Preemptions), len(got.Pending), len(want.Pending))
	}
}
