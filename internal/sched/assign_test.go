package sched

import (
	"reflect"
	"testing"

	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestPlacedAndAssignment: a plan's placements are grouped per workload in
// first-placement order, and each group becomes one assignment carrying
// every placement flag (the one conversion every applier uses).
func TestPlacedAndAssignment(t *testing.T) {
	p := Plan{Placements: []Placement{
		{Workload: "t/b", Replica: 0, Node: "n2", GPUs: []int{3}, Milli: 500, Flavor: "A100-80G", Region: "eastus", Within: true, OnReservation: true},
		{Workload: "t/a", Replica: 0, Node: "n1", GPUs: []int{0, 1}, Milli: 1000, Flavor: "H100", Region: "westus"},
		{Workload: "t/b", Replica: 1, Node: "n3", GPUs: []int{0}, Milli: 500, Flavor: "A100-80G", Region: "eastus", Within: true, OnReservation: true},
	}}
	groups := p.Placed()
	if len(groups) != 2 || groups[0].Workload != "t/b" || len(groups[0].Placements) != 2 || groups[1].Workload != "t/a" {
		t.Fatalf("Placed() = %+v", groups)
	}
	got := Assignment(groups[0].Placements, t0)
	want := &workload.Assignment{Flavor: "A100-80G", Region: "eastus", OnReservation: true, Within: true, StartedAt: t0,
		Replicas: []workload.Replica{{Node: "n2", GPUs: []int{3}, Milli: 500}, {Node: "n3", GPUs: []int{0}, Milli: 500}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Assignment = %+v, want %+v", got, want)
	}
	if Assignment(nil, t0) != nil {
		t.Error("Assignment(nil) is not nil")
	}
	// Apply uses the same conversion.
	out := Apply([]*workload.Workload{{Spec: workload.Spec{Name: "t/a"}}, {Spec: workload.Spec{Name: "t/b"}}}, p, t0)
	if !reflect.DeepEqual(out[1].Running, want) || !reflect.DeepEqual(out[0].Running, Assignment(groups[1].Placements, t0)) {
		t.Errorf("Apply = %+v, %+v", out[0].Running, out[1].Running)
	}
}
