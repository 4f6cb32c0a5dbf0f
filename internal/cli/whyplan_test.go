package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/config"
)

// TestWorkloadWhyPrintsPlannedStart: `arbiter workload why` on a gang
// waiting for running work with an expected runtime prints the planned
// start in the reason and on its own line, and the JSON output carries
// planned_start and planned_block.
func TestWorkloadWhyPrintsPlannedStart(t *testing.T) {
	ctx := context.Background()
	s, url := seededServer(t, `
fleet:
  regions:
    - name: eastus
      zones: [{name: "1", blocks: [{name: b, nodes: [{sku: Standard_ND96amsr_A100_v4, count: 2}]}]}]
tenants:
  - name: acme
`)
	c := client.New(url, testAdmin)
	busy := api.WorkloadSpec{Name: "run", GPUs: 8000, Replicas: 2, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}, ExpectedRuntime: api.Duration(3 * time.Hour)}
	if _, err := c.Submit(ctx, "acme", busy); err != nil {
		t.Fatal(err)
	}
	s.Cycle(ctx)
	gang := api.WorkloadSpec{Name: "gang", GPUs: 8000, Replicas: 2, Topology: "same-block", Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}
	if _, err := c.Submit(ctx, "acme", gang); err != nil {
		t.Fatal(err)
	}
	s.Cycle(ctx)
	w, err := c.Workload(ctx, "acme", "run")
	if err != nil || w.Running == nil {
		t.Fatalf("run not running: %+v %v", w, err)
	}
	at := w.Running.StartedAt.Add(3 * time.Hour).UTC().Format(time.RFC3339)

	out, errOut, code := run(t, "workload", "why", "gang", "--tenant", "acme", "--server", url, "--token", testAdmin)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"planned to start at " + at + " in eastus block b when acme/run ends", "PLANNED START", at + " (eastus block b, A100-80G)"} {
		if !strings.Contains(out, want) {
			t.Errorf("workload why prints:\n%s\nwant %q", out, want)
		}
	}
	out, errOut, code = run(t, "workload", "why", "gang", "--tenant", "acme", "--server", url, "--token", testAdmin, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{`"planned_start": "` + at, `"planned_block": "b"`} {
		if !strings.Contains(out, want) {
			t.Errorf("workload why -o json prints:\n%s\nwant %s", out, want)
		}
	}
}

// TestServeTakesConfigPlanning: serve runs the server with the config's
// options.planning (one path: the config's resolved scheduler options),
// and refuses a bad one with the file's position before opening state.
func TestServeTakesConfigPlanning(t *testing.T) {
	const fleet = "fleet:\n  regions: [{name: eastus, zones: [{name: \"1\", blocks: [{name: b, nodes: [{sku: Standard_ND96amsr_A100_v4, count: 1}]}]}]}]\n"
	cfg, err := config.Parse("fleet.yaml", []byte("options:\n  planning: {depth: 3, overrun: preempt}\n"+fleet))
	if err != nil {
		t.Fatal(err)
	}
	if got := schedulingOf(cfg).Planning; got.Depth != 3 || !got.PreemptOverrun {
		t.Errorf("serve's planning %+v, want the config's depth 3 and overrun preempt", got)
	}
	if got := schedulingOf(nil).Planning; got.Depth != 0 || got.MaxWait != nil {
		t.Errorf("serve without a config: planning %+v, want none set (the server's default)", got)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(file, []byte("options:\n  planning: {depth: -1}\n"+fleet), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, "serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", file)
	if code == 0 || !strings.Contains(errOut, "options.planning.depth") || !strings.Contains(errOut, "fleet.yaml:2") {
		t.Fatalf("serve --config with planning depth -1: exit %d, %q; want a positioned error naming options.planning.depth", code, errOut)
	}
}
