package sim

import (
	"bytes"
	"context"
	"html"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeResults builds Results with synthetic series: rows samples per
// strategy, three tenants (one never used), two services, two spot keys.
func fakeResults(scenario string, rows int) *Results {
	r := &Results{Scenario: scenario, Seed: 42, Days: float64(rows) * SampleEvery.Hours() / 24, GPUs: 100}
	for si, name := range []string{"static", "dynamic", "hybrid"} {
		sr := &StrategyResult{
			Strategy:                    name,
			GPUUtilization:              0.5 + 0.1*float64(si),
			CustomerRequests:            200,
			CustomerCapacityFailures:    30 - 10*si,
			CustomerCapacityFailureRate: float64(30-10*si) / 200,
			CustomerTimeToCapacityP95S:  float64(90 * (si + 1)),
			ReservationHonourRate:       1,
			InferenceSLOAttainment:      0.9 + 0.03*float64(si),
			InferenceP99Ms:              2000 - 300*float64(si),
			TrainingGPUHours:            1000 + 100*float64(si),
			TrainingJCTP50H:             3.25,
			WorkLostGPUHours:            float64(5 * si),
			Preemptions:                 7 * si,
			SpotEvictions:               si,
			Overflows:                   si,
			Fragmentation:               0.1,
			CostUSD:                     12345,
			RevenueUSD:                  20000 + 1000*float64(si),
			CapacityGPUHours:            100 * float64(rows) * SampleEvery.Hours(),
			TrainingJobsCompleted:       4,
			Classes: ClassResults{
				{Name: "sla_vms", Display: "SLA VMs", Promise: PromiseSLA, Kinds: []string{"vm"}, Requests: 200, Patient: 200,
					CapacityFailures: 30 - 10*si, CapacityFailureRate: float64(30-10*si) / 200, CapacityFailuresByReason: map[string]int{"NoCapacity": 30 - 10*si},
					Placed: 170 + 10*si, TimeToCapacityP50S: 60, TimeToCapacityP95S: float64(90 * (si + 1)), GPUHours: 500},
				{Name: "training", Display: "training", Promise: PromiseNone, Kinds: []string{"training"}, Requests: 10, Placed: 10, GPUHours: 1000 + 100*float64(si)},
			},
		}
		se := &sr.Series
		se.Tenants = []string{"internal", "training", "<b>cust&omers</b>"}
		se.Services = []string{"coding-assistant", "chat"}
		se.SLOMs = []float64{8000, 2000}
		se.SpotKeys = []string{"A100/eastus", "H100/westus2"}
		for i := 0; i < rows; i++ {
			ph := 2 * math.Pi * float64(i) / 48
			se.Times = append(se.Times, time.Duration(i)*SampleEvery)
			se.TenantGPUs = append(se.TenantGPUs, []float64{0, 40 + 10*math.Sin(ph), 30 + 5*math.Cos(ph) + float64(si)})
			se.P99Ms = append(se.P99Ms, []float64{3000 + 4000*math.Sin(ph)*math.Sin(ph) + 500*float64(si), 800 + 100*float64(i%7)})
			se.SLOMs = se.SLOMs[:2]
			se.Failures = append(se.Failures, i*(3-si)/10)
			se.TrainingGPU = append(se.TrainingGPU, float64(i)*(10+float64(si)))
			se.Preemptions = append(se.Preemptions, i*si/20)
			se.SpotPrice = append(se.SpotPrice, []float64{1.2 + 0.3*math.Sin(ph), 2.5 + 0.5*math.Cos(ph)})
			se.Utilization = append(se.Utilization, (70+10*math.Sin(ph))/100)
		}
		r.Strategies = append(r.Strategies, sr)
	}
	return r
}

func render(t *testing.T, r *Results) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestReportContent(t *testing.T) {
	r := fakeResults("contention", 96)
	page := render(t, r)
	for _, c := range Columns {
		if !strings.Contains(page, html.EscapeString(c.Label)) {
			t.Errorf("table lacks row %q", c.Label)
		}
		for _, sr := range r.Strategies {
			if v := html.EscapeString(c.Get(sr)); !strings.Contains(page, ">"+v+"</td>") {
				t.Errorf("table lacks %s %s = %q", sr.Strategy, c.Label, v)
			}
		}
	}
	// Best values: hybrid has the fewest failures and the most revenue,
	// static the fewest preemptions; cost is equal and directionless.
	for _, want := range []string{
		`<td class="best">` + html.EscapeString(Columns[1].Get(r.Strategies[2])) + `</td>`,
		`<td class="best">0</td>`,
		`<td class="best">$22000</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(page, `<td class="best">$12345</td>`) {
		t.Error("cost (no direction) highlighted")
	}
	// Comparison: reservation honour rate is n/a (no claims), the fake
	// results carry no per-service latency or economics (n/a or equal),
	// JCT and fragmentation are equal everywhere, so 9 bests. Classes: the
	// SLA VMs' failures and time to capacity p95.
	if n := strings.Count(page, `class="best"`); n != 11 {
		t.Errorf("%d best cells, want 11", n)
	}
	// The classes' table and the glossary, from the metric table.
	for _, s := range []string{`id="classes"`, "SLA VMs: capacity failures", "5.00% (10/200) [NoCapacity 10]", "training: GPU-hours",
		`id="glossary"`, html.EscapeString(Metrics[1].Definition), "classes.NAME.time_to_capacity_p95_s", "spot_usd_per_gpu_h_NAME (CSV)"} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	// One chart per strategy for tenants and spot prices, one per
	// service and strategy (daily bands), four line charts, two class
	// bar charts.
	if got, want := strings.Count(page, "<svg"), 3+2*3+4+3+2; got != want {
		t.Errorf("%d <svg> charts, want %d", got, want)
	}
	for _, s := range []string{"GPUs by tenant", "p99 against the SLO, by day", "p10–p90 of the day", `id="strategies"`, "capacity failures by class", "time to capacity p95 by class", "Customer capacity failures", "Training progress", "Preemptions", "Spot price", "GPU utilization", "SLO 8 s", "SLO 2 s", "A100/eastus", "seed <b>42</b>", "<b>100</b> GPUs", "<b>2</b> days"} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if strings.Contains(page, ">internal</span>") {
		t.Error("a tenant that never held a GPU is in the legend")
	}
	for _, ref := range []string{"http://", "https://", "<script", "<link", "@import", "url("} {
		if strings.Contains(page, ref) {
			t.Errorf("page contains %q", ref)
		}
	}
}

func TestReportDeterministic(t *testing.T) {
	a := render(t, fakeResults("contention", 200))
	b := render(t, fakeResults("contention", 200))
	if a != b {
		t.Fatal("same Results, different pages")
	}
}

func TestReportEscapes(t *testing.T) {
	hostile := `<script>alert("x")</script>&`
	r := fakeResults(hostile, 10)
	r.Strategies[0].Strategy = `"><img src=x onerror=alert(1)>`
	page := render(t, r)
	for _, raw := range []string{"<script>", "<img", "<b>cust"} {
		if strings.Contains(page, raw) {
			t.Errorf("page contains unescaped %q", raw)
		}
	}
	for _, escaped := range []string{html.EscapeString(hostile), "&lt;b&gt;cust&amp;omers&lt;/b&gt;", "&#34;&gt;&lt;img src=x"} {
		if !strings.Contains(page, escaped) {
			t.Errorf("page lacks escaped %q", escaped)
		}
	}
}

// A 30-day run: every drawn path stays within the point budget and the
// page stays small.
func TestReportDownsamples(t *testing.T) {
	page := render(t, fakeResults("contention", 30*48))
	paths := regexp.MustCompile(`<path d="([^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(paths) == 0 {
		t.Fatal("no paths")
	}
	for _, p := range paths {
		if n := strings.Count(p[1], "L") + strings.Count(p[1], "M"); n > maxPoints+2 {
			t.Fatalf("a path with %d points", n)
		}
	}
	if len(page) > 2<<20 {
		t.Errorf("page is %d bytes", len(page))
	}
	t.Logf("%d bytes, %d paths", len(page), len(paths))
}

func TestReportEmpty(t *testing.T) {
	page := render(t, &Results{Scenario: "empty"})
	if !strings.Contains(page, "</html>") {
		t.Fatal("page not finished")
	}
	r := fakeResults("no series", 0)
	r.Strategies[1].Series = Series{}
	page = render(t, r)
	if regexp.MustCompile(`NaN|[^A-Za-z]Inf\b`).MatchString(page) {
		t.Error("NaN or Inf in an empty page")
	}
}

func TestTicks(t *testing.T) {
	for _, c := range []struct {
		v, step float64
		want    string
	}{{0, 5, "0"}, {2500, 500, "2.5k"}, {10000, 2000, "10k"}, {0.30000000000000004, 0.1, "0.3"}, {1.5e6, 5e5, "1.5M"}, {25, 5, "25"}} {
		if got := fmtTick(c.v, c.step); got != c.want {
			t.Errorf("fmtTick(%v, %v) = %q, want %q", c.v, c.step, got, c.want)
		}
	}
	for _, c := range []struct{ span, want float64 }{{30, 5}, {1, 0.2}, {9400, 2000}, {0.04, 0.01}} {
		n := 5
		if c.span == 30 || c.span == 1 {
			n = 8
		}
		if got := niceStep(c.span, n); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("niceStep(%v, %d) = %v, want %v", c.span, n, got, c.want)
		}
	}
}

// TestReportScreenshot renders the page with headless Chromium where it is
// installed (it is not in CI). Set ARBITER_REPORT_OUT to keep the page
// and the screenshot.
func TestReportScreenshot(t *testing.T) {
	screenshot(t, fakeResults("contention", 30*48))
}

// TestReportRealRun writes a report from a real run of the embedded
// scenario, for a look at it: ARBITER_REPORT_OUT=DIR and optionally
// ARBITER_REPORT_DAYS (default 2).
func TestReportRealRun(t *testing.T) {
	if os.Getenv("ARBITER_REPORT_OUT") == "" {
		t.Skip("ARBITER_REPORT_OUT not set")
	}
	days := 2
	if d, err := strconv.Atoi(os.Getenv("ARBITER_REPORT_DAYS")); err == nil {
		days = d
	}
	r := &Results{Scenario: "contention", Seed: 1, Days: float64(days)}
	for _, name := range []string{"static", "dynamic", "hybrid"} {
		r.Strategies = append(r.Strategies, runShort(t, name, days, 1))
	}
	r.GPUs = int(math.Round(r.Strategies[0].CapacityGPUHours / (24 * float64(days))))
	screenshot(t, r)
}

func screenshot(t *testing.T, r *Results) {
	const chromium = "/usr/bin/chromium"
	out := os.Getenv("ARBITER_REPORT_OUT")
	if out == "" {
		out = t.TempDir()
	}
	page := filepath.Join(out, "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no " + chromium)
	}
	abs, err := filepath.Abs(page)
	if err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(out, "report.png")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--screenshot="+png, "--window-size=1400,3000", "file://"+abs)
	cmd.Env = append(os.Environ(), "DBUS_SESSION_BUS_ADDRESS=disabled:")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, b)
	}
	st, err := os.Stat(png)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < 10000 {
		t.Errorf("screenshot is only %d bytes", st.Size())
	}
	t.Logf("%s: %d bytes", png, st.Size())
}
