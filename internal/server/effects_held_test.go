package server

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestCapHeldReadsTheBlocker: which cap holds a workload back is read from
// its structured blocker (the policy, rule and action), not from the
// reason's text. One rule caps the developer class twice: a set_limit of
// 100 GPUs that holds nothing and a scale_down to half that holds dev-1.
// Matching "by policy P, rule R" in the text marked both held.
func TestCapHeldReadsTheBlocker(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1})
	c := h.tenant("fabrikam")
	for _, name := range []string{"dev-0", "dev-1"} {
		s := spec(name, 4, 1, "eastus")
		s.Labels, s.Preemptible = map[string]string{"class": "developer_instances"}, true
		if _, err := c.Submit(h.ctx, "fabrikam", s); err != nil {
			t.Fatal(err)
		}
		h.s.Cycle(h.ctx)
		tc.Advance(time.Minute)
	}
	rules := `policies:
  - name: dev_cap
    when: {metric: utilization, of: cluster, above: 1%}
    then:
      - {type: set_limit, target: developer_instances, limit: 100}
      - {type: scale_down, target: developer_instances, min_capacity: 50%}
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "caps", Source: rules}); err != nil {
		t.Fatal(err)
	}
	h.s.TickPolicies(h.ctx)
	tc.Advance(time.Minute)
	h.s.Cycle(h.ctx) // the newest developer instance is evicted and held
	h.s.Cycle(h.ctx)

	why, err := c.Why(h.ctx, "fabrikam", "dev-1")
	if err != nil {
		t.Fatal(err)
	}
	if why.Code != "PolicyHeld" || why.Reason != "held: class:developer_instances capped at 4 GPUs by policy caps, rule dev_cap" {
		t.Fatalf("dev-1: code %q reason %q, want held by the 4-GPU cap", why.Code, why.Reason)
	}
	if !strings.Contains(string(why.Blockers), `"hold":{"policy":"caps","rule":"dev_cap","index":1,"target":"class:developer_instances"}`) {
		t.Errorf("dev-1's blockers %s, want the hold of action 1", why.Blockers)
	}
	var held []string
	for _, e := range why.Effects {
		if e.Kind == api.EffectCap && e.Held {
			held = append(held, e.Value)
		}
	}
	if len(held) != 1 || held[0] != "class:developer_instances at 4 GPUs" {
		t.Errorf("held by %q, want only the 4-GPU cap (effects %+v)", held, why.Effects)
	}
	d0, err := c.Workload(h.ctx, "fabrikam", "dev-0")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range d0.Effects {
		if e.Held {
			t.Errorf("dev-0 runs but effect %+v says held", e)
		}
	}
}
