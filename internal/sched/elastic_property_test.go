package sched

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// elasticCase builds a random world whose running work includes grown
// elastic workloads: a first batch (a third of it elastic) is placed at
// t0, grows in a second cycle an hour later, and a second batch is
// pending two hours after that. It returns the third cycle's input and
// the second cycle's (growth) input.
func elasticCase(seed uint64) (grow, next Input) {
	rng := rand.New(rand.NewPCG(seed, 0xe1a5))
	w := randomWorld(rng)
	// Everything lendable (the default): idle guarantee never keeps growth
	// or a claim out (see propShrinkFirst).
	for t := range w.in.Tenants.Tenants {
		for j := range w.in.Tenants.Tenants[t].Quotas {
			q := &w.in.Tenants.Tenants[t].Quotas[j]
			q.Lendable = q.Guaranteed
		}
	}
	in := w.in
	first := randomWorkloads(rng, w, 10+rng.IntN(20), "a", t0)
	for i, x := range first {
		if i%3 != 0 || x.Reservation != "" {
			continue
		}
		lo := x.Replicas
		step := 1
		if x.Gang() {
			step = 1 + rng.IntN(2)
		}
		x.Elastic = &workload.Elastic{Min: lo, Max: lo + step*(1+rng.IntN(4)), Step: step}
	}
	in.Workloads = first
	p := Schedule(in)
	in.Workloads = running(Apply(in.Workloads, p, t0))
	in.Now = t0.Add(time.Hour)
	grow = in
	p = Schedule(in)
	in.Workloads = running(Apply(in.Workloads, p, in.Now))
	in.Now = t0.Add(3 * time.Hour)
	in.Workloads = append(in.Workloads, randomWorkloads(rng, w, 5+rng.IntN(20), "b", in.Now)...)
	if rng.IntN(5) == 0 && len(in.Fleet.Nodes) > 0 {
		in.Down = []fleet.NodeID{in.Fleet.Nodes[rng.IntN(len(in.Fleet.Nodes))].ID}
	}
	return grow, in
}

func running(ws []*workload.Workload) []*workload.Workload {
	var out []*workload.Workload
	for _, w := range ws {
		if w.Running != nil {
			out = append(out, w)
		}
	}
	return out
}

// TestElasticProperties: with grown elastic workloads running, the core
// properties hold, elastic work shrinks before anything else is preempted
// (shrink-first), sizes stay within bounds and move in whole steps
// (elastic-bounds), and the same input gives the same plan (deterministic,
// and cache-same-plan across cycles).
func TestElasticProperties(t *testing.T) {
	n := 300
	if s := os.Getenv("ARBITER_PROPERTY_SEEDS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	if testing.Short() {
		n = 40
	}
	grew, shrank, checked := 0, 0, 0
	for seed := uint64(1); seed <= uint64(n); seed++ {
		growIn, in := elasticCase(seed)
		for _, c := range []struct {
			name string
			in   Input
		}{{"grow", growIn}, {"claims", in}} {
			if err := Check(&c.in); err != nil {
				t.Fatalf("seed %d %s: inconsistent state: %v", seed, c.name, err)
			}
			plan := Schedule(c.in)
			for _, r := range plan.Resizes {
				if r.Shrink() {
					shrank++
				} else {
					grew++
				}
			}
			for _, prop := range append(slices.Clip(coreProps), property{"elastic-bounds", propElasticBounds}, property{"growth-guarantee", propGrowthGuarantee}) {
				if err := prop.fn(c.in, plan); err != nil {
					t.Errorf("seed %d %s: %s: %v", seed, c.name, prop.name, err)
				}
			}
		}
		k, err := propShrinkFirst(in)
		checked += k
		if err != nil {
			t.Errorf("seed %d: shrink-first: %v", seed, err)
		}
	}
	// The worlds must exercise what is tested.
	if grew == 0 || shrank == 0 || checked == 0 {
		t.Fatalf("%d growths, %d shrinks, %d claims that needed growth back: the cases test nothing", grew, shrank, checked)
	}
	t.Logf("%d growths, %d shrinks, %d claims that needed growth back", grew, shrank, checked)
}

// propElasticBounds: every resize is of a running elastic workload, in
// whole steps, within min and max; growth adds exactly the replicas it
// says, numbered on from the current size; no workload is both resized
// and preempted; fixed workloads are never resized.
func propElasticBounds(in Input, p Plan) error {
	byName := map[workload.ID]*workload.Workload{}
	for _, w := range in.Workloads {
		byName[w.Name] = w
	}
	preempted := map[workload.ID]bool{}
	for _, x := range p.Preemptions {
		preempted[x.Workload] = true
	}
	seen := map[workload.ID]bool{}
	for _, r := range p.Resizes {
		w := byName[r.Workload]
		switch {
		case w == nil || w.Running == nil:
			return fmt.Errorf("resize of %s, which does not run", r.Workload)
		case w.Elastic == nil:
			return fmt.Errorf("fixed workload %s resized", r.Workload)
		case seen[r.Workload] || preempted[r.Workload]:
			return fmt.Errorf("%s resized twice, or resized and preempted", r.Workload)
		case r.From != len(w.Running.Replicas) || r.To == r.From:
			return fmt.Errorf("%s resized %d -> %d, runs %d", r.Workload, r.From, r.To, len(w.Running.Replicas))
		case r.To < w.MinReplicas() || r.To > w.MaxReplicas() || (r.To-w.MinReplicas())%w.ReplicaStep() != 0:
			return fmt.Errorf("%s resized to %d, outside %d–%d step %d", r.Workload, r.To, w.MinReplicas(), w.MaxReplicas(), w.ReplicaStep())
		case !r.Shrink() && len(r.Add) != r.To-r.From:
			return fmt.Errorf("%s grows by %d with %d placements", r.Workload, r.To-r.From, len(r.Add))
		case r.Shrink() && len(r.Add) > 0:
			return fmt.Errorf("%s shrinks with placements", r.Workload)
		}
		for i, x := range r.Add {
			if x.Replica != r.From+i || x.Workload != r.Workload {
				return fmt.Errorf("%s grows with replica %d of %s at position %d", r.Workload, x.Replica, x.Workload, i)
			}
			if w.Gang() {
				n0, _ := in.Fleet.Node(w.Running.Replicas[0].Node)
				if n, _ := in.Fleet.Node(x.Node); n.Block != n0.Block {
					return fmt.Errorf("gang %s grows out of block %s into %s", w.Name, n0.Block, n.Block)
				}
			}
		}
		seen[r.Workload] = true
	}
	for _, w := range Apply(in.Workloads, p, in.Now) {
		if w.Running != nil && len(w.Running.Replicas) != w.Replicas {
			return fmt.Errorf("%s runs %d replicas, its spec says %d", w.Name, len(w.Running.Replicas), w.Replicas)
		}
		if w.Running == nil && w.Elastic != nil && w.Replicas != w.Elastic.Min {
			return fmt.Errorf("pending elastic %s at %d replicas, not its min", w.Name, w.Replicas)
		}
	}
	return nil
}

// propGrowthGuarantee: growth its tenant's guarantee covers (keptGrowth)
// is given back only to the tenant's own claims (or a failed node).
func propGrowthGuarantee(in Input, p Plan) error {
	var running []*workload.Workload
	byName := map[workload.ID]*workload.Workload{}
	for _, w := range in.Workloads {
		byName[w.Name] = w
		if w.Running != nil {
			running = append(running, w)
		}
	}
	kept := keptGrowth(in, running)
	for _, r := range p.Resizes {
		w, by := byName[r.Workload], byName[r.By]
		if !r.Shrink() || by == nil || by.Tenant == w.Tenant {
			continue
		}
		if r.To < w.MinReplicas()+kept[w.Name] {
			return fmt.Errorf("%s of tenant %s gave %s (tenant %s) %d -> %d, below the %d its guarantee covers", by.Name, by.Tenant, w.Name, w.Tenant, r.From, r.To, w.MinReplicas()+kept[w.Name])
		}
	}
	return nil
}

// propShrinkFirst: elastic work shrinks before anything else is
// preempted. For each pending workload alone: when it fits without
// preempting anything in the world where the growth it may take is gone
// (its capacity idle, the rest as it is), then with the growth in place it
// is placed too, and evicts nothing: it only takes growth back. A claim
// may take its own tenant's growth and, of other tenants, the growth
// beyond their guarantee (keptGrowth). It returns how many claims needed
// growth back.
func propShrinkFirst(in Input) (int, error) {
	var runningW, pending []*workload.Workload
	for _, w := range in.Workloads {
		if w.Running != nil {
			runningW = append(runningW, w)
		} else {
			pending = append(pending, w)
		}
	}
	kept := keptGrowth(in, runningW)
	in.Down = nil // node failures evict in both: keep to claims
	needed := 0
	for _, c := range pending {
		// The same running work without the growth c may take.
		trimmed := make([]*workload.Workload, len(runningW))
		for i, w := range runningW {
			cp := *w
			if w.Elastic != nil && !w.Running.OnReservation && len(w.Running.Replicas) > w.Elastic.Min {
				to := w.Elastic.Min
				if w.Tenant != c.Tenant {
					to += kept[w.Name] // what its tenant's guarantee covers stays
				}
				cp.Running = Resized(w.Running, Resize{From: len(w.Running.Replicas), To: to}, in.Now)
				cp.Replicas = to
			}
			trimmed[i] = &cp
		}
		base := in
		base.Workloads = append(trimmed, c)
		p0 := Schedule(base)
		if len(p0.Preemptions) > 0 || !placed(p0, c.Name) {
			continue
		}
		with := in
		with.Workloads = append(slices.Clip(runningW), c)
		p := Schedule(with)
		if !placed(p, c.Name) {
			return needed, fmt.Errorf("%s fits without the growth it may take but is not placed with it: %s", c.Name, reasonOf(p, c.Name))
		}
		if len(p.Preemptions) > 0 {
			b, _ := json.Marshal(p.Preemptions)
			return needed, fmt.Errorf("%s preempts %s where growth given back was enough", c.Name, b)
		}
		for _, r := range p.Resizes {
			if r.Shrink() && r.By == c.Name {
				needed++
				break
			}
		}
		// Same input, same plan.
		a, _ := json.Marshal(p)
		b, _ := json.Marshal(Schedule(with))
		if !bytes.Equal(a, b) {
			return needed, fmt.Errorf("two runs differ:\n%s\n%s", a, b)
		}
	}
	return needed, nil
}

// keptGrowth is, per running elastic workload, how many of its growth
// replicas its tenant's guarantee covers, computed apart from the core:
// per tenant and quota entry, its other work first (fixed workloads whole,
// elastic ones at their min), then the growth steps by priority, name and
// step, while the sum stays within the guarantee.
func keptGrowth(in Input, ws []*workload.Workload) map[workload.ID]int {
	type key struct{ t, e int }
	used := map[key]resource.MilliGPU{}
	type step struct {
		w    *workload.Workload
		k    key
		n    int // replicas in the step
		step int
	}
	var steps []step
	for _, w := range ws {
		if w.Running.OnReservation {
			continue
		}
		t, ok := in.Tenants.Lookup(w.Tenant)
		if !ok {
			continue
		}
		_, e, ok := in.Tenants.Entry(t, w.Running.Flavor, w.Running.Region)
		if !ok {
			continue
		}
		k := key{t, e}
		if w.Elastic == nil {
			used[k] += w.TotalGPUs()
			continue
		}
		used[k] += w.GPUs.Mul(min(w.Elastic.Min, len(w.Running.Replicas)))
		for i, at := 0, w.Elastic.Min; at < len(w.Running.Replicas); i, at = i+1, at+w.ReplicaStep() {
			steps = append(steps, step{w, k, min(w.ReplicaStep(), len(w.Running.Replicas)-at), i})
		}
	}
	sort.SliceStable(steps, func(i, j int) bool {
		a, b := steps[i], steps[j]
		if a.k != b.k {
			return a.k.t < b.k.t || a.k.t == b.k.t && a.k.e < b.k.e
		}
		if a.w.Priority != b.w.Priority {
			return a.w.Priority > b.w.Priority
		}
		if a.w.Name != b.w.Name {
			return a.w.Name < b.w.Name
		}
		return a.step < b.step
	})
	out := map[workload.ID]int{}
	for _, st := range steps {
		used[st.k] += st.w.GPUs.Mul(st.n)
		if used[st.k] <= in.Tenants.Tenants[st.k.t].Quotas[st.k.e].Guaranteed {
			out[st.w.Name] += st.n
		}
	}
	return out
}

func placed(p Plan, id workload.ID) bool {
	for _, x := range p.Placements {
		if x.Workload == id {
			return true
		}
	}
	return false
}
