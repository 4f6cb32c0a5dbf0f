package server

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// findEffect returns the workload's effect of this kind, failing the test
// when there is none.
func findEffect(t *testing.T, name string, effects []api.Effect, kind string) api.Effect {
	t.Helper()
	for _, e := range effects {
		if e.Kind == kind {
			return e
		}
	}
	t.Fatalf("%s: no %s effect in %+v", name, kind, effects)
	return api.Effect{}
}

// TestWorkloadShowsPolicyEffects: GET of a workload and `why` show the
// values the scheduler uses where a policy in force changed them, with
// the policy, rule and since-time of each: the priority set_priority
// gives, the regions migrate narrows it to, the cap on its class (and
// that it holds the workload back), its tenant's limit. Before, GET still
// showed the spec's priority and said nothing of the policies.
func TestWorkloadShowsPolicyEffects(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1})
	c := h.tenant("fabrikam")
	dev := func(name string) api.WorkloadSpec {
		s := spec(name, 4, 1, "eastus")
		s.Labels, s.Preemptible = map[string]string{"class": "developer_instances"}, true
		return s
	}
	for _, s := range []api.WorkloadSpec{dev("dev-0"), dev("dev-1"), spec("train", 8, 1, "eastus", "westus2")} {
		if _, err := c.Submit(h.ctx, "fabrikam", s); err != nil {
			t.Fatal(err)
		}
		h.s.Cycle(h.ctx)
		tc.Advance(time.Minute)
	}
	rules := `policies:
  - name: protect
    when: {metric: utilization, of: cluster, above: 1%}
    then:
      - {type: set_priority, target: tenant:fabrikam, priority: high}
      - {type: migrate, target: tenant:fabrikam, destination: region:westus2}
      - {type: set_limit, target: tenant:fabrikam, limit: 40}
  - name: dev_cap
    when: {metric: utilization, of: cluster, above: 1%}
    then:
      - {type: scale_down, target: developer_instances, min_capacity: 50%}
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "customer_sla_protection", Source: rules}); err != nil {
		t.Fatal(err)
	}
	firedAt := tc.Now()
	h.s.TickPolicies(h.ctx)
	tc.Advance(time.Minute)
	h.s.Cycle(h.ctx) // the newest developer instance is evicted, train moves
	h.s.Cycle(h.ctx)

	train, err := c.Workload(h.ctx, "fabrikam", "train")
	if err != nil {
		t.Fatal(err)
	}
	if train.Priority != "normal" || train.EffectivePriority != "high" {
		t.Errorf("train: priority %q, effective %q; want normal, effective high", train.Priority, train.EffectivePriority)
	}
	if !slices.Equal(train.EffectiveRegions, []string{"westus2"}) || train.Running == nil || train.Running.Region != "westus2" {
		t.Errorf("train: effective regions %v, running %+v; want westus2", train.EffectiveRegions, train.Running)
	}
	p := findEffect(t, "train", train.Effects, api.EffectPriority)
	if p.Value != "high" || p.Policy != "customer_sla_protection" || p.Rule != "protect" || !p.Since.Equal(firedAt) {
		t.Errorf("train's priority effect %+v, want high by customer_sla_protection/protect since %v", p, firedAt)
	}
	if got, want := p.Format(firedAt, time.UTC), "priority high, set by customer_sla_protection (rule protect) since "+firedAt.UTC().Format("15:04")+" UTC"; got != want {
		t.Errorf("the line says %q, want %q", got, want)
	}
	if r := findEffect(t, "train", train.Effects, api.EffectRegions); r.Value != "westus2" {
		t.Errorf("regions effect %+v", r)
	}
	if l := findEffect(t, "train", train.Effects, api.EffectTenantLimit); l.Value != "limit 40 GPUs" {
		t.Errorf("tenant limit effect %+v", l)
	}

	// The cap: 50% of the 8 GPUs the class held. dev-1 (newest) is held
	// back, dev-0 runs under it.
	why, err := c.Why(h.ctx, "fabrikam", "dev-1")
	if err != nil {
		t.Fatal(err)
	}
	if why.Code != "PolicyHeld" {
		t.Fatalf("dev-1: %+v, want held by the cap", why)
	}
	if e := findEffect(t, "dev-1", why.Effects, api.EffectCap); !e.Held || e.Rule != "dev_cap" || e.Value != "class:developer_instances at 4 GPUs" {
		t.Errorf("dev-1's cap effect %+v, want held by dev_cap at 4 GPUs", e)
	}
	d1, err := c.Workload(h.ctx, "fabrikam", "dev-1")
	if err != nil {
		t.Fatal(err)
	}
	if e := findEffect(t, "dev-1", d1.Effects, api.EffectCap); !e.Held {
		t.Errorf("GET dev-1: cap effect %+v, want held", e)
	}
	d0, err := c.Workload(h.ctx, "fabrikam", "dev-0")
	if err != nil {
		t.Fatal(err)
	}
	if e := findEffect(t, "dev-0", d0.Effects, api.EffectCap); e.Held || d0.State != "Running" {
		t.Errorf("dev-0 (%s): cap effect %+v, want running under the cap", d0.State, e)
	}
	// dev workloads accept eastus only: the migrate leaves them alone.
	if len(d0.EffectiveRegions) != 0 {
		t.Errorf("dev-0's effective regions %v, want none (its own list excludes westus2)", d0.EffectiveRegions)
	}
	// The listing shows the same.
	ws, err := c.Workloads(h.ctx, "fabrikam", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.EffectivePriority != "high" {
			t.Errorf("listed %s with effective priority %q, want high", w.Name, w.EffectivePriority)
		}
	}
	// Another tenant's workloads carry none of it.
	o := h.tenant("contoso")
	if _, err := o.Submit(h.ctx, "contoso", spec("mine", 1, 1)); err != nil {
		t.Fatal(err)
	}
	mine, err := o.Workload(h.ctx, "contoso", "mine")
	if err != nil {
		t.Fatal(err)
	}
	if len(mine.Effects) != 0 || mine.EffectivePriority != "" {
		t.Errorf("contoso's workload shows %+v, %q; want no effects (the policies target fabrikam and its developer instances)", mine.Effects, mine.EffectivePriority)
	}
	// When the policy goes, so do the effects.
	if err := h.admin.DeletePolicy(h.ctx, "customer_sla_protection"); err != nil {
		t.Fatal(err)
	}
	if train, err = c.Workload(h.ctx, "fabrikam", "train"); err != nil || len(train.Effects) != 0 || train.EffectivePriority != "" {
		t.Errorf("after the policy went: %+v %q %v", train.Effects, train.EffectivePriority, err)
	}
}

// TestWorkloadShowsPoolDrainSpotEffects: the other effects a policy has
// on a workload: migrate's narrowing to a pool, a drain of the pool it
// runs in, a spot price where spot work may run.
func TestWorkloadShowsPoolDrainSpotEffects(t *testing.T) {
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
	b := spec("b1", 8, 1, "eastus")
	b.Labels = map[string]string{"class": "batch_jobs"}
	sp := spec("bid", 1, 1, "eastus")
	sp.Priority, sp.MaxPrice = "spot", 9
	for _, s := range []api.WorkloadSpec{b, sp} {
		if _, err := c.Submit(h.ctx, "acme", s); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx)
	rules := `policies:
  - name: busy
    when: {metric: utilization, of: cluster, above: 1%}
    then:
      - {type: migrate, target: batch_jobs, destination: pool:low_priority_pool}
      - {type: drain, target: pool:main}
      - {type: set_spot_price, target: region:eastus, price: $5/h}
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "ops", Source: rules}); err != nil {
		t.Fatal(err)
	}
	h.s.TickPolicies(h.ctx)
	b1, err := c.Workload(h.ctx, "acme", "b1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b1.EffectivePools, []string{"low_priority_pool"}) {
		t.Errorf("b1's effective pools %v, want low_priority_pool", b1.EffectivePools)
	}
	if e := findEffect(t, "b1", b1.Effects, api.EffectPools); e.Policy != "ops" || e.Rule != "busy" {
		t.Errorf("pools effect %+v", e)
	}
	// b1 was placed in main (filled first) before the policy fired.
	if b1.Running == nil || !strings.HasPrefix(b1.Running.Replicas[0].Node, "main-") {
		t.Fatalf("b1 runs on %+v, want a node of pool main", b1.Running)
	}
	if e := findEffect(t, "b1", b1.Effects, api.EffectDrain); e.Value != "pool:main" {
		t.Errorf("drain effect %+v", e)
	}
	bid, err := c.Workload(h.ctx, "acme", "bid")
	if err != nil {
		t.Fatal(err)
	}
	if e := findEffect(t, "bid", bid.Effects, api.EffectSpotPrice); e.Value != "$5/GPU-h on region:eastus" {
		t.Errorf("spot price effect %+v", e)
	}
	for _, e := range b1.Effects {
		if e.Kind == api.EffectSpotPrice {
			t.Errorf("b1 is not spot work, but shows %+v", e)
		}
	}
}
