package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/server"
)

// TestTenantShowFairShare: on a server whose config turns on
// options.fair_share, `arbiter tenant show` prints each quota entry's
// share, decayed usage and factor under the quotas; -o json carries them.
func TestTenantShowFairShare(t *testing.T) {
	ctx := context.Background()
	const world = `options:
  fair_share: {half_life: 1d}
fleet: {regions: [{name: eastus, zones: [{name: "1", blocks: [{name: b, nodes: [{sku: Standard_ND96amsr_A100_v4, count: 1}]}]}]}]}
tenants:
  - {name: a, quota: [{flavor: A100-80G, region: eastus, guaranteed: 4}]}
  - {name: b, quota: [{flavor: A100-80G, region: eastus, guaranteed: 4}]}
`
	cfg, err := config.Parse("c.yaml", []byte(world))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	s, _, url := seededServerWith(t, world, server.Options{Clock: func() time.Time { return now }, Scheduling: schedulingOf(cfg)})
	const admin = testAdmin
	c := client.New(url, admin)
	if _, err := c.Submit(ctx, "a", api.WorkloadSpec{Name: "w", GPUs: 8000, Replicas: 1, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}); err != nil {
		t.Fatal(err)
	}
	s.Cycle(ctx)
	now = now.Add(24 * time.Hour)
	s.Cycle(ctx)
	var out, errb bytes.Buffer
	if code := Main([]string{"tenant", "show", "a", "--server", url, "--token", admin}, &out, &errb); code != 0 {
		t.Fatalf("tenant show: %d %s", code, errb.String())
	}
	// 8 GPUs for one half-life: 8 × 24h/ln 2 × (1 − ½) = 138.5 GPU-h, all
	// of the siblings' use against half their share: factor 2^-2.
	for _, want := range []string{"Fair share (half-life 24h, as of 2026-03-02T00:00:00Z)", "SHARE", "FACTOR", "50.0%", "138.5", "100.0%", "0.250"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tenant show lacks %q:\n%s", want, out.String())
		}
	}
	// b's 4 guaranteed GPUs are idle and a's borrowed work holds them
	// (the one machine is full): all 4 are lent.
	out.Reset()
	if code := Main([]string{"tenant", "show", "b", "--server", url, "--token", admin}, &out, &errb); code != 0 {
		t.Fatalf("tenant show b: %d %s", code, errb.String())
	}
	var entry string
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "A100-80G" && entry == "" {
			entry = strings.Join(f, " ")
		}
	}
	if !strings.Contains(out.String(), "LENT") || entry != "A100-80G eastus 4 0 0 4 4 unlimited" {
		t.Errorf("tenant show b: entry %q, want guaranteed 4, used 0, borrowed 0, idle 4, lent 4:\n%s", entry, out.String())
	}
	out.Reset()
	if code := Main([]string{"tenant", "show", "b", "--server", url, "--token", admin, "-o", "json"}, &out, &errb); code != 0 {
		t.Fatalf("tenant show -o json: %d %s", code, errb.String())
	}
	if !strings.Contains(out.String(), `"factor": 1`) || !strings.Contains(out.String(), `"decayed_gpu_hours": 0`) {
		t.Errorf("tenant b ran nothing; json:\n%s", out.String())
	}
}

// TestScheduleTreeExample: examples/tree.yaml (docs/tenants.md) shows
// research reclaiming from batch what internal guarantees its subtree,
// and batch's high-priority job unable to take research's covered work.
func TestScheduleTreeExample(t *testing.T) {
	out, errOut, code := run(t, "schedule", "--config", "../../examples/tree.yaml", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plan struct {
		Placements  []struct{ Workload, Node string } `json:"placements"`
		Preemptions []struct{ Workload, By, Reason string }
		Pending     []struct{ Workload string }
		History     *struct{ Entries []struct{ Tenant string } } `json:"fair_share_history"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Preemptions) != 1 || plan.Preemptions[0].Workload != "b-3" || plan.Preemptions[0].By != "r-1" ||
		!strings.Contains(plan.Preemptions[0].Reason, "that internal holds for its subtree") {
		t.Errorf("preemptions %+v: want b-3 reclaimed by r-1 on internal's guarantee", plan.Preemptions)
	}
	if len(plan.Placements) != 1 || plan.Placements[0].Workload != "r-1" {
		t.Errorf("placements %+v: want r-1 alone", plan.Placements)
	}
	if len(plan.Pending) != 1 || plan.Pending[0].Workload != "b-5" {
		t.Errorf("pending %+v: want b-5 alone", plan.Pending)
	}
	if plan.History == nil {
		t.Errorf("no fair_share_history with options.fair_share")
	}
}
