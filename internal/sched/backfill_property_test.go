package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// flatWorld is a random fleet with tenants without quotas, so that the
// order of pending work (priority, submission, name) does not change
// as work runs.
func flatWorld(rng *rand.Rand) Input {
	w := randomWorld(rng)
	tree, err := tenancy.NewTree([]tenancy.TenantSpec{{Name: "root"}, {Name: "t0", Parent: "root"}, {Name: "t1", Parent: "root"}, {Name: "t2", Parent: "root"}})
	if err != nil {
		panic(err)
	}
	in := w.in
	in.Tenants, in.Reservations = tree, nil
	in.Options.HonourWindow = DefaultHonourWindow
	in.Options.Planning = Planning{Depth: 8}
	return in
}

// runUntil runs cycles with exact runtimes from in.Now: at each cycle,
// work whose expected end has come ends; the next cycle is at the next
// end, or at the latest at stop. It returns when id is running, with the
// time it was placed, or false after the cycle at stop.
func runUntil(in Input, ws []*workload.Workload, id workload.ID, stop time.Time) (time.Time, bool) {
	for {
		live := ws[:0:0]
		for _, x := range ws {
			if x.Running == nil || x.Running.StartedAt.Add(x.ExpectedRuntime).After(in.Now) {
				live = append(live, x)
			}
		}
		in.Workloads = live
		pl := Schedule(in)
		if debugRun {
			for _, x := range pl.Pending {
				if x.Workload == id && x.Planned != nil {
					fmt.Println("CYCLE", in.Now.Format(time.TimeOnly), x.Planned.Start.Format(time.TimeOnly), x.Planned.Block, x.Planned.Ending)
				}
			}
			for _, x := range pl.Placements {
				for _, w := range live {
					if w.Name == x.Workload {
						fmt.Println("   place", x.Workload, x.Node, x.GPUs, w.Priority, w.Preemptible, w.ExpectedRuntime, w.GracePeriod, x.AfterPreemption)
					}
				}
			}
		}
		ws = Apply(live, pl, in.Now)
		for _, x := range ws {
			if x.Name == id && x.Running != nil {
				return in.Now, true
			}
		}
		if !in.Now.Before(stop) {
			if debugRun {
				p := Schedule(in)
				for _, x := range p.Pending {
					if x.Workload == id {
						fmt.Println("AT STOP", in.Now, x.Reason)
					}
				}
				for _, x := range in.Workloads {
					if x.Name == id {
						fmt.Printf(" J %+v\n", x.Spec)
					}
					if x.Running != nil {
						fmt.Println(" running", x.Name, x.Priority, x.Preemptible, x.Running.Replicas[0].Node, x.Running.StartedAt.Format(time.TimeOnly), x.ExpectedRuntime, x.GPUs, len(x.Running.Replicas), x.Tenant, x.Pools, x.Running.Replicas)
					}
				}
			}
			return time.Time{}, false
		}
		next := stop
		for _, x := range ws {
			if x.Running != nil {
				if e := x.Running.StartedAt.Add(x.ExpectedRuntime); e.After(in.Now) && e.Before(next) {
					next = e
				}
			}
		}
		in.Now = next
	}
}

var debugRun = false

// TestBackfillNeverDelaysProperty (issue 17 item 1): over random worlds
// with accurate runtimes and no new arrivals, a critical gang that does
// not fit gets a planned start and starts by then: the work decided after
// it (backfilled onto its held capacity, or anywhere) never delays it.
// Nothing is ahead of it in the order: all other pending work is of
// lower priority, and running critical work is never evicted here.
func TestBackfillNeverDelaysProperty(t *testing.T) {
	checked := 0
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0xbf11))
		in := flatWorld(rng)
		ws := randomWorkloads(rng, &world{in: in}, 20+rng.IntN(40), "a", t0)
		for _, x := range ws {
			x.Tenant, x.Reservation = fmt.Sprintf("t%d", rng.IntN(3)), ""
			x.ExpectedRuntime = time.Duration(1+rng.IntN(16)) * 15 * time.Minute
			if x.Preemptible {
				x.GracePeriod = time.Duration(rng.IntN(3)) * time.Minute
			}
		}
		// A first cycle fills the fleet; later work queues behind.
		in.Workloads = ws
		ws = Apply(ws, Schedule(in), t0)
		in.Now = t0.Add(10 * time.Minute)
		later := randomWorkloads(rng, &world{in: in}, 10+rng.IntN(20), "b", in.Now)
		for _, x := range later {
			x.Tenant, x.Reservation = fmt.Sprintf("t%d", rng.IntN(3)), ""
			x.ExpectedRuntime = time.Duration(1+rng.IntN(16)) * 15 * time.Minute
			x.Priority = min(x.Priority, workload.PriorityHigh)
		}
		region := in.Fleet.Regions[rng.IntN(len(in.Fleet.Regions))]
		gang := &workload.Workload{Spec: workload.Spec{Name: "gang", Tenant: "t0", Priority: workload.PriorityCritical,
			GPUs: resource.GPUs(8), Replicas: 2 + rng.IntN(3), Topology: workload.TopologySameBlock,
			Flavors: []fleet.ModelID{"A100-80G"}, Regions: []string{region}, ExpectedRuntime: 10 * time.Hour}, SubmittedAt: in.Now.Add(-time.Second)}
		ws = append(append(ws, gang), later...)
		in.Workloads = ws
		p := Schedule(in)
		i := slices.IndexFunc(p.Pending, func(x Pending) bool { return x.Workload == gang.Name })
		if i < 0 || p.Pending[i].Planned == nil {
			continue
		}
		plan := p.Pending[i].Planned
		at, ok := runUntil(in, ws, gang.Name, plan.Start)
		if !ok || at.After(plan.Start) {
			t.Fatalf("seed %d: the gang, planned to start at %s (%s), did not start by then", seed, plan.Start.Format(time.TimeOnly), p.Pending[i].Reason)
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("only %d worlds had a planned gang", checked)
	}
}

// TestStarvationBoundProperty (issue 17 item 2): a gang faces a stream of
// higher-priority work (up to 2 hours each) that takes every machine as it
// frees, and lower-priority preemptible work (up to 3 minutes of grace).
// Without a bound it may never start; with max_wait it starts within its
// bound plus the longest runtime that may hold its block plus the longest
// grace (plus the cycle that sees it).
func TestStarvationBoundProperty(t *testing.T) {
	const (
		bound   = time.Hour
		longest = 2 * time.Hour
		grace   = 3 * time.Minute
		cycle   = 10 * time.Minute
	)
	starved := 0
	for seed := uint64(0); seed < 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x57a4))
		spec := fleet.Spec{Regions: []fleet.RegionSpec{{Name: "eastus", Zones: []fleet.ZoneSpec{{Name: "1"}}}}}
		nb := 2 + rng.IntN(2)
		for b := 0; b < nb; b++ {
			spec.Regions[0].Zones[0].Blocks = append(spec.Regions[0].Zones[0].Blocks, fleet.BlockSpec{
				Name: fleet.BlockID(fmt.Sprintf("b%d", b)), Nodes: []fleet.GroupSpec{{SKU: "Standard_ND96amsr_A100_v4", Count: 2}}})
		}
		f, err := fleet.Build(spec, fleet.Builtin())
		if err != nil {
			t.Fatal(err)
		}
		tree, _ := tenancy.NewTree([]tenancy.TenantSpec{{Name: "ai"}, {Name: "web"}, {Name: "batch"}})
		gang := &workload.Workload{Spec: workload.Spec{Name: "gang", Tenant: "ai", Priority: workload.PriorityNormal, GPUs: resource.GPUs(8), Replicas: 2,
			Topology: workload.TopologySameBlock, Flavors: []fleet.ModelID{"A100-80G"}, Regions: []string{"eastus"}, ExpectedRuntime: 10 * time.Hour}, SubmittedAt: t0}
		arrivals := func(now time.Time, k int) []*workload.Workload {
			var out []*workload.Workload
			for i := 0; i < 2+rng.IntN(3); i++ {
				w := &workload.Workload{Spec: workload.Spec{Name: workload.ID(fmt.Sprintf("web-%d-%d", k, i)), Tenant: "web", Priority: workload.PriorityHigh,
					GPUs: resource.GPUs(4 * (1 + rng.IntN(2))), Replicas: 1, Flavors: gang.Flavors, Regions: gang.Regions,
					ExpectedRuntime: time.Duration(1+rng.IntN(int(longest/cycle))) * cycle}, SubmittedAt: now}
				if rng.IntN(3) == 0 {
					w.Name, w.Tenant, w.Priority, w.Preemptible = workload.ID(fmt.Sprintf("batch-%d-%d", k, i)), "batch", workload.PriorityLow, true
					w.GracePeriod, w.ExpectedRuntime = time.Duration(rng.IntN(4))*time.Minute, 0
				}
				out = append(out, w)
			}
			return out
		}
		run := func(maxWait time.Duration) (time.Time, bool) {
			in := Input{Now: t0, Fleet: f, Tenants: tree, Options: Options{HonourWindow: DefaultHonourWindow,
				Planning: Planning{Depth: 8, MaxWait: map[workload.Priority]time.Duration{workload.PriorityNormal: maxWait}}}}
			ws := []*workload.Workload{gang}
			stop := t0.Add(bound + longest + grace + 2*cycle)
			for k := 0; !in.Now.After(stop); k++ {
				live := ws[:0:0]
				for _, x := range ws {
					if x.Running == nil || x.ExpectedRuntime == 0 || x.Running.StartedAt.Add(x.ExpectedRuntime).After(in.Now) {
						live = append(live, x)
					}
				}
				in.Workloads = append(live, arrivals(in.Now, k)...)
				ws = Apply(in.Workloads, Schedule(in), in.Now)
				if i := slices.IndexFunc(ws, func(x *workload.Workload) bool { return x.Name == "gang" }); ws[i].Running != nil {
					return in.Now, true
				}
				in.Now = in.Now.Add(cycle)
			}
			return time.Time{}, false
		}
		if _, ok := run(0); !ok {
			starved++ // without a bound this stream starves the gang
		}
		at, ok := run(bound)
		if !ok {
			t.Fatalf("seed %d: the gang never started within its bound %v + %v + %v", seed, bound, longest, grace)
		}
		if wait := at.Sub(t0); wait > bound+longest+grace+cycle {
			t.Fatalf("seed %d: the gang waited %v, over %v + %v + %v + a cycle", seed, wait, bound, longest, grace)
		}
	}
	if starved == 0 {
		t.Fatal("no stream starved the gang without a bound: the test shows nothing")
	}
}
