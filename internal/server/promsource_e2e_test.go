package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/testbin"
)

// latencyExporter publishes request_seconds, a histogram of one service's
// request latencies, in the Prometheus text format: 100 requests, all of
// the latency the test sets (a fresh histogram each time it changes, as
// from a restarted process).
type latencyExporter struct {
	*httptest.Server
	ms atomic.Int64
}

var latencyBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1}

func newLatencyExporter(t *testing.T, ms int64) *latencyExporter {
	e := &latencyExporter{}
	e.ms.Store(ms)
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := float64(e.ms.Load()) / 1000
		var b strings.Builder
		b.WriteString("# HELP request_seconds Request latency.\n# TYPE request_seconds histogram\n")
		for _, le := range latencyBuckets {
			n := 0
			if v <= le {
				n = 100
			}
			fmt.Fprintf(&b, "request_seconds_bucket{service=\"coding-assistant\",le=\"%g\"} %d\n", le, n)
		}
		fmt.Fprintf(&b, "request_seconds_bucket{service=\"coding-assistant\",le=\"+Inf\"} 100\n")
		fmt.Fprintf(&b, "request_seconds_sum{service=\"coding-assistant\"} %g\nrequest_seconds_count{service=\"coding-assistant\"} 100\n", 100*v)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, b.String())
	}))
	t.Cleanup(e.Close)
	return e
}

// startPrometheus starts the real Prometheus (scripts/prometheus.sh, built
// once and cached) scraping target every second, and returns its URL. A
// Prometheus that cannot be built or started fails the test: it must not
// pass by skipping.
func startPrometheus(t *testing.T, target string, flags ...string) string {
	t.Helper()
	script, err := testbin.Script("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "prometheus")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", append([]string{script, "start", dir, target}, flags...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("prometheus.sh stop: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("prometheus.sh start: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// awaitProm queries Prometheus (at the real time) until pred holds for the
// result, polling; it fails the test after a minute.
func awaitProm(t *testing.T, server, query string, pred func([]promSample) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(server + "/api/v1/query?query=" + url.QueryEscape(query))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(body)
			if s, err := parsePromResponse(body); err == nil && pred(s) {
				return
			}
		} else {
			last = err.Error()
		}
		<-time.After(100 * time.Millisecond) // the next poll, not a timing assumption
	}
	t.Fatalf("Prometheus never answered %s as expected; last answer: %s", query, last)
}

// TestPromSourceEndToEnd: the operators' customer_sla_protection rule,
// its p95 latency read from a real Prometheus that scrapes a service's
// latency histogram. The service answers in 20 ms, then in 250 ms: the
// rule fires 5 minutes (its duration) after Prometheus has the change,
// within one interval more; back at 20 ms, it reverts after its
// cooldown, within one interval more. The server's clock is pinned and
// moved a minute per step; each step polls the source and ticks the
// policies.
//
// The pinned clock runs ahead of the real one (a minute per step), and
// the server queries Prometheus at its own clock; so the query reads the
// newest scraped buckets (Prometheus runs with a lookback of 1h) rather
// than a rate over the last minute, which in the future has no samples.
func TestPromSourceEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Prometheus")
	}
	exp := newLatencyExporter(t, 20)
	prom := startPrometheus(t, strings.TrimPrefix(exp.URL, "http://"), "--query.lookback-delta=1h")
	const query = `histogram_quantile(0.95, sum by (le, service) (request_seconds_bucket{job="test"}))`
	p95 := func(cmp func(float64) bool) func([]promSample) bool {
		return func(s []promSample) bool {
			return len(s) == 1 && s[0].Labels["service"] == "coding-assistant" && cmp(s[0].Value)
		}
	}
	fast := p95(func(v float64) bool { return v < 0.150 })
	slow := p95(func(v float64) bool { return v > 0.150 })
	awaitProm(t, prom, query, fast)

	clock := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: clock.Now, RateLimit: -1})
	rules := fmt.Sprintf(`scheduling_policies:
  - name: customer_sla_protection
    conditions:
      - source: prometheus
        server: %s
        query: '%s'
        target_label: service
        target: service:coding-assistant
        threshold: 150ms
        duration: 5m
    actions:
      - type: reallocate
        resources: [tenant:fabrikam]
        priority: high
`, prom, query)
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "sla", Source: rules}); err != nil {
		t.Fatal(err)
	}
	const interval = time.Minute
	step := func() {
		h.s.PollSources(h.ctx)
		h.s.TickPolicies(h.ctx)
		clock.Advance(interval)
	}
	firings := func() []api.Firing {
		fs, err := h.admin.Firings(h.ctx, "sla")
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	value := func() (float64, bool) {
		pr := h.s.policies
		pr.mu.Lock()
		defer pr.mu.Unlock()
		q := pr.engines["sla"].PromQueries()[0]
		return pr.windows.Value(policy.Query{Series: q.Series(), Target: policy.Target{Kind: policy.TargetService, Name: "coding-assistant"}})
	}

	for range 3 {
		step()
	}
	if v, ok := value(); !ok || v >= 0.150 {
		t.Fatalf("at 20 ms the server reads p95 %v (ok %v), want below 150ms", v, ok)
	}
	if fs := firings(); len(fs) != 0 {
		t.Fatalf("fired at 20 ms: %+v", fs)
	}

	exp.ms.Store(250)
	awaitProm(t, prom, query, slow)
	changed := clock.Now()
	var fired *api.Firing
	for i := 0; i <= 6 && fired == nil; i++ {
		step()
		for _, f := range firings() {
			if f.Event == "fired" {
				fired = &f
			}
		}
	}
	if fired == nil {
		t.Fatalf("no firing within 5m plus one interval of the change to 250 ms (p95 read: %v)", must(value()))
	}
	t.Logf("fired %v after Prometheus had 250 ms: %s", fired.Time.Sub(changed), fired.Text)
	if d := fired.Time.Sub(changed); d < 5*time.Minute || d > 5*time.Minute+interval {
		t.Errorf("fired %v after the change, want 5m to 5m plus one interval (%v)", d, interval)
	}
	if !strings.Contains(fired.Text, "customer_sla_protection fired") || !strings.Contains(fired.Text, "reallocate") {
		t.Errorf("firing text %q", fired.Text)
	}

	exp.ms.Store(20)
	awaitProm(t, prom, query, fast)
	recovered := clock.Now()
	var reverted *api.Firing
	for i := 0; i <= 6 && reverted == nil; i++ {
		step()
		for _, f := range firings() {
			if f.Event == "reverted" {
				reverted = &f
			}
		}
	}
	if reverted == nil {
		t.Fatalf("no revert within the cooldown (5m) plus one interval of the recovery")
	}
	t.Logf("reverted %v after Prometheus had 20 ms: %s", reverted.Time.Sub(recovered), reverted.Text)
	if d := reverted.Time.Sub(recovered); d < policy.DefaultCooldown || d > policy.DefaultCooldown+interval {
		t.Errorf("reverted %v after the recovery, want 5m to 5m plus one interval", d)
	}
	if n := counterValue(t, h.s.metrics.promErrors); n != 0 {
		t.Errorf("%v query errors against a healthy Prometheus", n)
	}
}

func must(v float64, _ bool) float64 { return v }
