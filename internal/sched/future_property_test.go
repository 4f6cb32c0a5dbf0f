package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestFutureReservationProperty (issue 17 item 4), over random worlds with
// a reservation bound before its window and random work (runtimes known,
// unknown; preemptible with short and long graces): before the window
// only work expected to end by its start, or preemptible work that leaves
// within the honour window, runs on its machines; with accurate runtimes
// the owner gets its whole count in the first cycle at the start.
func TestFutureReservationProperty(t *testing.T) {
	checked := 0
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0xf007))
		w := randomWorld(rng)
		if w.res == "" {
			continue
		}
		in := w.in
		in.Options.HonourWindow = DefaultHonourWindow
		r := &in.Reservations[0]
		start := t0.Add(2 * time.Hour)
		r.Start, r.End = start, start.Add(4*time.Hour)
		in.Workloads = randomWorkloads(rng, w, 10+rng.IntN(40), "a", t0)
		for _, x := range in.Workloads {
			x.Reservation = ""
			if rng.IntN(3) > 0 {
				x.ExpectedRuntime = time.Duration(1+rng.IntN(10)) * 30 * time.Minute
			}
			if x.Preemptible {
				x.GracePeriod = time.Duration(rng.IntN(10)) * time.Minute
			}
		}
		reserved := map[fleet.NodeID]bool{}
		for _, id := range r.Nodes {
			reserved[id] = true
		}
		running := Apply(in.Workloads, Schedule(in), t0)
		for _, x := range running {
			if x.Running == nil || !slices.ContainsFunc(x.Running.Replicas, func(p workload.Replica) bool { return reserved[p.Node] }) {
				continue
			}
			endsInTime := x.ExpectedRuntime > 0 && !t0.Add(x.ExpectedRuntime).After(start)
			leavesInTime := x.Preemptible && ExitTime(x) <= in.Options.HonourWindow
			if !endsInTime && !leavesInTime {
				t.Fatalf("seed %d: %s (runtime %v, preemptible %v, grace %v) runs on the reservation's machines before its window",
					seed, x.Name, x.ExpectedRuntime, x.Preemptible, x.GracePeriod)
			}
		}
		// The window opens; the work expected to end by then has ended.
		in.Now = start
		in.Workloads = in.Workloads[:0]
		for _, x := range running {
			if x.Running != nil && (x.ExpectedRuntime == 0 || x.Running.StartedAt.Add(x.ExpectedRuntime).After(start)) {
				in.Workloads = append(in.Workloads, x)
			}
		}
		own := &workload.Workload{Spec: workload.Spec{Name: "owner-claim", Tenant: w.owner, Reservation: w.res,
			GPUs: resource.GPUs(8), Replicas: r.Count, Flavors: []fleet.ModelID{"A100-80G"}, Regions: []string{r.Region}}, SubmittedAt: start}
		in.Workloads = append(in.Workloads, own)
		p := Schedule(in)
		placed := 0
		for _, pl := range p.Placements {
			if pl.Workload == own.Name && reserved[pl.Node] {
				placed++
			}
		}
		if placed != r.Count {
			t.Fatalf("seed %d: at the window's start the owner got %d of its %d machines (plan %+v)", seed, placed, r.Count, p.Pending)
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("only %d worlds had a reservation", checked)
	}
}
