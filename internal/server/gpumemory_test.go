package server

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
)

// gpuMemoryFleet: one A100 machine in MIG mode and one T4 machine.
const gpuMemoryFleet = `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-mig
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 1, labels: {mig: enabled}}]
            - name: eus-t4
              nodes: [{sku: Standard_NC4as_T4_v3, count: 1}]
tenants:
  - name: contoso
    quota:
      - {flavor: A100-80G, region: eastus, limit: 8}
      - {flavor: T4, region: eastus, limit: 1}
`

// TestGPUMemoryPicksMIGProfile: a tenant that asks over HTTP for GPU
// memory alone (gpu_memory, neither gpus nor mig) gets the smallest MIG
// instance with that much on a MIG-mode GPU, and the stored spec names
// the profile; one whose flavors have no MIG is refused by gpu_memory.
func TestGPUMemoryPicksMIGProfile(t *testing.T) {
	h := newHarness(t, gpuMemoryFleet, Options{})
	c := h.tenant("contoso")
	ask := api.WorkloadSpec{Name: "asr", GPUMemory: "30GiB", Replicas: 2, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}
	if _, err := c.Submit(h.ctx, "contoso", ask); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	w, err := c.Workload(h.ctx, "contoso", "asr")
	if err != nil {
		t.Fatal(err)
	}
	if w.MIG != "3g.40gb" || w.GPUs != 500 || w.GPUMemory != "" {
		t.Errorf("stored spec: mig %q gpus %v gpu_memory %q; want 3g.40gb, 0.5, none", w.MIG, w.GPUs, w.GPUMemory)
	}
	if w.State != "Running" || len(w.Running.Replicas) != 2 {
		t.Fatalf("asr is %s (%+v), want running with 2 replicas", w.State, w.Running)
	}
	for _, r := range w.Running.Replicas {
		if r.MIG == nil || r.MIG.Profile != "3g.40gb" || !strings.HasPrefix(r.Node, "eus-mig") {
			t.Errorf("replica on %s with %+v, want a 3g.40gb instance on the MIG machine", r.Node, r.MIG)
		}
	}
	bad := api.WorkloadSpec{Name: "small", GPUMemory: "8GiB", Flavors: []string{"T4"}, Regions: []string{"eastus"}}
	_, err = c.Submit(h.ctx, "contoso", bad)
	if err == nil || !strings.Contains(err.Error(), "gpu_memory") || !strings.Contains(err.Error(), "T4 has no MIG") {
		t.Errorf("gpu_memory alone on T4: %v; want a refusal naming gpu_memory", err)
	}
}
