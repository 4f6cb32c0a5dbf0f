package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/mig"
)

// migScenario: two H100 nodes in MIG mode serve a stream of MIG inference
// slices of three sizes; one plain H100 node runs whole-GPU training.
const migScenario = `name: mig
duration: 12h
cycle: 5m
fleet:
  regions:
    - name: eastus
      zones:
        - name: z1
          blocks:
            - name: mig
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 2, labels: {mig: enabled}}]
            - name: whole
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 1}]
tenants:
  - name: serve
  - name: train
generators:
  - {name: slices, tenant: serve, flavors: [H100-80G], regions: [eastus], rate_per_hour: 12,
     sizes: [{mig: 1g.10gb, replicas: 2, weight: 3}, {mig: 3g.40gb, replicas: 1, weight: 2}, {mig: 7g.80gb, replicas: 1, weight: 1}],
     runtime_min: 30m, runtime_max: 4h}
  - {name: jobs, tenant: train, flavors: [H100-80G], regions: [eastus], rate_per_hour: 1,
     sizes: [{gpus: 4, replicas: 1, weight: 1}], runtime_min: 1h, runtime_max: 3h}
`

// TestSimMIG: the simulator places MIG work with the core: every step,
// each running MIG slice sits on a MIG-mode node as an instance of its
// profile, every GPU's instances form a layout NVIDIA accepts, and
// whole-GPU work stays off those nodes; the same seed gives the same run.
func TestSimMIG(t *testing.T) {
	run := func() (string, int) {
		s, sc := scenarioSim(t, "mig.yaml", migScenario)
		if sc.Generators[0].Sizes[1].GPUs != 500 {
			t.Fatalf("3g.40gb size charged %v GPUs, want 0.5", sc.Generators[0].Sizes[1].GPUs)
		}
		var trace strings.Builder
		slices := 0
		s.afterStep = func() {
			layouts := map[string][]mig.Instance{}
			for _, j := range s.jobs {
				if j.w.Running == nil {
					continue
				}
				for _, r := range j.w.Running.Replicas {
					n, _ := s.cfg.Fleet.Node(r.Node)
					if n.MIGMode() != (j.w.MIG != "") || (r.MIG != nil) != (j.w.MIG != "") {
						t.Fatalf("%s (mig %q) on %s (MIG mode %v), instance %v", j.w.Name, j.w.MIG, n.ID, n.MIGMode(), r.MIG)
					}
					if r.MIG != nil {
						k := fmt.Sprintf("%s/%d", n.ID, r.GPUs[0])
						layouts[k] = append(layouts[k], mig.Instance{Profile: r.MIG.Profile, Start: r.MIG.Start})
						fmt.Fprintf(&trace, "%s %s %s@%d\n", j.w.Name, k, r.MIG.Profile, r.MIG.Start)
					}
				}
			}
			g, _ := mig.For(string(fleet.ModelID("H100-80G")))
			for k, insts := range layouts {
				if _, err := g.Check(insts); err != nil {
					t.Fatalf("%s: %v: %v", k, insts, err)
				}
				slices += len(insts)
			}
		}
		r := s.Run()
		if r.JobsSubmitted == 0 {
			t.Fatal("no jobs")
		}
		return trace.String(), slices
	}
	a, n := run()
	if n == 0 {
		t.Fatal("no MIG slice ever ran")
	}
	if b, _ := run(); a != b {
		t.Fatal("two runs of one seed placed MIG slices differently")
	}
}

func TestSimMIGSizeChecked(t *testing.T) {
	bad := strings.Replace(migScenario, "{mig: 3g.40gb, replicas: 1, weight: 2}", "{mig: 9g.99gb, replicas: 1, weight: 2}", 1)
	if _, err := ParseScenario("mig.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "generators[0].sizes[1].mig") || !strings.Contains(err.Error(), "unknown MIG profile") {
		t.Errorf("unknown profile: %v", err)
	}
	bad = strings.Replace(migScenario, "flavors: [H100-80G], regions: [eastus], rate_per_hour: 12", "flavors: [T4], regions: [eastus], rate_per_hour: 12", 1)
	if _, err := ParseScenario("mig.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "generators[0].flavors[0]") {
		t.Errorf("T4 MIG: %v", err)
	}
}
