package store

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestWorkloadStoredForm: a stored workload's spec leaves out its zero
// fields (a restart decodes every stored workload, and the decoder's
// work follows the fields it reads), keeps the keys it always had, and
// decodes to the same workload; a record written with every field, as
// earlier builds wrote it, still decodes alike.
func TestWorkloadStoredForm(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	plain := &Workload{Tenant: "acme", State: StatePending, SubmittedAt: at,
		Spec: workload.Spec{Name: "train-1", Tenant: "acme", GPUs: resource.GPUs(1), Replicas: 1,
			Flavors: []fleet.ModelID{"A100-80G"}, Regions: []string{"eastus"}, Labels: map[string]string{"class": "batch"}}}
	full := &Workload{Tenant: "acme", State: StatePending, SubmittedAt: at,
		Spec: workload.Spec{Name: "train-2", Kind: workload.KindInference, Tenant: "acme", Priority: workload.PriorityHigh, Preemptible: true,
			GPUs: resource.GPUs(8), Replicas: 4, Elastic: &workload.Elastic{Min: 4, Max: 16, Step: 4}, CPU: 8000, Memory: 64 << 10,
			Flavors: []fleet.ModelID{"H100-80G", "A100-80G"}, Regions: []string{"eastus", "westus2"}, Pools: []string{"p"},
			Topology: workload.TopologySameBlock, ExpectedRuntime: time.Hour, CheckpointInterval: time.Minute, GracePeriod: time.Second,
			Reservation: "r", MaxPrice: 1.5, Labels: map[string]string{}, MIG: "3g.40gb", GPUMemory: 40 << 10}}
	b, err := json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, zero := range []string{`"Kind"`, `"Priority"`, `"Preemptible"`, `"Elastic"`, `"CPU"`, `"Memory"`, `"Pools"`, `"Topology"`,
		`"ExpectedRuntime"`, `"CheckpointInterval"`, `"GracePeriod"`, `"Reservation"`, `"MaxPrice"`, `"MIG"`, `"GPUMemory"`} {
		if strings.Contains(string(b), zero) {
			t.Errorf("the zero field %s is stored: %s", zero, b)
		}
	}
	for _, key := range []string{`"Name":"train-1"`, `"GPUs":1000`, `"Replicas":1`, `"Flavors":["A100-80G"]`, `"Labels":{"class":"batch"}`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("%s missing from %s", key, b)
		}
	}
	for _, w := range []*Workload{plain, full} {
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		var back Workload
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&back, w) {
			t.Errorf("round trip of %s:\n got %+v\nwant %+v", w.Spec.Name, back.Spec, w.Spec)
		}
	}
	old := `{"meta":{"created_revision":0,"revision":0},"tenant":"acme","spec":{"Name":"train-1","Kind":0,"Tenant":"acme","Priority":0,` +
		`"Preemptible":false,"GPUs":1000,"Replicas":1,"Elastic":null,"CPU":0,"Memory":0,"Flavors":["A100-80G"],"Regions":["eastus"],` +
		`"Pools":null,"Topology":0,"ExpectedRuntime":0,"CheckpointInterval":0,"GracePeriod":0,"Reservation":"","MaxPrice":0,` +
		`"Labels":{"class":"batch"},"MIG":"","GPUMemory":0},"state":"Pending","submitted_at":"2026-12-03T10:00:00Z"}`
	var back Workload
	if err := json.Unmarshal([]byte(old), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, plain) {
		t.Errorf("the earlier form decodes to %+v, want %+v", back.Spec, plain.Spec)
	}
}
