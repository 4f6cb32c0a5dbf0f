package config

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

const planningFleet = `fleet: {regions: [{name: e, zones: [{name: z, blocks: [{name: b, nodes: [{sku: Standard_NC4as_T4_v3, count: 1}]}]}]}]}
tenants: [{name: t}]
`

// TestPlanningOptions: options.planning as written reaches the core, every
// field left out takes sched.DefaultPlanning's value, and each bad field
// is refused naming the field and the line.
func TestPlanningOptions(t *testing.T) {
	c, err := Parse("p.yaml", []byte("options:\n  planning: {default_runtime: {normal: 4h}, max_wait: {high: 2h}, overrun: preempt}\n"+planningFleet))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Input().Options.Planning
	if got.Depth != sched.DefaultPlanDepth || got.DefaultRuntime[workload.PriorityNormal] != 4*time.Hour ||
		got.MaxWait[workload.PriorityHigh] != 2*time.Hour || len(got.MaxWait) != 1 || !got.PreemptOverrun {
		t.Errorf("planning %+v: want the default depth, normal's 4h runtime, high's 2h bound alone, overrun preempt", got)
	}
	if c, err := Parse("p.yaml", []byte(planningFleet)); err != nil || c.Input().Options.Planning.Depth != sched.DefaultPlanDepth {
		t.Errorf("no options.planning: %v, want the defaults", err)
	}
	for _, tc := range []struct{ planning, want string }{
		{"{depth: -1}", "options.planning.depth"},
		{"{depth: 100000}", "options.planning.depth"},
		{"{max_wait: {urgent: 1h}}", "options.planning.max_wait.urgent"},
		{"{default_runtime: {normal: -1h}}", "options.planning.default_runtime.normal"},
		{"{overrun: kill}", "options.planning.overrun"},
	} {
		_, err := Parse("p.yaml", []byte("options:\n  planning: "+tc.planning+"\n"+planningFleet))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "p.yaml:2") {
			t.Errorf("planning %s: %v; want an error naming %s at p.yaml:2", tc.planning, err, tc.want)
		}
	}
}

// TestFairShareOptions: options.fair_share reaches the core; a half-life
// out of bounds is refused naming the field and the line.
func TestFairShareOptions(t *testing.T) {
	c, err := Parse("p.yaml", []byte("options:\n  fair_share: {half_life: 7d}\n"+planningFleet))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Input().Options.FairShare.HalfLife; got != 7*24*time.Hour {
		t.Errorf("half-life %v, want 168h", got)
	}
	if c, err := Parse("p.yaml", []byte(planningFleet)); err != nil || c.Input().Options.FairShare.HalfLife != 0 {
		t.Errorf("no options.fair_share: %v, want it off", err)
	}
	for _, hl := range []string{"30s", "-1h", "4000d", "7"} {
		_, err := Parse("p.yaml", []byte("options:\n  fair_share: {half_life: "+hl+"}\n"+planningFleet))
		if err == nil || !strings.Contains(err.Error(), "options.fair_share.half_life") || !strings.Contains(err.Error(), "p.yaml:2") {
			t.Errorf("half_life %s: %v; want an error naming options.fair_share.half_life at p.yaml:2", hl, err)
		}
	}
}

// TestShapesPerTenant: options.shapes_per_tenant reaches the core (left
// out, the default; 0, no bound); anything but a whole number in range is
// refused naming the field and its line.
func TestShapesPerTenant(t *testing.T) {
	for _, tc := range []struct {
		opt  string
		want int
	}{{"", sched.DefaultTenantBound}, {"options:\n  scorer: \"\"\n  shapes_per_tenant: 50\n", 50}, {"options:\n  shapes_per_tenant: 0\n", -1}} {
		c, err := Parse("p.yaml", []byte(tc.opt+planningFleet))
		if err != nil {
			t.Fatalf("%q: %v", tc.opt, err)
		}
		if got := c.Input().Options.TenantBound; got != tc.want {
			t.Errorf("%q: bound %d, want %d", tc.opt, got, tc.want)
		}
	}
	for _, v := range []string{"-1", "1.5", "many", "10000001", "[1]"} {
		_, err := Parse("p.yaml", []byte("options:\n  scorer: \"\"\n  shapes_per_tenant: "+v+"\n"+planningFleet))
		if err == nil || !strings.Contains(err.Error(), "options.shapes_per_tenant") || !strings.Contains(err.Error(), "p.yaml:3") {
			t.Errorf("shapes_per_tenant %s: %v; want an error naming options.shapes_per_tenant at p.yaml:3", v, err)
		}
	}
}
