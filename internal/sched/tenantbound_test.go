package sched

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// fullOrder is the pending workloads in the order an unbounded cycle
// decides them (the sort of every pending workload, which the bound's
// selection must agree with), with each one's shape.
func fullOrder(in Input) ([]*workload.Workload, []int32) {
	in.Options.TenantBound = 0
	s, _ := newSnapshot(&in)
	if hl := in.Options.FairShare.HalfLife; hl > 0 {
		s.decayed, _ = s.tree.Decay(in.History, s.usage, in.Now, hl)
	}
	s.evictUnusable(&Plan{}) // as scheduleOnce: evictions change the shares
	pending, _ := s.order()
	return slices.Clone(pending), slices.Clone(s.shapes.pending)
}

// propTenantBound: with Options.TenantBound = k, a cycle decides each
// tenant's pending work in the unbounded order up to the first workload of
// a shape past its first k, and plans exactly what the input without the
// rest would plan; the rest is pending with ReasonDeferred, after the
// decided work. The naive reference is the full sort, walked in order.
func propTenantBound(in Input, _ Plan) error {
	order, shapeOf := fullOrder(in)
	for k := 1; k <= 3; k++ {
		seen := map[string]map[int32]bool{}
		stopped := map[string]bool{}
		deferred := map[workload.ID]bool{}
		waiting := map[string]int{}
		for i, w := range order {
			if seen[w.Tenant] == nil {
				seen[w.Tenant] = map[int32]bool{}
			}
			if c := shapeOf[i]; !seen[w.Tenant][c] && len(seen[w.Tenant]) == k {
				stopped[w.Tenant] = true
			} else {
				seen[w.Tenant][c] = true
			}
			if stopped[w.Tenant] {
				deferred[w.Name] = true
				waiting[w.Tenant]++
			}
		}
		bounded := in
		bounded.Options.TenantBound = k
		got := Schedule(bounded)
		var rest []Pending
		decided := got.Pending[:0:0]
		for _, p := range got.Pending {
			switch {
			case p.Code == ReasonDeferred:
				if !deferred[p.Workload] {
					return fmt.Errorf("bound %d: %s deferred, but it comes before its tenant's shape %d", k, p.Workload, k)
				}
				b := p.Blockers[0]
				if want := fmt.Sprintf("%d of its workloads wait", waiting[b.Tenant]); int(b.Waiting) != waiting[b.Tenant] || int(b.Bound) != k || !strings.Contains(p.Reason, want) {
					return fmt.Errorf("bound %d: %s: blocker %+v, reason %q (want %s, bound %d)", k, p.Workload, b, p.Reason, want, k)
				}
				rest = append(rest, p)
			case len(rest) > 0:
				return fmt.Errorf("bound %d: %s decided after deferred work in Plan.Pending", k, p.Workload)
			default:
				decided = append(decided, p)
			}
		}
		if len(rest) != len(deferred) {
			return fmt.Errorf("bound %d: %d deferred, want %d", k, len(rest), len(deferred))
		}
		if len(rest) > 0 && got.Classes != nil {
			return fmt.Errorf("bound %d: a plan that deferred work lists classes", k)
		}
		cut := in
		// Pools are split while any workload names pools, deferred or not.
		cut.Options.splitPools = poolConstrained(&in)
		cut.Workloads = slices.DeleteFunc(slices.Clone(in.Workloads), func(w *workload.Workload) bool { return deferred[w.Name] })
		want := Schedule(cut)
		got.Pending = decided
		if len(rest) > 0 {
			want.Classes = nil // the cut's state may be settled; the bounded one is not
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if !bytes.Equal(gj, wj) {
			return fmt.Errorf("bound %d: plan differs from the cut input's:\nbounded: %s\ncut:     %s", k, gj, wj)
		}
	}
	return nil
}

// One tenant's queue of thousands of shapes does not change what another
// tenant's workloads get: with the bound, the quiet tenant's work is
// placed as if the noisy tenant had queued only its first shapes, and the
// noisy tenant's later work is told why it waits. Alike work is never
// deferred: the quiet tenant's 500 alike workloads are one shape.
func TestTenantBoundNoisyTenant(t *testing.T) {
	spec := fleet.Spec{Regions: []fleet.RegionSpec{{Name: "eastus", Zones: []fleet.ZoneSpec{{Name: "1", Blocks: []fleet.BlockSpec{{Name: "b0",
		Nodes: []fleet.GroupSpec{{SKU: "Standard_ND96amsr_A100_v4", Count: 4}}}}}}}}}
	f, err := fleet.Build(spec, fleet.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := tenancy.NewTree([]tenancy.TenantSpec{{Name: "root"}, {Name: "noisy", Parent: "root"}, {Name: "quiet", Parent: "root"}})
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Now: t0, Fleet: f, Tenants: tree}
	spec1 := func(name, tenant string, gpus int) workload.Spec {
		return workload.Spec{Name: workload.ID(name), Tenant: tenant, GPUs: resource.GPUs(gpus), Replicas: 1, Flavors: []fleet.ModelID{"A100-80G"}, Regions: []string{"eastus"}, Priority: workload.PriorityNormal}
	}
	var noisy, quiet []*workload.Workload
	for i := range 5000 {
		w := &workload.Workload{Spec: spec1(fmt.Sprintf("noisy-%05d", i), "noisy", 1+i%4), SubmittedAt: t0}
		w.CPU = resource.MilliCPU(1000 + i) // every one a shape of its own
		noisy = append(noisy, w)
	}
	for i := range 500 {
		quiet = append(quiet, &workload.Workload{Spec: spec1(fmt.Sprintf("quiet-%03d", i), "quiet", 1), SubmittedAt: t0.Add(time.Second)})
	}
	in.Workloads = append(slices.Clone(noisy), quiet...)
	in.Options.TenantBound = 10
	got := Schedule(in)
	cut := in
	cut.Workloads = append(slices.Clone(noisy[:10]), quiet...)
	cut.Options.TenantBound = 0
	want := Schedule(cut)
	if len(want.Placements) == 0 || !slices.Equal(placedNames(got), placedNames(want)) {
		t.Fatalf("placed %v, want %v (the noisy tenant's first 10 and the quiet one's)", placedNames(got), placedNames(want))
	}
	deferred := map[string]int{}
	for _, p := range got.Pending {
		if p.Code == ReasonDeferred {
			deferred[strings.Split(string(p.Workload), "-")[0]]++
		}
	}
	if deferred["noisy"] != 4990 || deferred["quiet"] != 0 {
		t.Fatalf("deferred %v, want 4990 of the noisy tenant's and none of the quiet one's", deferred)
	}
	if err := propTenantBound(in, got); err != nil {
		t.Fatal(err)
	}
}

func placedNames(p Plan) []workload.ID {
	var out []workload.ID
	for _, pl := range p.Placements {
		out = append(out, pl.Workload)
	}
	slices.Sort(out)
	return out
}
