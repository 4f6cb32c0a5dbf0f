package sched

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// treeWorld is randomWorld's fleet under a tree with guarantees above
// the leaves: orgs o0, o1 (each guaranteed part of every flavor) with
// leaves under them (some guaranteed part of their org's), and a leaf t9
// outside both.
func treeWorld(rng *rand.Rand) (*world, []string) {
	w := randomWorld(rng)
	f := w.in.Fleet
	var specs []tenancy.TenantSpec
	var leaves []string
	quota := func(g int) tenancy.QuotaSpec { return tenancy.QuotaSpec{Guaranteed: resource.GPUs(g), Weight: 1} }
	for o := range 2 {
		org := tenancy.TenantSpec{Name: fmt.Sprintf("o%d", o)}
		n := 1 + rng.IntN(3)
		kids := make([]tenancy.TenantSpec, n)
		for k := range kids {
			kids[k] = tenancy.TenantSpec{Name: fmt.Sprintf("t%d%d", o, k), Parent: org.Name}
			leaves = append(leaves, kids[k].Name)
		}
		for _, m := range []fleet.ModelID{"A100-80G", "T4"} {
			for _, r := range f.Regions {
				c := f.Capacity(m, r).WholeGPUs()
				g := rng.IntN(c/2 + 1)
				q := quota(g)
				q.Flavor, q.Region = m, r
				org.Quota = append(org.Quota, q)
				left := g
				for k := range kids {
					if left == 0 || rng.IntN(2) == 0 {
						continue
					}
					kg := rng.IntN(left + 1)
					left -= kg
					kq := quota(kg)
					kq.Flavor, kq.Region = m, r
					if rng.IntN(3) == 0 {
						kq.Limit = gpuPtr(kg + rng.IntN(c+1))
					}
					kids[k].Quota = append(kids[k].Quota, kq)
				}
			}
		}
		specs = append(specs, org)
		specs = append(specs, kids...)
	}
	out := tenancy.TenantSpec{Name: "t9"}
	for _, r := range f.Regions {
		q := quota(rng.IntN(f.Capacity("A100-80G", r).WholeGPUs()/4 + 1))
		q.Flavor, q.Region = "A100-80G", r
		out.Quota = append(out.Quota, q)
	}
	specs = append(specs, out)
	leaves = append(leaves, "t9")
	tree, err := tenancy.NewTree(specs)
	if err != nil {
		panic(err)
	}
	w.in.Tenants = tree
	w.in.Reservations, w.owner, w.res = nil, "", ""
	return w, leaves
}

// treeWorkloads is randomWorkloads spread over the leaves.
func treeWorkloads(rng *rand.Rand, w *world, leaves []string, n int, prefix string) []*workload.Workload {
	ws := randomWorkloads(rng, w, n, prefix, t0)
	for _, x := range ws {
		x.Tenant = leaves[rng.IntN(len(leaves))]
	}
	return ws
}

// refCover is the reference of tree.go's cover, computed afresh: each
// running workload's covering tenant (its own, an ancestor, or -1).
func refCover(in Input) map[workload.ID]int {
	tree := in.Tenants
	order := func(a, b *workload.Workload) int { // a tenant's own runs: priority first
		return cmp.Or(-cmp.Compare(a.Priority, b.Priority), -boolCmp(a.Running.Within, b.Running.Within),
			a.Running.StartedAt.Compare(b.Running.StartedAt), strings.Compare(string(a.Name), string(b.Name)))
	}
	above := func(a, b *workload.Workload) int { // an ancestor's: placed within first
		return cmp.Or(-boolCmp(a.Running.Within, b.Running.Within), order(a, b))
	}
	cover := map[workload.ID]int{}
	var runs []*workload.Workload
	for _, w := range in.Workloads {
		if w.Running != nil && !w.Running.OnReservation {
			runs = append(runs, w)
			cover[w.Name] = -1
		}
	}
	// groups: for tenant a and its entry e, the runs of a's subtree (own
	// level: a's own runs) that map to it.
	assign := func(a int, own bool) {
		for e, q := range tree.Tenants[a].Quotas {
			if q.Guaranteed == 0 && !own {
				continue
			}
			var used resource.MilliGPU
			var cands []*workload.Workload
			for _, w := range runs {
				t, _ := tree.Lookup(w.Tenant)
				if own != (t == a) || !tree.InSubtree(t, a) {
					continue
				}
				if _, we, ok := tree.Entry(a, w.Running.Flavor, w.Running.Region); !ok || we != e {
					continue
				}
				if cover[w.Name] >= 0 {
					used += w.TotalGPUs()
				} else {
					cands = append(cands, w)
				}
			}
			if own {
				slices.SortFunc(cands, order)
			} else {
				slices.SortFunc(cands, above)
			}
			var cum resource.MilliGPU
			for _, w := range cands {
				cum += w.TotalGPUs()
				if used+cum > q.Guaranteed {
					break
				}
				cover[w.Name] = a
			}
		}
	}
	for a := range tree.Tenants {
		assign(a, true)
	}
	byDepth := make([]int, len(tree.Tenants))
	for i := range byDepth {
		byDepth[i] = i
	}
	slices.SortStableFunc(byDepth, func(a, b int) int { return tree.Tenants[b].Depth - tree.Tenants[a].Depth })
	for _, a := range byDepth {
		if !tree.Tenants[a].Leaf {
			assign(a, false)
		}
	}
	return cover
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// TestTreeGuaranteeProperties: over random worlds with guarantees at
// every level, the core's usual properties hold, and (against refCover)
// no work a guarantee covers is preempted by a tenant outside the
// subtree that holds it; a claim within a guarantee at any level is not
// left pending while a node would fit it once the work it may reclaim
// (borrowing from its side of the tree) was gone.
func TestTreeGuaranteeProperties(t *testing.T) {
	n := 300
	if s := os.Getenv("ARBITER_PROPERTY_SEEDS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	if testing.Short() {
		n = 60
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x72ee))
		w, leaves := treeWorld(rng)
		in := w.in
		in.Workloads = treeWorkloads(rng, w, leaves, 10+rng.IntN(30), "a")
		first := Schedule(in)
		in.Workloads = Apply(in.Workloads, first, t0)
		in.Now = t0.Add(time.Hour)
		in.Workloads = append(in.Workloads, treeWorkloads(rng, w, leaves, 10+rng.IntN(30), "b")...)
		plan := Schedule(in)
		if err := Check(&in); err != nil {
			t.Fatalf("seed %d: inconsistent state: %v", seed, err)
		}
		for _, prop := range append(slices.Clip(coreProps), []property{
			{"tree-protected", propTreeProtected},
			{"tree-reclaim", propTreeReclaim},
		}...) {
			if err := prop.fn(in, plan); err != nil {
				t.Errorf("seed %d: %s: %v", seed, prop.name, err)
			}
		}
	}
}

func propTreeProtected(in Input, p Plan) error {
	cover := refCover(in)
	byName := map[workload.ID]*workload.Workload{}
	for _, w := range in.Workloads {
		byName[w.Name] = w
	}
	for _, x := range p.Preemptions {
		v, by := byName[x.Workload], byName[x.By]
		if by == nil || v.Tenant == by.Tenant {
			continue
		}
		c, ok := cover[v.Name]
		if !ok || c < 0 {
			continue
		}
		vt, _ := in.Tenants.Lookup(v.Tenant)
		bt, _ := in.Tenants.Lookup(by.Tenant)
		if c == vt || !in.Tenants.InSubtree(bt, c) {
			return fmt.Errorf("%s of %s, covered by %s's guarantee, preempted by %s of %s: %s",
				v.Name, v.Tenant, in.Tenants.Tenants[c].Name, by.Name, by.Tenant, x.Reason)
		}
	}
	return nil
}

func propTreeReclaim(in Input, p Plan) error {
	cover := refCover(in)
	after := Apply(in.Workloads, p, in.Now)
	usage := usageAfter(in, p)
	pending := map[workload.ID]bool{}
	for _, x := range p.Pending {
		pending[x.Workload] = true
	}
	down := map[fleet.NodeID]bool{}
	for _, d := range in.Down {
		down[d] = true
	}
	tree := in.Tenants
	demand := map[[2]int]resource.MilliGPU{} // pending GPUs per guaranteed entry, each candidate counted
	for _, w := range in.Workloads {
		if w.Running != nil {
			continue
		}
		t, _ := tree.Lookup(w.Tenant)
		for _, r := range w.Regions {
			for _, m := range w.Flavors {
				if q, j, ok := tree.Entry(t, m, r); ok && q.Guaranteed > 0 {
					demand[[2]int{t, j}] += w.TotalGPUs()
				}
			}
		}
	}
	for _, w := range in.Workloads {
		if !pending[w.Name] || w.Replicas != 1 || w.GPUs < resource.PerGPU {
			continue
		}
		t, _ := tree.Lookup(w.Tenant)
		m, r := w.Flavors[0], w.Regions[0]
		// The claim's cover: the lowest level whose guarantee has room.
		// Members off the claim's path keep their idle guarantee for their
		// own pending work (heldFor).
		wc := -1
		for i, a := range tree.Path(t) {
			q, e, ok := tree.Entry(a, m, r)
			if !ok || q.Guaranteed == 0 {
				continue
			}
			var held resource.MilliGPU
			for d := range tree.Tenants {
				if i == 0 || d == a || !tree.InSubtree(d, a) || tree.InSubtree(t, d) {
					continue
				}
				for j, dq := range tree.Tenants[d].Quotas {
					if want := demand[[2]int{d, j}]; want > 0 && dq.Key == (tenancy.Key{Model: m, Region: r}) && dq.Guaranteed > 0 {
						held += min(want, max(dq.Guaranteed-usage[[2]int{d, j}], 0))
					}
				}
			}
			if usage[[2]int{a, e}]+w.TotalGPUs()+held <= q.Guaranteed {
				wc = a
				break
			}
		}
		if wc < 0 {
			continue
		}
		limited := false
		for _, ref := range tree.Charged(t, tenancy.Key{Model: m, Region: r}) {
			if usage[[2]int{ref.Tenant, ref.Entry}]+w.TotalGPUs() > tree.Tenants[ref.Tenant].Quotas[ref.Entry].Limit {
				limited = true
			}
		}
		if limited {
			continue
		}
		freeable := map[fleet.NodeID]int{}
		for _, n := range in.Fleet.Nodes {
			if n.Model == m && n.Region == r && !down[n.ID] && (len(w.Pools) == 0 || slices.Contains(w.Pools, n.Labels[PoolLabel])) {
				freeable[n.ID] = n.GPUs
			}
		}
		for _, x := range after {
			if x.Running == nil {
				continue
			}
			xt, _ := tree.Lookup(x.Tenant)
			c, known := cover[x.Name]
			reclaimable := known && x.Tenant != w.Tenant && x.Running.StartedAt.Before(in.Now) && c != xt &&
				(c < 0 || tree.InSubtree(t, c)) && !tree.InSubtree(xt, wc)
			for _, rep := range x.Running.Replicas {
				if _, ok := freeable[rep.Node]; ok && !reclaimable {
					freeable[rep.Node] -= len(rep.GPUs)
				}
			}
		}
		for id, n := range freeable {
			if n >= w.GPUs.WholeGPUs() {
				return fmt.Errorf("%s (tenant %s, within %s's guarantee) pending: %s; node %s would fit it after reclaiming",
					w.Name, w.Tenant, tree.Tenants[wc].Name, reasonOf(p, w.Name), id)
			}
		}
	}
	return nil
}
