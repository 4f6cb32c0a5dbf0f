package api

import (
	"testing"

	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestToWorkloadDefaults: the API fills the same defaults as a config
// file (workload.Spec.Defaults).
func TestToWorkloadDefaults(t *testing.T) {
	tests := []struct {
		in       WorkloadSpec
		prio     workload.Priority
		replicas int
	}{
		{WorkloadSpec{Name: "a", GPUs: 1000, Flavors: []string{"T4"}, Regions: []string{"eastus"}}, workload.DefaultPriority, workload.DefaultReplicas},
		{WorkloadSpec{Name: "b", GPUs: 1000, Priority: "spot", Replicas: 3, Flavors: []string{"T4"}, Regions: []string{"eastus"}}, workload.PrioritySpot, 3},
	}
	for _, tc := range tests {
		s, errs := tc.in.ToWorkload()
		if len(errs) > 0 || s.Priority != tc.prio || s.Replicas != tc.replicas {
			t.Errorf("%s: priority %v replicas %d errs %v; want %v, %d", tc.in.Name, s.Priority, s.Replicas, errs, tc.prio, tc.replicas)
		}
	}
}
