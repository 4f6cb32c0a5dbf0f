package api

import (
	"encoding/json"
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

func TestReplicasForms(t *testing.T) {
	for _, tc := range []struct {
		in       string
		fixed    int
		elastic  *ElasticSpec
		wantErr  string
		min, max int
	}{
		{in: `{"name":"a","replicas":3}`, fixed: 3, min: 3, max: 3},
		{in: `{"name":"a","replicas":{"min":2,"max":8,"step":2}}`, elastic: &ElasticSpec{2, 8, 2}, min: 2, max: 8},
		{in: `{"name":"a","replicas":{"min":2,"max":8},"current_replicas":6}`, elastic: &ElasticSpec{2, 8, 0}, min: 2, max: 8},
		{in: `{"name":"a","replicas":{"min":2,"mx":8}}`, wantErr: "replicas"},
		{in: `{"name":"a","replicas":"four"}`, wantErr: "replicas"},
		{in: `{"name":"a","replicas":3,"current_replicas":2}`, wantErr: "current_replicas"},
		{in: `{"name":"a","bogus":1}`, wantErr: "bogus"},
	} {
		var s WorkloadSpec
		err := json.Unmarshal([]byte(tc.in), &s)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one naming %s", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if (s.Elastic == nil) != (tc.elastic == nil) || (s.Elastic != nil && *s.Elastic != *tc.elastic) || (tc.elastic == nil && s.Replicas != tc.fixed) {
			t.Errorf("%s: decoded %+v / %+v", tc.in, s.Replicas, s.Elastic)
		}
		s.GPUs, s.Flavors, s.Regions, s.Tenant = 1000, []string{"T4"}, []string{"eastus"}, "t"
		w, errs := s.ToWorkload()
		if len(errs) > 0 || w.MinReplicas() != tc.min || w.MaxReplicas() != tc.max || w.Replicas != tc.min {
			t.Errorf("%s: workload replicas %d (%d–%d), errs %v", tc.in, w.Replicas, w.MinReplicas(), w.MaxReplicas(), errs)
		}
		// The wire form round-trips.
		w.Replicas = tc.max
		b, err := json.Marshal(SpecFrom(w))
		if err != nil {
			t.Fatal(err)
		}
		var back WorkloadSpec
		if err := json.Unmarshal(b, &back); err != nil || back.Replicas != tc.max || (back.Elastic == nil) != (tc.elastic == nil) {
			t.Errorf("%s: round trip %s → %+v %v", tc.in, b, back, err)
		}
	}
}

// FuzzWorkloadSpecJSON: decoding never panics; what decodes and converts
// without problems has valid replica bounds and re-encodes to the same spec.
func FuzzWorkloadSpecJSON(f *testing.F) {
	for _, s := range []string{`{"name":"a","replicas":3}`, `{"name":"a","replicas":{"min":2,"max":8,"step":2}}`,
		`{"replicas":{"min":0,"max":-1}}`, `{"replicas":{"min":4,"max":32,"step":5}}`, `{"replicas":null}`, `{"replicas":[1]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var s WorkloadSpec
		if json.Unmarshal([]byte(in), &s) != nil {
			return
		}
		s.Name, s.Tenant, s.GPUs, s.Flavors, s.Regions = "a", "t", 1000, []string{"T4"}, []string{"eastus"}
		w, errs := s.ToWorkload()
		if len(errs) > 0 {
			return
		}
		if w.MinReplicas() < 1 || w.MaxReplicas() < w.MinReplicas() || w.MaxReplicas() > workload.MaxReplicasBound ||
			(w.MaxReplicas()-w.MinReplicas())%w.ReplicaStep() != 0 || w.Replicas != w.MinReplicas() {
			t.Fatalf("%s accepted with replicas %d (%d–%d step %d)", in, w.Replicas, w.MinReplicas(), w.MaxReplicas(), w.ReplicaStep())
		}
		b, err := json.Marshal(SpecFrom(w))
		if err != nil {
			t.Fatal(err)
		}
		var back WorkloadSpec
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s does not decode back: %v", b, err)
		}
	})
}

// TestWorkloadJSON: a workload's JSON is all of it (the spec's JSON
// methods, promoted, must not stand for the whole), with an elastic spec's
// replicas in the mapping form, and reads back.
func TestWorkloadJSON(t *testing.T) {
	w := Workload{WorkloadSpec: WorkloadSpec{Name: "serve", GPUs: 1000, Replicas: 3, Elastic: &ElasticSpec{Min: 1, Max: 4}}, State: "Running", Revision: 7,
		Running: &Assignment{Flavor: "T4"}}
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"state":"Running"`, `"revision":7`, `"replicas":{"min":1,"max":4}`, `"current_replicas":3`, `"name":"serve"`, `"flavor":"T4"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: no %s", b, want)
		}
	}
	var back Workload
	if err := json.Unmarshal(b, &back); err != nil || back.State != "Running" || back.Revision != 7 || back.Replicas != 3 || back.Elastic == nil || back.Elastic.Max != 4 || back.Running == nil {
		t.Errorf("read back %+v, %v", back, err)
	}
	fixed := Workload{WorkloadSpec: WorkloadSpec{Name: "f", Replicas: 2}, State: "Pending"}
	b, _ = json.Marshal(fixed)
	if !strings.Contains(string(b), `"replicas":2`) || strings.Contains(string(b), "current_replicas") || !strings.Contains(string(b), `"state":"Pending"`) {
		t.Errorf("fixed workload: %s", b)
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
	// gpu_memory alone: the smallest MIG instance with that much.
	s, errs = WorkloadSpec{Name: "g", GPUMemory: "20GiB", Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}.ToWorkload()
	if len(errs) > 0 || s.MIG != "1g.20gb" || s.GPUs != 250 || s.GPUMemory != 0 || SpecFrom(s).MIG != "1g.20gb" {
		t.Errorf("gpu_memory 20GiB alone: mig %q gpus %v gpu_memory %v errs %v", s.MIG, s.GPUs, s.GPUMemory, errs)
	}
	for _, tc := range []struct {
		in    WorkloadSpec
		field string
	}{
		{WorkloadSpec{Name: "x", GPUMemory: "20GiB", Flavors: []string{"T4"}, Regions: []string{"eastus"}}, "gpu_memory"},
		{WorkloadSpec{Name: "x", GPUMemory: "100GiB", Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}}, "gpu_memory"},
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
