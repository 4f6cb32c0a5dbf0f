package server

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// The policy actions the server applies (actions.go). The mission's
// latency example, with pushed metrics, is in metricpush_test.go.

// TestPolicyDrain: a drain action in force takes a region's machines out
// of service — the work there is evicted and waits — and they return when
// the policy goes.
func TestPolicyDrain(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c := h.tenant("contoso")
	if _, err := c.Submit(h.ctx, "contoso", spec("west", 8, 1, "westus2")); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	state := func() string {
		w, err := c.Workload(h.ctx, "contoso", "west")
		if err != nil {
			t.Fatal(err)
		}
		return w.State
	}
	if s := state(); s != "Running" {
		t.Fatalf("west is %s, want Running", s)
	}
	rules := `policies:
  - name: evacuate_west
    when: {metric: utilization, of: cluster, above: 1%}
    then:
      - {type: drain, target: region:westus2}
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "evacuate", Source: rules}); err != nil {
		t.Fatal(err)
	}
	h.s.TickPolicies(h.ctx)
	h.s.Cycle(h.ctx)
	if s := state(); s != "Pending" {
		t.Fatalf("west is %s while westus2 is drained, want Pending", s)
	}
	h.s.Cycle(h.ctx)
	if s := state(); s != "Pending" {
		t.Fatalf("west is %s, placed again on a drained region", s)
	}
	if err := h.admin.DeletePolicy(h.ctx, "evacuate"); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if s := state(); s != "Running" {
		t.Fatalf("west is %s after the policy went, want Running", s)
	}
}

// TestPolicySpotPrice: a set_spot_price action in force keeps spot work
// whose max price is below it off that region, and lets work that pays
// more through; the price goes with the policy.
func TestPolicySpotPrice(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c := h.tenant("fabrikam")
	if _, err := c.Submit(h.ctx, "fabrikam", spec("steady", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	rules := `policies:
  - name: surge
    when: {metric: utilization, of: cluster, above: 1%}
    then:
      - {type: set_spot_price, target: region:eastus, price: $5/h}
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "spot", Source: rules}); err != nil {
		t.Fatal(err)
	}
	h.s.TickPolicies(h.ctx)
	for _, x := range []struct {
		name string
		max  float64
	}{{"cheap", 2}, {"rich", 6}} {
		s := spec(x.name, 1, 1)
		s.Priority, s.MaxPrice = "spot", x.max
		if _, err := c.Submit(h.ctx, "fabrikam", s); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx)
	why := func(n string) api.Why {
		w, err := c.Why(h.ctx, "fabrikam", n)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	if w := why("cheap"); w.State != "Pending" || w.Code != "SpotPrice" {
		t.Errorf("cheap spot work under a $5 price: %+v, want Pending with SpotPrice", w)
	}
	if w := why("rich"); w.State != "Running" {
		t.Errorf("spot work paying $6: %+v, want Running", w)
	}
	if err := h.admin.DeletePolicy(h.ctx, "spot"); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if w := why("cheap"); w.State != "Running" {
		t.Errorf("cheap spot work once the price went: %+v, want Running", w)
	}
}

// TestPolicyMigrate: a migrate action to a region, while in force, moves
// the matched workloads that accept the region there — the ones running
// elsewhere are evicted and placed again in it — and leaves alone those
// whose own regions exclude it.
func TestPolicyMigrate(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c := h.tenant("contoso")
	if _, err := c.Submit(h.ctx, "contoso", spec("mover", 8, 1, "eastus", "westus2")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(h.ctx, "contoso", spec("stay", 8, 1, "eastus")); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	where := func(name string) string {
		t.Helper()
		w, err := c.Workload(h.ctx, "contoso", name)
		if err != nil {
			t.Fatal(err)
		}
		if w.Running == nil {
			return w.State
		}
		return w.Running.Region
	}
	if a, b := where("mover"), where("stay"); a != "eastus" || b != "eastus" {
		t.Fatalf("mover in %s, stay in %s; want both in eastus", a, b)
	}
	rules := `policies:
  - name: make_room
    when: {metric: utilization, of: cluster, above: 1%}
    then:
      - {type: migrate, target: tenant:contoso, destination: region:westus2}
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "room", Source: rules}); err != nil {
		t.Fatal(err)
	}
	h.s.TickPolicies(h.ctx)
	h.s.Cycle(h.ctx) // evicts mover from eastus
	h.s.Cycle(h.ctx) // places it in westus2
	if a, b := where("mover"), where("stay"); a != "westus2" || b != "eastus" {
		t.Fatalf("with the policy: mover in %s, stay in %s; want westus2 and eastus", a, b)
	}
	evs, err := c.Events(h.ctx, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs.Items {
		found = found || (e.Type == "WorkloadPreempted" && strings.Contains(e.Message, "no longer accepts"))
	}
	if !found {
		t.Errorf("no preemption event says why mover moved: %+v", evs.Items)
	}
}

// TestPolicyMigrateToPool is the architecture's example: while the
// cluster is busy, batch work moves to the low-priority pool (nodes
// labelled pool: low_priority_pool). Batch work running elsewhere is
// evicted and placed again there; a workload that names another pool
// stays; other work is not touched.
func TestPolicyMigrateToPool(t *testing.T) {
	const cfg = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: main
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 2, labels: {pool: main}}]
            - name: low
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 2, labels: {pool: low_priority_pool}}]
tenants:
  - name: acme
`
	h := newHarness(t, cfg, Options{RateLimit: -1})
	c := h.tenant("acme")
	batch := func(name string, pools ...string) api.WorkloadSpec {
		s := spec(name, 8, 1, "eastus")
		s.Labels, s.Pools = map[string]string{"class": "batch_jobs"}, pools
		return s
	}
	for _, s := range []api.WorkloadSpec{batch("b1"), batch("pinned", "main"), spec("train", 8, 1, "eastus")} {
		if _, err := c.Submit(h.ctx, "acme", s); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx)
	pool := func(name string) string {
		t.Helper()
		w, err := c.Workload(h.ctx, "acme", name)
		if err != nil {
			t.Fatal(err)
		}
		if w.Running == nil {
			return w.State
		}
		return strings.SplitN(w.Running.Replicas[0].Node, "-", 2)[0] // block name = pool here
	}
	if b1, pinned := pool("b1"), pool("pinned"); b1 != "main" || pinned != "main" {
		t.Fatalf("b1 runs in %s, pinned in %s; want both in main (filled first)", b1, pinned)
	}
	rules := `scheduling_policies:
  - name: ai_training_priority
    conditions:
      - resource_type: gpu_cluster
        utilization_threshold: 50%
    actions:
      - type: migrate
        target: batch_jobs
        destination: low_priority_pool
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "ops", Source: rules}); err != nil {
		t.Fatal(err)
	}
	h.s.TickPolicies(h.ctx)
	h.s.Cycle(h.ctx)
	h.s.Cycle(h.ctx)
	if got := pool("b1"); got != "low" {
		t.Errorf("b1 runs in %s, want the low-priority pool", got)
	}
	if got := pool("pinned"); got != "main" {
		t.Errorf("pinned runs in %s; it names pool main and must stay", got)
	}
	if got := pool("train"); got == "Pending" {
		t.Errorf("train is pending; the policy targets batch_jobs only")
	}
}

// TestPolicyClassCap is the architecture's other half of
// ai_training_priority: "scale_down developer_instances to 30%" caps a
// class of work, not a tenant. While it is in force the class's
// preemptible work beyond the cap is evicted, newest first, its pending
// work waits with a reason, other work is untouched; when the policy goes,
// the waiting work runs.
func TestPolicyClassCap(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1})
	c := h.tenant("fabrikam")
	dev := func(name string) api.WorkloadSpec {
		s := spec(name, 4, 1, "eastus")
		s.Labels, s.Preemptible = map[string]string{"class": "developer_instances"}, true
		return s
	}
	// Four 4-GPU developer instances (16 GPUs), started a minute apart,
	// and one 8-GPU job of another class.
	for _, n := range []string{"dev-0", "dev-1", "dev-2", "dev-3"} {
		if _, err := c.Submit(h.ctx, "fabrikam", dev(n)); err != nil {
			t.Fatal(err)
		}
		h.s.Cycle(h.ctx)
		tc.Advance(time.Minute)
	}
	if _, err := c.Submit(h.ctx, "fabrikam", spec("other", 8, 1, "eastus")); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	state := func(name string) (string, string) {
		t.Helper()
		w, err := c.Why(h.ctx, "fabrikam", name)
		if err != nil {
			t.Fatal(err)
		}
		return w.State, w.Reason
	}
	rules := `scheduling_policies:
  - name: ai_training_priority
    conditions:
      - resource_type: gpu_cluster
        utilization_threshold: 10%
    actions:
      - type: scale_down
        target: developer_instances
        min_capacity: 50%
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "ops", Source: rules}); err != nil {
		t.Fatal(err)
	}
	h.s.TickPolicies(h.ctx)
	h.s.Cycle(h.ctx)
	// 50% of 16 GPUs: the two newest go.
	for n, want := range map[string]string{"dev-0": "Running", "dev-1": "Running", "dev-2": "Pending", "dev-3": "Pending", "other": "Running"} {
		if got, why := state(n); got != want {
			t.Errorf("%s is %s (%s), want %s", n, got, why, want)
		}
	}
	if _, err := c.Submit(h.ctx, "fabrikam", dev("dev-4")); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if got, why := state("dev-4"); got != "Pending" || !strings.Contains(why, "capped at 8 GPUs by policy ops") {
		t.Errorf("dev-4 is %s (%q), want pending, held by the cap", got, why)
	}
	if err := h.admin.DeletePolicy(h.ctx, "ops"); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	for _, n := range []string{"dev-2", "dev-3", "dev-4"} {
		if got, why := state(n); got != "Running" {
			t.Errorf("%s is %s (%s) after the policy went, want Running", n, got, why)
		}
	}
}
