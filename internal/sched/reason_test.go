package sched

import (
	"reflect"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestPendingBlockersAreValues (issue 13): a pending workload's reasons are
// structured values (resource, requested, used, limit, which tenant, which
// scope), one per flavor and region tried; the text is their rendering,
// identical with and without TerseReasons (rendered later).
func TestPendingBlockersAreValues(t *testing.T) {
	f, err := fleet.Build(fleet.Spec{Regions: []fleet.RegionSpec{{Name: "eastus", Zones: []fleet.ZoneSpec{{Name: "1", Blocks: []fleet.BlockSpec{{Name: "b",
		Nodes: []fleet.GroupSpec{{SKU: "Standard_ND96amsr_A100_v4", Count: 2}}}}}}}}}, fleet.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	gpus := func(n int) *resource.MilliGPU { m := resource.GPUs(n); return &m }
	// The case: an eastus limit of 8, an all-regions limit of 4,
	// 4 GPUs running.
	tree, err := tenancy.NewTree([]tenancy.TenantSpec{{Name: "ai", Quota: []tenancy.QuotaSpec{
		{Flavor: "A100-80G", Region: "eastus", Limit: gpus(8)},
		{Flavor: "A100-80G", Limit: gpus(4)},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(name string, n int, flavors ...fleet.ModelID) workload.Spec {
		return workload.Spec{Name: workload.ID(name), Tenant: "ai", GPUs: resource.GPUs(n), Replicas: 1, Flavors: flavors, Regions: []string{"eastus"}}
	}
	in := Input{Fleet: f, Tenants: tree, Now: t0, Workloads: []*workload.Workload{
		{Spec: spec("run", 4, "A100-80G"), SubmittedAt: t0, Running: &workload.Assignment{Flavor: "A100-80G", Region: "eastus", StartedAt: t0,
			Replicas: []workload.Replica{{Node: f.Nodes[0].ID, GPUs: []int{0, 1, 2, 3}, Milli: 1000}}}},
		{Spec: spec("more", 2, "H100-80G", "A100-80G"), SubmittedAt: t0},
		{Spec: workload.Spec{Name: "ghost", Tenant: "nobody", GPUs: resource.GPUs(1), Replicas: 1}, SubmittedAt: t0},
	}}
	p := Schedule(in)
	byName := map[workload.ID]Pending{}
	for _, x := range p.Pending {
		byName[x.Workload] = x
	}
	more := byName["more"]
	want := []Blocker{
		{Code: ReasonNoFlavor, Flavor: "H100-80G", Region: "eastus"},
		{Code: ReasonQuotaLimit, Flavor: "A100-80G", Region: "eastus", Tenant: "ai", AllRegions: true,
			Requested: resource.GPUs(2), Used: resource.GPUs(4), Limit: resource.GPUs(4)},
	}
	if !reflect.DeepEqual(more.Blockers, want) || more.Code != ReasonNoFlavor {
		t.Fatalf("blockers %+v, want %+v", more.Blockers, want)
	}
	if more.Reason != "no H100-80G in eastus" || len(more.Details) != 2 ||
		more.Details[1] != "A100-80G/eastus: tenant ai at limit 4/4 A100-80G in all regions (asks 2)" {
		t.Errorf("rendered %q %q", more.Reason, more.Details)
	}
	if g := byName["ghost"]; g.Code != ReasonInvalid || len(g.Blockers) != 1 || g.Blockers[0].Problem != ProblemUnknownTenant || g.Reason != `unknown tenant "nobody"` {
		t.Errorf("ghost %+v", g)
	}
	// Terse: the same values, no text; rendered later, the same text.
	in.Options.TerseReasons = true
	q := Schedule(in)
	for i, x := range q.Pending {
		if x.Reason != "" || x.Details != nil || !reflect.DeepEqual(x.Blockers, p.Pending[i].Blockers) {
			t.Fatalf("terse %+v", x)
		}
		x.Render()
		if x.Reason != p.Pending[i].Reason || !reflect.DeepEqual(x.Details, p.Pending[i].Details) {
			t.Errorf("rendered later: %q %q, want %q %q", x.Reason, x.Details, p.Pending[i].Reason, p.Pending[i].Details)
		}
	}
}

// TestBlockerText: every code renders; a reservation prefixes its state.
func TestBlockerText(t *testing.T) {
	for _, c := range []struct {
		b    Blocker
		want string
	}{
		{Blocker{Code: ReasonInvalid, Problem: ProblemNoGPUs}, "asks for no GPUs"},
		{Blocker{Code: ReasonInvalid, Problem: ProblemNoCandidate}, "no acceptable flavor or region"},
		{Blocker{Code: ReasonSpotPrice, Flavor: "H100-80G", Region: "eastus", Price: 3.69, MaxPrice: 0.01}, "spot price of H100-80G in eastus is $3.69/GPU-h, above max price $0.01"},
		{Blocker{Code: ReasonLendingLimit, Flavor: "A100-80G", Region: "eastus", Tenant: "b", Requested: resource.GPUs(8), Limit: resource.GPUs(2), Free: resource.GPUs(10), Protected: resource.GPUs(8)},
			"tenant b would borrow 8 A100-80G in eastus but only 2 is lendable (10 free, 8 guaranteed to others)"},
		{Blocker{Code: ReasonNoBlock, Flavor: "A100-80G", Region: "eastus", Requested: resource.GPUs(64), Replicas: 8, PerReplica: resource.GPUs(8), Preempted: true, Pools: []string{"p"}},
			"no block in eastus pools [p] with 64 free A100-80G (8 × 8), and preemption cannot free enough"},
		{Blocker{Code: ReasonNoCapacity, Flavor: "A100-80G", Region: "eastus", Replicas: 1, PerReplica: resource.GPUs(8), Free: resource.GPUs(3),
			Reservation: &ReservationUse{Name: "r1", Used: resource.GPUs(8), Capacity: resource.GPUs(8), Down: 1, Nodes: 2}},
			"reservation r1 full 8/8 (1 of its 2 nodes down); no room for 1 × 8 A100-80G in eastus (3 free in reach)"},
	} {
		if got := c.b.String(); got != c.want {
			t.Errorf("%s: %q, want %q", c.b.Code, got, c.want)
		}
	}
	if s := (Blocker{Code: "Future"}).String(); !strings.Contains(s, "Future") {
		t.Errorf("unknown code renders %q", s)
	}
}
