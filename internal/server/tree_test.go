package server

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// treeConfig: org internal is guaranteed 16 A100s for its subtree;
// research has no guarantee of its own; batch, outside, is guaranteed 8.
const treeConfig = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 3}]
tenants:
  - name: internal
    quota: [{flavor: A100-80G, region: eastus, guaranteed: 16}]
  - name: training
    parent: internal
    quota: [{flavor: A100-80G, region: eastus, guaranteed: 8}]
  - name: research
    parent: internal
  - name: batch
    quota: [{flavor: A100-80G, region: eastus, guaranteed: 8}]
`

// TestParentGuaranteeReclaim: on a live server, research (no guarantee of
// its own) reclaims from the outsider batch what its parent guarantees
// its subtree; the events say so; `usage` shows, per level, guaranteed,
// borrowed and idle, with the parent.
func TestParentGuaranteeReclaim(t *testing.T) {
	h := newHarness(t, treeConfig, Options{RateLimit: -1})
	batch, research := h.tenant("batch"), h.tenant("research")
	spec := func(name string) api.WorkloadSpec {
		return api.WorkloadSpec{Name: name, GPUs: 8000, Replicas: 1, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}
	}
	for _, n := range []string{"b-1", "b-2", "b-3"} {
		if _, err := batch.Submit(h.ctx, "batch", spec(n)); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx)
	// batch borrows the whole fleet: internal's 16 idle guaranteed GPUs
	// are all lent (no GPU is free).
	if u := entryOf(t, h, "internal"); u.Idle != 16 || u.Lent != 16 {
		t.Errorf("internal while batch runs the fleet: %+v, want 16 idle, 16 lent", u)
	}
	if _, err := research.Submit(h.ctx, "research", spec("r-1")); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	r1, err := research.Workload(h.ctx, "research", "r-1")
	if err != nil || r1.Running == nil {
		t.Fatalf("r-1: %+v, %v; want it running on what internal guarantees its subtree", r1, err)
	}
	evs, err := h.admin.Events(h.ctx, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs.Items {
		if strings.Contains(e.Message, "reclaims the guarantee of A100-80G in eastus that internal holds for its subtree, from borrower batch") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no event says research reclaimed internal's guarantee from batch: %+v", evs.Items)
	}
	us, err := h.admin.Usage(h.ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.Usage{}
	for _, u := range us {
		got[u.Tenant] = u
	}
	if u := got["internal"]; u.CurrentValue != 8 || u.Guaranteed != 16 || u.Borrowed != 0 || u.Idle != 8 || u.Lent != 8 {
		t.Errorf("internal: %+v, want 8 used of 16 guaranteed, 8 idle, 8 lent (batch borrows them)", u)
	}
	if u := got["training"]; u.Parent != "internal" || u.Idle != 8 || u.Lent != 8 {
		t.Errorf("training: %+v, want parent internal, 8 idle, 8 lent (to its sibling)", u)
	}
	if u := got["batch"]; u.CurrentValue != 16 || u.Borrowed != 8 || u.Idle != 0 || u.Lent != 0 {
		t.Errorf("batch: %+v, want 16 used, 8 borrowed, nothing lent", u)
	}
	// One of batch's jobs ends: 8 GPUs are free, so 8 of internal's 8
	// idle would be served by them and nothing is lent any more.
	if _, err := batch.Cancel(h.ctx, "batch", "b-1"); err != nil {
		t.Fatal(err)
	}
	if u := entryOf(t, h, "internal"); u.Idle != 8 || u.Lent != 0 {
		t.Errorf("internal with 8 GPUs free: %+v, want 8 idle, 0 lent", u)
	}
	// research sees only its own entries (it has none); batch none of
	// internal's.
	if mine, err := batch.Usage(h.ctx, "batch", ""); err != nil || len(mine) != 1 || mine[0].Tenant != "batch" {
		t.Errorf("batch's own usage: %+v, %v", mine, err)
	}
}

// entryOf is tenant's A100-80G usage entry, as the admin sees it.
func entryOf(t *testing.T, h *harness, tenant string) api.Usage {
	t.Helper()
	us, err := h.admin.Usage(h.ctx, tenant, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if u.Flavor == "A100-80G" {
			return u
		}
	}
	t.Fatalf("usage of %s has no A100-80G entry: %+v", tenant, us)
	return api.Usage{}
}

// TestLentFreeScope: the free GPUs that decide what is lent are those
// open to the tenant: another subtree's partition and an active
// reservation's machines are not.
func TestLentFreeScope(t *testing.T) {
	h := newHarness(t, partitionConfig, Options{RateLimit: -1})
	key := tenancy.Key{Model: "A100-80G", Region: "eastus"}
	free := func() (fab, con float64) {
		wd := mustWorld(t, h)
		sc := newScope(wd, h.s.now())
		f, _ := wd.Tree.Lookup("fabrikam")
		c, _ := wd.Tree.Lookup("contoso")
		return gpus(sc.free(f, key)), gpus(sc.free(c, key))
	}
	if fab, con := free(); fab != 16 || con != 32 {
		t.Fatalf("free A100s in eastus: fabrikam %v, contoso %v; want 16 (contoso's partition is not open to it) and 32", fab, con)
	}
	req := api.ReservationRequest{Name: "r1", Region: "eastus", SKU: "Standard_ND96amsr_A100_v4", Capacity: 1}
	if _, err := h.tenant("fabrikam").CreateReservation(h.ctx, "fabrikam", req); err != nil {
		t.Fatal(err)
	}
	if fab, con := free(); fab != 8 || con != 24 {
		t.Fatalf("with one machine reserved: fabrikam %v, contoso %v; want 8 and 24", fab, con)
	}
	// fabrikam's 8 idle guaranteed GPUs: the 8 free ones would serve them.
	if u := entryOf(t, h, "fabrikam"); u.Idle != 8 || u.Lent != 0 {
		t.Errorf("fabrikam: %+v, want 8 idle, 0 lent", u)
	}
}
