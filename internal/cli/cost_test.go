package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/server"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata (cost_report.golden, advisor.golden) from the run")

// checkGolden compares got with testdata/name, rewriting it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update if intended):\n%s", path, got)
	}
}

const costWorld = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: a1
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 3}]
    - name: westus2
      zones:
        - name: "1"
          blocks:
            - name: w1
              nodes: [{sku: Standard_NC24ads_A100_v4, count: 2}]
tenants:
  - name: org
  - name: acme
    parent: org
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 8, limit: 24}
      - {flavor: A100-80G, region: westus2, limit: 2}
  - name: beta
    parent: org
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 4, limit: 16}
`

// costClock is a clock the test moves.
type costClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *costClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *costClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

var costT0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

// costServer runs a seeded day of work on a live server on a pinned clock
// and returns its URL: acme trains 8 GPUs within its guarantee for 2 h
// (then cancelled), borrows 8 more for 3 h, runs 2 GPUs in westus2 and
// 8 on its reservation; beta runs spot work and inference.
func costServer(t *testing.T) (url string, s *server.Server, clk *costClock) {
	t.Helper()
	return costServerWith(t, costWorld, server.Options{})
}

// costServerWith is costServer on world with options o (its clock
// replaced).
func costServerWith(t *testing.T, world string, o server.Options) (url string, s *server.Server, clk *costClock) {
	t.Helper()
	clk = &costClock{now: costT0}
	o.Clock = clk.Now
	s, _, url = seededServerWith(t, world, o)
	ctx := context.Background()
	admin := client.New(url, testAdmin)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := admin.CreateReservation(ctx, "acme", api.ReservationRequest{Name: "r1", SKU: "Standard_ND96amsr_A100_v4", Capacity: 1, Region: "eastus"})
	must(err)
	sub := func(tenant string, w api.WorkloadSpec) {
		t.Helper()
		if len(w.Flavors) == 0 {
			w.Flavors = []string{"A100-80G"}
		}
		if len(w.Regions) == 0 {
			w.Regions = []string{"eastus"}
		}
		_, err := admin.Submit(ctx, tenant, w)
		must(err)
	}
	sub("acme", api.WorkloadSpec{Name: "train", Kind: "training", GPUs: 8000, Priority: "high", Labels: map[string]string{"class": "research"}})
	sub("acme", api.WorkloadSpec{Name: "on-resv", Kind: "training", GPUs: 8000, Reservation: "r1"})
	sub("acme", api.WorkloadSpec{Name: "west", Kind: "batch", GPUs: 1000, Replicas: 2, Regions: []string{"westus2"}})
	sub("beta", api.WorkloadSpec{Name: "spotty", Kind: "batch", GPUs: 2000, Priority: "spot", Preemptible: true})
	sub("beta", api.WorkloadSpec{Name: "serve", Kind: "inference", GPUs: 500, Labels: map[string]string{"class": "prod"}})
	s.Cycle(ctx)
	clk.Advance(time.Hour)
	sub("acme", api.WorkloadSpec{Name: "borrow", Kind: "batch", GPUs: 4000})
	s.Cycle(ctx)
	clk.Advance(time.Hour)
	_, err = admin.Cancel(ctx, "acme", "train")
	must(err)
	s.Cycle(ctx)
	clk.Advance(2 * time.Hour)
	_, err = admin.Cancel(ctx, "beta", "spotty")
	must(err)
	s.Cycle(ctx)
	clk.Advance(time.Hour)
	return url, s, clk
}

// TestCostReportGolden: the report (table, CSV, JSON) and the FOCUS export
// of a seeded run, against testdata/cost_report.golden (-update rewrites
// it); the totals add up; open runs count up to --until.
func TestCostReportGolden(t *testing.T) {
	url, _, _ := costServer(t)
	conn := []string{"--server", url, "--token", testAdmin}
	win := []string{"--since", costT0.Format(time.RFC3339), "--until", costT0.Add(5 * time.Hour).Format(time.RFC3339)}
	var golden strings.Builder
	for _, args := range [][]string{
		{"cost", "report", "--group-by", "tenant,kind"},
		{"cost", "report", "--group-by", "tenant,charge", "-o", "csv"},
		{"cost", "report", "--group-by", "region,sku", "-o", "json"},
		{"cost", "export", "-o", "csv"},
	} {
		out, errOut, code := run(t, append(append(args, win...), conn...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		golden.WriteString("$ arbiter " + strings.Join(args, " ") + "\n" + out + "\n")
	}
	checkGolden(t, "cost_report.golden", golden.String())

	// The JSON report's rows add up to its total, and the total is the
	// GPU-hours of the run worked out by hand: train 8×2h, on-resv 8×5h,
	// west 2×5h, spotty 2×4h, serve 0.5×5h, borrow 4×4h.
	out, errOut, code := run(t, append(append([]string{"cost", "report", "--group-by", "workload", "-o", "json"}, win...), conn...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep meter.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	wantH := map[string]float64{"acme/train": 16, "acme/on-resv": 40, "acme/west": 10, "beta/spotty": 8, "beta/serve": 2.5, "acme/borrow": 16}
	sum := 0.0
	for _, r := range rep.Rows {
		if w := wantH[r.Keys[0]]; !near(r.GPUHours, w) {
			t.Errorf("%s: %.4f GPU-hours, want %.4f", r.Keys[0], r.GPUHours, w)
		}
		sum += r.GPUHours
	}
	if len(rep.Rows) != len(wantH) || !near(sum, rep.Total.GPUHours) || !near(sum, 92.5) {
		t.Errorf("%d rows summing to %.4f, total %.4f; want %d rows and 92.5", len(rep.Rows), sum, rep.Total.GPUHours, len(wantH))
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-6 && d > -1e-6 }

// TestCostTenantIsolationAndBadInput: a tenant's report and export show
// its own records only (the report: its subtree's, so the parent org sees
// both children and the same totals as the admin); bad --since, --until, --group-by and -o values
// are refused naming the flag, as are the API's bad since and until.
func TestCostTenantIsolationAndBadInput(t *testing.T) {
	url, _, _ := costServer(t)
	admin := client.New(url, testAdmin)
	tok, err := admin.CreateToken(context.Background(), "beta", "cost")
	if err != nil {
		t.Fatal(err)
	}
	beta := []string{"--server", url, "--token", tok.Secret}
	win := []string{"--since", costT0.Format(time.RFC3339), "--until", costT0.Add(5 * time.Hour).Format(time.RFC3339)}
	out, errOut, code := run(t, append(append([]string{"cost", "export", "-o", "csv"}, win...), beta...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// serve's record and spotty's, split where the spot market's price
	// changed (docs/cost.md, "Spot prices as they change").
	ids := map[string]bool{}
	for _, r := range rows[1:] {
		ids[r[slices.Index(rows[0], "ResourceId")]] = true
	}
	if len(rows) < 3 || len(ids) != 2 || !ids["beta/serve/0"] || !ids["beta/spotty/0"] {
		t.Errorf("beta's export has records of %v, want beta/serve/0 and beta/spotty/0:\n%s", ids, out)
	}
	if strings.Contains(out, "acme") {
		t.Errorf("beta's export shows acme's records:\n%s", out)
	}
	out, errOut, code = run(t, append(append([]string{"cost", "report", "--group-by", "tenant"}, win...), beta...)...)
	if code != 0 || strings.Contains(out, "acme") || !strings.Contains(out, "beta") {
		t.Errorf("beta's report (exit %d, %s):\n%s", code, errOut, out)
	}
	// Asking the admin's way for acme (--tenant) does not widen a tenant
	// token's view: the server filters.
	out, _, _ = run(t, append(append([]string{"cost", "report", "--tenant", "acme"}, win...), beta...)...)
	if strings.Contains(out, "acme") {
		t.Errorf("beta with --tenant acme sees acme:\n%s", out)
	}
	// Nor does naming its parent: beta's token asking for org's subtree
	// gets nothing (org is not in beta's subtree).
	out, errOut, code = run(t, append(append([]string{"cost", "report", "--tenant", "org", "-o", "csv"}, win...), beta...)...)
	if code != 0 || strings.Contains(out, "acme") || strings.Contains(out, "beta") {
		t.Errorf("beta with --tenant org (exit %d, %s):\n%s", code, errOut, out)
	}
	// The parent's token sees its subtree: both children, and the same
	// totals as the admin's report.
	orgTok, err := admin.CreateToken(context.Background(), "org", "cost")
	if err != nil {
		t.Fatal(err)
	}
	org := []string{"--server", url, "--token", orgTok.Secret}
	adminConn := []string{"--server", url, "--token", testAdmin}
	orgOut, errOut, code := run(t, append(append([]string{"cost", "report", "--group-by", "tenant"}, win...), org...)...)
	if code != 0 || !strings.Contains(orgOut, "acme") || !strings.Contains(orgOut, "beta") {
		t.Errorf("org's report (exit %d, %s):\n%s", code, errOut, orgOut)
	}
	adminOut, _, _ := run(t, append(append([]string{"cost", "report", "--group-by", "tenant"}, win...), adminConn...)...)
	if orgOut != adminOut {
		t.Errorf("org's report differs from the admin's:\n%s\nadmin:\n%s", orgOut, adminOut)
	}
	// The admin's --tenant acme: acme's subtree only.
	out, _, _ = run(t, append(append([]string{"cost", "report", "--tenant", "acme"}, win...), adminConn...)...)
	if !strings.Contains(out, "acme") || strings.Contains(out, "beta") {
		t.Errorf("admin with --tenant acme:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"cost", "report", "--since", "yesterday"}, "--since"},
		{[]string{"cost", "report", "--since", "-3d"}, "--since"},
		{[]string{"cost", "report", "--until", "2026-13-01"}, "--until"},
		{[]string{"cost", "report", "--since", "1h", "--until", "2h"}, "--since"},
		{[]string{"cost", "report", "--group-by", "tenant,colour"}, "--group-by"},
		{[]string{"cost", "report", "--group-by", "tenant,tenant"}, "--group-by"},
		{[]string{"cost", "report", "-o", "yaml"}, "-o"},
		{[]string{"cost", "export", "-o", "table"}, "-o"},
	} {
		_, errOut, code := run(t, append(c.args, adminConn...)...)
		if code == 0 || !strings.Contains(errOut, c.flag) {
			t.Errorf("%v: exit %d, %q; want a refusal naming %s", c.args, code, errOut, c.flag)
		}
	}
	for _, q := range []struct{ query, field string }{{"since=soon", "since"}, {"until=3x", "until"}, {"since=1h&until=2h", "since"}} {
		err := admin.Do(context.Background(), "GET", "/v1/usage-records?"+q.query, nil, nil)
		ae, ok := err.(*api.Error)
		if !ok || ae.Status != 400 || ae.Field != q.field {
			t.Errorf("GET /v1/usage-records?%s: %v, want 400 naming %s", q.query, err, q.field)
		}
	}
	for _, q := range []struct{ query, field string }{{"since=soon", "since"}, {"until=3x", "until"}, {"group_by=colour", "group_by"},
		{"group_by=tenant,tenant", "group_by"}, {"tenant=../x", "tenant"}, {"tenant=" + strings.Repeat("a", 300), "tenant"}} {
		err := admin.Do(context.Background(), "GET", "/v1/cost-report?"+q.query, nil, nil)
		ae, ok := err.(*api.Error)
		if !ok || ae.Status != 400 || ae.Field != q.field {
			t.Errorf("GET /v1/cost-report?%s: %v, want 400 naming %s", q.query, err, q.field)
		}
	}
}

// TestCostReportPricePlans: the same day of work on a server whose config
// has a metering section: org's 25% discount covers acme (its child), beta
// pays a flat transfer price, and an override raises the eastus on-demand
// price of the A100 SKU. The report's list cost follows the override,
// acme's cost is a quarter off its charges' prices, beta's is the
// transfer price times its GPU-hours; the FOCUS export's contracted cost
// is the discounted list cost.
func TestCostReportPricePlans(t *testing.T) {
	world := costWorld + `metering:
  prices:
    - {sku: Standard_ND96amsr_A100_v4, region: eastus, on_demand: 40}
  plans:
    - {tenant: org, discount: 25%}
    - {tenant: beta, transfer_price: 2}
`
	cfg, err := config.Parse("world.yaml", []byte(world))
	if err != nil {
		t.Fatal(err)
	}
	planned, _, _ := costServerWith(t, world, server.Options{Pricing: cfg.Metering.Pricing})
	plain, _, _ := costServer(t)
	win := []string{"--since", costT0.Format(time.RFC3339), "--until", costT0.Add(5 * time.Hour).Format(time.RFC3339)}
	report := func(url, by string) meter.Report {
		t.Helper()
		out, errOut, code := run(t, append(append([]string{"cost", "report", "--group-by", by, "-o", "json"}, win...), "--server", url, "--token", testAdmin)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var rep meter.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	got, base := report(planned, "tenant,region"), report(plain, "tenant,region")
	if len(got.Rows) != len(base.Rows) {
		t.Fatalf("%d rows, want %d", len(got.Rows), len(base.Rows))
	}
	for i, r := range got.Rows {
		b := base.Rows[i]
		tenant, region := r.Keys[0], r.Keys[1]
		if !near(r.GPUHours, b.GPUHours) {
			t.Errorf("%v: %v GPU-hours, want %v", r.Keys, r.GPUHours, b.GPUHours)
		}
		wantList := b.ListCost
		if region == "eastus" {
			wantList = r.GPUHours * 5 // 40 USD a machine-hour of 8 GPUs
		}
		if !near(r.ListCost, wantList) {
			t.Errorf("%v: list cost %v, want %v", r.Keys, r.ListCost, wantList)
		}
		switch tenant {
		case "beta":
			if !near(r.Cost, 2*r.GPUHours) {
				t.Errorf("%v: cost %v, want the transfer price 2 × %v GPU-hours", r.Keys, r.Cost, r.GPUHours)
			}
		case "acme":
			if region == "westus2" && !near(r.Cost, 0.75*b.Cost) {
				t.Errorf("%v: cost %v, want 75%% of %v", r.Keys, r.Cost, b.Cost)
			}
			if region == "eastus" && !(r.Cost < 0.75*r.ListCost+1e-6) {
				t.Errorf("%v: cost %v above 75%% of the list cost %v", r.Keys, r.Cost, r.ListCost)
			}
		}
	}
	out, errOut, code := run(t, append(append([]string{"cost", "export", "-o", "json"}, win...), "--server", planned, "--token", testAdmin)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []meter.FOCUS
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	for _, x := range rows {
		want := 0.75 * x.ListCost
		if x.SubAccountId == "beta" {
			want = x.BilledCost
		}
		if !near(x.ContractedCost, want) || x.EffectiveCost != x.BilledCost {
			t.Errorf("%s: contracted %v (want %v), effective %v, billed %v, list %v", x.ResourceId, x.ContractedCost, want, x.EffectiveCost, x.BilledCost, x.ListCost)
		}
	}
}
