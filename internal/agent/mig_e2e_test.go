package agent

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
)

// TestMIGEndToEnd: an agent whose GPUs are all in MIG mode registers its
// node in MIG mode (label mig: enabled); the server's scheduler places a
// MIG workload's replicas as instances there, whole-GPU work is kept off
// the node, and each replica runs with CUDA_VISIBLE_DEVICES naming its
// MIG device's UUID (the fake inventory's, derived from GPU, profile and
// start, as NVML's would be looked up).
func TestMIGEndToEnd(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	e.startAgentWith("m1", func(o *Options) { o.Inventory, _ = ParseInventory("fake:8xA100-80G:mig", "m1") })
	e.waitFor("the node in MIG mode", 5*time.Second, func() bool {
		ns, _ := e.admin.Nodes(e.ctx, "")
		return len(ns) == 1 && ns[0].Labels[fleet.MIGLabel] == fleet.MIGEnabled
	})
	_, err := e.admin.Submit(e.ctx, "team", api.WorkloadSpec{Name: "serve", MIG: "3g.40gb", Replicas: 2,
		Flavors: []string{"A100-80G"}, Regions: []string{"local"},
		Command: &api.Command{Argv: []string{"/bin/sh", e.script}, Env: map[string]string{"OUTDIR": e.out, "RUN_FOR": "60"}}})
	if err != nil {
		t.Fatal(err)
	}
	e.submit("whole", "low", 1, time.Second, "60") // 8 whole GPUs: never on a MIG-mode node
	var w api.Workload
	e.waitFor("both MIG replicas to run and record their environment", 10*time.Second, func() bool {
		w = e.workload("serve")
		return w.State == "Running" && exists(filepath.Join(e.out, "serve-0.env.0")) && exists(filepath.Join(e.out, "serve-1.env.0"))
	})
	for i, rep := range w.Running.Replicas {
		if rep.MIG == nil || rep.MIG.Profile != "3g.40gb" || len(rep.GPUs) != 1 {
			t.Fatalf("replica %d: %+v, want a 3g.40gb instance on one GPU", i, rep)
		}
		m := readEnv(t, filepath.Join(e.out, fmt.Sprintf("serve-%d.env.0", i)))
		want := fmt.Sprintf("MIG-fake-m1-%d-3g.40gb-%d", rep.GPUs[0], rep.MIG.Start)
		if m["CUDA_VISIBLE_DEVICES"] != want || m["NVIDIA_VISIBLE_DEVICES"] != want {
			t.Errorf("replica %d: CUDA_VISIBLE_DEVICES=%q NVIDIA_VISIBLE_DEVICES=%q, want %q", i, m["CUDA_VISIBLE_DEVICES"], m["NVIDIA_VISIBLE_DEVICES"], want)
		}
	}
	if a, b := w.Running.Replicas[0], w.Running.Replicas[1]; a.GPUs[0] == b.GPUs[0] && a.MIG.Start == b.MIG.Start {
		t.Fatalf("both replicas on GPU %d at slice %d", a.GPUs[0], a.MIG.Start)
	}
	if x := e.workload("whole"); x.State != "Pending" {
		t.Fatalf("whole-GPU work is %s on a MIG-mode node", x.State)
	}
}
