package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/server"
)

// advisorServer is costServer's run, then an hour more with two more
// workloads: acme's west2 (1 GPU in westus2, blocked by acme's limit of 2
// there) and beta's crunch (2 preemptible GPUs at normal priority, so
// on demand).
func advisorServer(t *testing.T) (url string, s *server.Server) {
	t.Helper()
	url, s, clk := costServer(t)
	ctx := context.Background()
	admin := client.New(url, testAdmin)
	for _, x := range []struct {
		tenant string
		w      api.WorkloadSpec
	}{
		{"acme", api.WorkloadSpec{Name: "west2", Kind: "batch", GPUs: 1000, Flavors: []string{"A100-80G"}, Regions: []string{"westus2"}}},
		{"beta", api.WorkloadSpec{Name: "crunch", Kind: "batch", GPUs: 2000, Preemptible: true, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}},
	} {
		if _, err := admin.Submit(ctx, x.tenant, x.w); err != nil {
			t.Fatal(err)
		}
	}
	s.Cycle(ctx)
	clk.Advance(time.Hour)
	s.Cycle(ctx)
	return url, s
}

// TestAdvisorListGolden: arbiter advisor list (table, JSON, YAML) over
// the seeded run's 6 hours, against testdata/advisor.golden (-update
// rewrites it).
func TestAdvisorListGolden(t *testing.T) {
	url, _ := advisorServer(t)
	conn := []string{"--server", url, "--token", testAdmin}
	var golden strings.Builder
	for _, args := range [][]string{
		{"advisor", "list", "--window", "6h"},
		{"advisor", "list", "--window", "6h", "--idle-threshold", "90%", "-o", "json"},
		{"advisor", "list", "--window", "6h", "-o", "yaml", "--tenant", "beta"},
	} {
		out, errOut, code := run(t, append(args, conn...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		golden.WriteString("$ arbiter " + strings.Join(args, " ") + "\n" + out + "\n")
	}
	checkGolden(t, "advisor.golden", golden.String())

	out, errOut, code := run(t, append([]string{"advisor", "list", "--window", "6h", "-o", "json"}, conn...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var recs []meter.Recommendation
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for i, r := range recs {
		kinds[r.Kind]++
		if i > 0 && r.Saving > recs[i-1].Saving {
			t.Errorf("not by saving: %v after %v", r.Saving, recs[i-1].Saving)
		}
	}
	// acme's west2 waits on its westus2 limit of 2 (2 used + 1 asked):
	// 1 GPU needed; beta's crunch runs preemptible on demand.
	for _, k := range []string{meter.KindQuotaIncrease, meter.KindUseSpot, meter.KindReserveBaseline} {
		if kinds[k] == 0 {
			t.Errorf("no %s recommendation:\n%s", k, out)
		}
	}
	for _, r := range recs {
		if r.Kind == meter.KindQuotaIncrease && (r.Target != "acme A100-80G/westus2" || r.Evidence["needed_gpus"] != 1) {
			t.Errorf("quota increase %s needs %v GPUs, want acme A100-80G/westus2 and 1", r.Target, r.Evidence["needed_gpus"])
		}
	}
}

// TestAdvisorIsolationAndBadInput: a tenant sees only its own
// recommendations (also with --tenant of another, and over the API);
// bad --window, --idle-threshold and -o are refused naming the flag, the
// API's bad window and idle_threshold naming the parameter.
func TestAdvisorIsolationAndBadInput(t *testing.T) {
	url, _ := advisorServer(t)
	admin := client.New(url, testAdmin)
	ctx := context.Background()
	tok, err := admin.CreateToken(ctx, "beta", "advisor")
	if err != nil {
		t.Fatal(err)
	}
	beta := []string{"--server", url, "--token", tok.Secret}
	for _, args := range [][]string{
		{"advisor", "list", "--window", "6h", "-o", "json"},
		{"advisor", "list", "--window", "6h", "--tenant", "acme"},
	} {
		out, errOut, code := run(t, append(args, beta...)...)
		if code != 0 || strings.Contains(out, "acme") {
			t.Errorf("%v as beta (exit %d, %s) shows acme:\n%s", args, code, errOut, out)
		}
	}
	recs, err := client.New(url, tok.Secret).Advisor(ctx, "6h", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Error("beta has no recommendations (want its use-spot)")
	}
	for _, r := range recs {
		if r.Tenant != "beta" {
			t.Errorf("beta sees %s's %s", r.Tenant, r.Kind)
		}
	}
	adminConn := []string{"--server", url, "--token", testAdmin}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"advisor", "list", "--window", "soon"}, "--window"},
		{[]string{"advisor", "list", "--window", "0h"}, "--window"},
		{[]string{"advisor", "list", "--idle-threshold", "120%"}, "--idle-threshold"},
		{[]string{"advisor", "list", "-o", "csv"}, "-o"},
	} {
		_, errOut, code := run(t, append(c.args, adminConn...)...)
		if code == 0 || !strings.Contains(errOut, c.flag) {
			t.Errorf("%v: exit %d, %q; want a refusal naming %s", c.args, code, errOut, c.flag)
		}
	}
	for _, c := range [][2]string{{"soon", ""}, {"", "half"}} {
		_, err := admin.Advisor(ctx, c[0], c[1])
		name := "window"
		if c[0] == "" {
			name = "idle_threshold"
		}
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("API window %q threshold %q: %v; want a refusal naming %s", c[0], c[1], err, name)
		}
	}
}
