package effects

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/arbiterhq/arbiter/internal/policy"
)

// TestBusyTotalsCoverTable: busy utilization is measured on every kind
// the table says the agents give it on, as the mean over the GPUs
// measured; a tenant with no GPU measured has no value.
func TestBusyTotalsCoverTable(t *testing.T) {
	var b BusyTotals
	b.AddNode(Node{ID: "a", Model: "H100-80G", Region: "eastus", Pool: "p", GPUs: 8}, 8*0.5, 8)
	b.AddNode(Node{ID: "b", Model: "A100-80G", Region: "eastus", GPUs: 4}, 0, 2) // two GPUs unread
	b.AddTenant("acme", 1.8, 2)
	obs := b.Observations([]string{"acme", "idle"})
	want := []Observation{
		{policy.MetricBusyUtilization, policy.Cluster, 4.0 / 10},
		{policy.MetricBusyUtilization, policy.Target{Kind: policy.TargetFlavor, Name: "H100-80G"}, 0.5},
		{policy.MetricBusyUtilization, policy.Target{Kind: policy.TargetRegion, Name: "eastus"}, 0.4},
		{policy.MetricBusyUtilization, policy.Target{Kind: policy.TargetPool, Name: "p"}, 0.5},
		{policy.MetricBusyUtilization, policy.Target{Kind: policy.TargetFlavor, Name: "A100-80G"}, 0},
		{policy.MetricBusyUtilization, policy.Target{Kind: policy.TargetTenant, Name: "acme"}, 0.9},
	}
	if d := cmp.Diff(want, obs); d != "" {
		t.Errorf("observations (-want +got):\n%s", d)
	}
	got := map[policy.TargetKind]bool{}
	for _, o := range obs {
		got[o.Target.Kind] = true
	}
	for k, src := range Sources[policy.MetricBusyUtilization] {
		if src != policy.FromAgents {
			t.Errorf("busy_utilization of a %s comes from %s, want agents", k, src)
		}
		if !got[k] {
			t.Errorf("busy_utilization of a %s: the table has it, BusyTotals does not give it", k)
		}
	}
	var none BusyTotals
	if obs := none.Observations([]string{"acme"}); len(obs) != 0 {
		t.Errorf("no readings gave %v, want no observation", obs)
	}
}
