package sched

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// naiveDecay is the reference of fair share over time: the decayed usage
// of every entry at now, integrated afresh from the whole record of
// samples (usage[k] held over (times[k-1], times[k]]) by Simpson's rule,
// with no recurrence.
func naiveDecay(tree *tenancy.Tree, times []time.Time, usage []tenancy.Ledger, now time.Time, hl time.Duration) [][]float64 {
	out := make([][]float64, len(tree.Tenants))
	for i, t := range tree.Tenants {
		out[i] = make([]float64, len(t.Quotas))
	}
	const steps = 2000
	for k := 1; k < len(times); k++ {
		from, to := times[k-1], times[k]
		dt := to.Sub(from).Hours() / steps
		f := func(n float64) float64 { // the weight of an hour at from + n·dt
			return math.Exp2(-(now.Sub(from).Hours() - n*dt) / hl.Hours())
		}
		var w float64 // ∫ 2^(-(now-s)/H) ds over the interval, in hours
		for n := 0; n < steps; n++ {
			x := float64(n)
			w += (f(x) + 4*f(x+0.5) + f(x+1)) * dt / 6 // Simpson's rule
		}
		for i := range out {
			for j := range out[i] {
				out[i][j] += float64(usage[k][i][j]) / resource.PerGPU * w
			}
		}
	}
	return out
}

// usageOf is what the core charges for running work: its total GPUs on
// every entry of its tenant's path, outside its own reservation.
func usageOf(tree *tenancy.Tree, ws []*workload.Workload) tenancy.Ledger {
	l := tenancy.NewLedger(tree)
	for _, w := range ws {
		if w.Running != nil && !w.Running.OnReservation {
			tree.ChargeUse(l, w.Tenant, tenancy.Key{Model: w.Running.Flavor, Region: w.Running.Region}, w.TotalGPUs())
		}
	}
	return l
}

// TestFairShareProperties runs random worlds through several cycles with
// fair share over time and checks, against the naive reference: the
// plan's History holds each entry's decayed usage; tenants at the same
// priority are ordered by decayed usage over guarantee × weight (the
// pending list of work that cannot fit is in that order); the same input
// gives the same plan.
func TestFairShareProperties(t *testing.T) {
	n := 150
	if testing.Short() {
		n = 40
	}
	for seed := range uint64(n) {
		if err := fairShareCase(seed); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func fairShareCase(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0xfa12))
	w := randomWorld(rng)
	in := w.in
	hl := time.Duration(1+rng.IntN(72)) * time.Hour
	in.Options.FairShare.HalfLife = hl
	now := t0
	times := []time.Time{now}
	var samples []tenancy.Ledger
	samples = append(samples, tenancy.NewLedger(in.Tenants))
	var ws []*workload.Workload
	var hist *tenancy.History
	cycles := 2 + rng.IntN(5)
	for c := 0; c < cycles; c++ {
		// Some running work ends, new work arrives.
		keep := ws[:0]
		for _, x := range ws {
			if x.Running == nil || rng.IntN(4) != 0 {
				keep = append(keep, x)
			}
		}
		ws = append(keep, randomWorkloads(rng, w, 5+rng.IntN(15), fmt.Sprintf("c%d-", c), now)...)
		in.Now, in.Workloads, in.History = now, ws, hist
		samples[len(samples)-1] = usageOf(in.Tenants, ws) // what ran until now
		plan := Schedule(in)
		if err := checkHistory(in.Tenants, plan.History, naiveDecay(in.Tenants, times, samples, now, hl)); err != nil {
			return fmt.Errorf("cycle %d: %v", c, err)
		}
		ws, hist = Apply(ws, plan, now), plan.History
		now = now.Add(time.Duration(10+rng.IntN(24*60)) * time.Minute)
		times = append(times, now)
		samples = append(samples, nil)
	}
	// Last cycle: work too big to fit anywhere is decided in order.
	in.Now, in.History = now, hist
	samples[len(samples)-1] = usageOf(in.Tenants, ws)
	var big []*workload.Workload
	for i := range 20 {
		s := workload.Spec{Name: workload.ID(fmt.Sprintf("big%02d", i)), Tenant: fmt.Sprintf("t%d", rng.IntN(len(in.Tenants.Tenants)-1)),
			Priority: workload.Priority(1 + rng.IntN(2)), GPUs: resource.GPUs(8), Replicas: 500,
			Flavors: []fleet.ModelID{"A100-80G"}, Regions: []string{in.Fleet.Regions[0]}}
		big = append(big, &workload.Workload{Spec: s, SubmittedAt: t0.Add(time.Duration(rng.IntN(3)) * time.Second)})
	}
	in.Workloads = append(slices.Clip(ws), big...)
	plan := Schedule(in)
	ref := naiveDecay(in.Tenants, times, samples, now, hl)
	if err := checkHistory(in.Tenants, plan.History, ref); err != nil {
		return fmt.Errorf("last cycle: %v", err)
	}
	if err := propDeterministic(in, plan); err != nil {
		return err
	}
	if err := propTenantBound(in, plan); err != nil {
		return err // the bound keeps each tenant's first by decayed usage
	}
	cur := usageOf(in.Tenants, in.Workloads)
	type key struct {
		prio        workload.Priority
		tprio       int
		fair, usage float64
	}
	keyOf := func(id workload.ID) (key, bool) {
		for _, b := range big {
			if b.Name != id {
				continue
			}
			ti, _ := in.Tenants.Lookup(b.Tenant)
			k := key{prio: b.Priority}
			if q, j, ok := in.Tenants.Entry(ti, b.Flavors[0], b.Regions[0]); ok {
				k.tprio, k.fair, k.usage = q.Priority, tenancy.OrderShare(ref[ti][j], q), tenancy.OrderShare(float64(cur[ti][j]), q)
			}
			return k, true
		}
		return key{}, false
	}
	var prev key
	var prevID workload.ID
	for _, p := range plan.Pending {
		k, ok := keyOf(p.Workload)
		if !ok {
			continue
		}
		if prevID != "" {
			c := cmp.Or(-cmp.Compare(prev.prio, k.prio), -cmp.Compare(prev.tprio, k.tprio))
			if c == 0 && !near(prev.fair, k.fair) {
				c = cmp.Compare(prev.fair, k.fair)
			}
			if c == 0 && near(prev.fair, k.fair) && prev.usage != k.usage {
				c = cmp.Compare(prev.usage, k.usage)
			}
			if c > 0 {
				return fmt.Errorf("%s (%+v) decided before %s (%+v)", prevID, prev, p.Workload, k)
			}
		}
		prev, prevID = k, p.Workload
	}
	return nil
}

// near reports whether two decayed shares are equal but for the
// reference's integration error.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*max(math.Abs(a), math.Abs(b), 1e-9) }

// checkHistory compares a plan's History with the reference.
func checkHistory(tree *tenancy.Tree, h *tenancy.History, ref [][]float64) error {
	if h == nil {
		return fmt.Errorf("no history in the plan")
	}
	got := map[string]float64{}
	for _, e := range h.Entries {
		got[e.Tenant+"/"+e.Flavor+"/"+e.Region] = e.GPUHours
	}
	for i, ten := range tree.Tenants {
		for j, q := range ten.Quotas {
			k := ten.Name + "/" + string(q.Key.Model) + "/" + q.Key.Region
			if g, want := got[k], ref[i][j]; math.Abs(g-want) > 1e-6*max(want, 1) {
				return fmt.Errorf("%s: decayed usage %.9f GPU-h, reference %.9f", k, g, want)
			}
		}
	}
	return nil
}
