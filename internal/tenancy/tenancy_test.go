package tenancy

import (
	"errors"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

func TestTree(t *testing.T) {
	lim := resource.GPUs(8)
	tree, err := NewTree([]TenantSpec{
		{Name: "root"},
		{Name: "a", Parent: "root", Quota: []QuotaSpec{{Flavor: "A100-80G", Region: "eastus", Guaranteed: resource.GPUs(4), Limit: &lim}, {Flavor: "A100-80G"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tree.Lookup("a")
	if got := tree.Path(a); len(got) != 2 || !tree.InSubtree(a, 0) || tree.Tenants[0].Leaf {
		t.Errorf("path = %v", got)
	}
	if q, _, ok := tree.Entry(a, "A100-80G", "eastus"); !ok || q.Guaranteed != resource.GPUs(4) || q.Lendable != q.Guaranteed {
		t.Errorf("eastus entry = %+v", q)
	}
	if q, _, ok := tree.Entry(a, "A100-80G", "westus2"); !ok || q.Key.Region != "" || q.Limit != Unlimited {
		t.Errorf("fallback entry = %+v", q)
	}
}

func TestTreeErrors(t *testing.T) {
	low := resource.GPUs(1)
	_, err := NewTree([]TenantSpec{
		{Name: "a", Parent: "b"}, {Name: "b", Parent: "a"}, {Name: "c", Parent: "zz"},
		{Name: "d", Quota: []QuotaSpec{{Flavor: "T4", Guaranteed: resource.GPUs(2), Limit: &low}}},
	})
	for _, want := range []string{"its own ancestor", `unknown parent tenant "zz"`, "limit 1 is below guaranteed 2"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestBindAllOrNothing(t *testing.T) {
	f, err := fleet.Build(fleet.Spec{Regions: []fleet.RegionSpec{{Name: "eastus", Zones: []fleet.ZoneSpec{{Name: "1", Blocks: []fleet.BlockSpec{
		{Name: "h", Nodes: []fleet.GroupSpec{{SKU: "Standard_ND96isr_H100_v5", Count: 3}}}}}}}}}, fleet.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	r := &Reservation{Name: "r", Region: "eastus", SKU: "Standard_ND96isr_H100_v5", Count: 2}
	use := func(n *fleet.Node) NodeUse {
		return NodeUse{Busy: n.ID == "h-n0000", Blocking: n.ID == "h-n0002"}
	}
	ids, err := Bind(r, f, use)
	if err != nil || len(ids) != 2 || ids[0] != "h-n0001" || ids[1] != "h-n0000" {
		t.Fatalf("Bind = %v, %v (want idle node first, then evictable)", ids, err)
	}
	r.Count = 3
	if _, err := Bind(r, f, use); !errors.Is(err, ErrInsufficientCapacity) {
		t.Fatalf("Bind of 3 = %v, want ErrInsufficientCapacity", err)
	}
}

func TestAllowedPrioritiesNarrowDownThePath(t *testing.T) {
	all := []workload.Priority{workload.PriorityCritical, workload.PriorityHigh, workload.PriorityNormal, workload.PriorityLow, workload.PrioritySpot}
	tree, err := NewTree([]TenantSpec{
		{Name: "kid", Parent: "org", AllowedPriorities: all}, // asks for more than its parent has
		{Name: "org", AllowedPriorities: []workload.Priority{workload.PriorityCritical, workload.PriorityNormal}},
		{Name: "plain"},
		{Name: "vip", AllowedPriorities: all},
		{Name: "vip-kid", Parent: "plain", AllowedPriorities: all}, // plain has no list: no cap
		{Name: "plain-kid", Parent: "org"},                         // the default, capped by org
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tenant string
		want   workload.PrioritySet
	}{
		{"org", workload.SetOf(workload.PriorityCritical, workload.PriorityNormal)},
		{"kid", workload.SetOf(workload.PriorityCritical, workload.PriorityNormal)},
		{"plain", workload.DefaultAllowed},
		{"vip", workload.AllPriorities},
		{"vip-kid", workload.AllPriorities},
		{"plain-kid", workload.SetOf(workload.PriorityNormal)},
	}
	for _, tc := range tests {
		i, _ := tree.Lookup(tc.tenant)
		if got := tree.Tenants[i].Allowed; got != tc.want {
			t.Errorf("%s: allowed %v, want %v", tc.tenant, got, tc.want)
		}
	}
	plain, _ := tree.Lookup("plain")
	err = tree.MayUse(plain, workload.PriorityCritical)
	if !errors.Is(err, ErrPriorityNotAllowed) || !strings.Contains(err.Error(), "allowed: high, normal, low, spot") {
		t.Errorf("plain submitting critical: %v", err)
	}
	if err := tree.MayUse(plain, workload.PriorityHigh); err != nil {
		t.Errorf("plain submitting high: %v", err)
	}
	if _, err := NewTree([]TenantSpec{{Name: "x", AllowedPriorities: []workload.Priority{}}}); err == nil || !strings.Contains(err.Error(), "tenants[0].allowed_priorities") {
		t.Errorf("empty list: %v", err)
	}
}
