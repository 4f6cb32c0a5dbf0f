package api

import (
	"fmt"
	"strings"
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

// TestToWorkloadMIG: mig and gpu_memory come through the API with the
// field named in every refusal.
func TestToWorkloadMIG(t *testing.T) {
	s, errs := WorkloadSpec{Name: "m", MIG: "3g.40gb", Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}.ToWorkload()
	if len(errs) > 0 || s.GPUs != 500 || s.MIG != "3g.40gb" {
		t.Errorf("mig 3g.40gb: gpus %v errs %v", s.GPUs, errs)
	}
	if back := SpecFrom(s); back.MIG != "3g.40gb" {
		t.Errorf("SpecFrom lost mig: %+v", back)
	}
	s, errs = WorkloadSpec{Name: "g", GPUs: 1000, GPUMemory: "20GiB", Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}.ToWorkload()
	if len(errs) > 0 || s.GPUMemory != 20<<10 || SpecFrom(s).GPUMemory != "20GiB" {
		t.Errorf("gpu_memory 20GiB: %v %v", s.GPUMemory, errs)
	}
	for _, tc := range []struct {
		in    WorkloadSpec
		field string
	}{
		{WorkloadSpec{Name: "x", MIG: "9g.99gb", Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}, "mig"},
		{WorkloadSpec{Name: "x", GPUs: 1000, GPUMemory: "20GB", Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}, "gpu_memory"},
		{WorkloadSpec{Name: "x", GPUs: 1000, GPUMemory: "999TiB", Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}, "gpu_memory"},
		{WorkloadSpec{Name: "x", MIG: "3g.40gb", Flavors: []string{"T4"}, Regions: []string{"eastus"}}, "flavors[0]"},
		// Hostile sizes: refused by field, not echoed whole.
		{WorkloadSpec{Name: "x", MIG: strings.Repeat("7g.", 5000), Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}, "mig"},
		{WorkloadSpec{Name: "x", GPUs: 1000, GPUMemory: strings.Repeat("9", 5000) + "GiB", Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}, "gpu_memory"},
	} {
		in, field := tc.in, tc.field
		_, errs := in.ToWorkload()
		found := false
		for _, e := range errs {
			found = found || e.Field == field
		}
		if !found {
			t.Errorf("%.80s: errors %v name no %s", fmt.Sprint(in), errs, field)
		}
		for _, e := range errs {
			if len(e.Msg) > 1000 {
				t.Errorf("%s: a %d-byte message echoes the input", e.Field, len(e.Msg))
			}
		}
	}
}
