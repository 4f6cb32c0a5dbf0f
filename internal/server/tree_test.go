package server

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
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
	if u := got["internal"]; u.CurrentValue != 8 || u.Guaranteed != 16 || u.Borrowed != 0 || u.Idle != 8 {
		t.Errorf("internal: %+v, want 8 used of 16 guaranteed, 8 idle", u)
	}
	if u := got["training"]; u.Parent != "internal" || u.Idle != 8 {
		t.Errorf("training: %+v, want parent internal, 8 idle", u)
	}
	if u := got["batch"]; u.CurrentValue != 16 || u.Borrowed != 8 || u.Idle != 0 {
		t.Errorf("batch: %+v, want 16 used, 8 borrowed", u)
	}
	// research sees only its own entries (it has none); batch none of
	// internal's.
	if mine, err := batch.Usage(h.ctx, "batch", ""); err != nil || len(mine) != 1 || mine[0].Tenant != "batch" {
		t.Errorf("batch's own usage: %+v, %v", mine, err)
	}
}
