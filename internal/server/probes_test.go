package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
)

// slowEndpoint answers after the delay it is set to.
type slowEndpoint struct{ delay atomic.Int64 }

func (e *slowEndpoint) set(d time.Duration) { e.delay.Store(int64(d)) }

func (e *slowEndpoint) start(t *testing.T) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(time.Duration(e.delay.Load())):
		case <-r.Context().Done():
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// operatorsSLA is the operators' customer_sla_protection rule as they
// wrote it (no target: the cluster's p95, which every probe feeds).
const operatorsSLA = `scheduling_policies:
  - name: customer_sla_protection
    conditions:
      - metric: p95_latency
        threshold: 150ms
        duration: 5m
    actions:
      - type: reallocate
        resources: [inference]
        priority: high
`

// firstEvent returns the time of the first firing of event for the
// policy's rule, if any.
func firstEvent(h *harness, pol, event string) (time.Time, bool) {
	h.t.Helper()
	fs, err := h.admin.Firings(h.ctx, pol)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range fs {
		if f.Event == event {
			return f.Time, true
		}
	}
	return time.Time{}, false
}

// TestProbeDrivesSLAPolicy is the end-to-end case: an endpoint
// that answers in 20 ms and then in 250 ms is probed by the server; the
// operators' customer_sla_protection rule fires within its 5 minutes plus
// one probe interval after the change, and reverts after the endpoint
// recovers. The server's clock is the test's: each step moves it one
// probe interval, runs the probes that are due and evaluates policies.
func TestProbeDrivesSLAPolicy(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1})
	var ep slowEndpoint
	ep.set(20 * time.Millisecond)
	url := ep.start(t)
	const interval = 30 * time.Second
	ps, err := h.admin.ApplyProbes(h.ctx, api.ProbesApply{File: "probes.yaml", Source: fmt.Sprintf(`probes:
  - name: coding-assistant
    url: %s/v1/complete
    interval: 30s
    timeout: 1s
`, url)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.Items) != 1 || ps.Items[0].Target != "service:coding-assistant" || ps.Items[0].From != "server" {
		t.Fatalf("applied: %+v", ps.Items)
	}
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "ops", Source: operatorsSLA}); err != nil {
		t.Fatal(err)
	}
	step := func() {
		tc.Advance(interval)
		if n := h.s.ProbeNow(h.ctx); n != 1 {
			t.Fatalf("ran %d probes, want 1", n)
		}
		h.s.TickPolicies(h.ctx)
	}
	for range 12 { // six minutes at 20 ms
		step()
	}
	if _, ok := firstEvent(h, "ops", "fired"); ok {
		t.Fatal("fired while the endpoint answered in 20 ms")
	}
	got, err := h.admin.Probes(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := got.Items[0]
	if p.Samples != 10 || p.P95 == nil || time.Duration(*p.P95) < 20*time.Millisecond || time.Duration(*p.P95) > 150*time.Millisecond ||
		p.SuccessRatio == nil || *p.SuccessRatio != 1 || p.Last == nil || !p.Last.OK {
		t.Fatalf("probe after six minutes at 20 ms: %+v", p)
	}

	ep.set(250 * time.Millisecond)
	changed := tc.Now()
	var fired time.Time
	for i := 0; ; i++ {
		step()
		if at, ok := firstEvent(h, "ops", "fired"); ok {
			fired = at
			break
		}
		if i > 20 {
			t.Fatal("never fired at 250 ms")
		}
	}
	if d := fired.Sub(changed); d < 5*time.Minute || d > 5*time.Minute+interval {
		t.Errorf("fired %v after the change, want within the 5m window plus one interval (%v)", d, 5*time.Minute+interval)
	}

	ep.set(20 * time.Millisecond)
	recovered := tc.Now()
	var reverted time.Time
	for i := 0; ; i++ {
		step()
		if at, ok := firstEvent(h, "ops", "reverted"); ok {
			reverted = at
			break
		}
		if i > 40 {
			t.Fatal("never reverted after recovery")
		}
	}
	// The slow samples leave the 5-minute window, then the rule's 5-minute
	// cooldown passes.
	if d := reverted.Sub(recovered); d < 5*time.Minute || d > 10*time.Minute+2*interval {
		t.Errorf("reverted %v after recovery, want between 5m and 10m plus two intervals", d)
	}
	metrics := scrape(t, h)
	if !strings.Contains(metrics, `arbiter_probe_attempts_total{probe="coding-assistant",result="ok"}`) ||
		!strings.Contains(metrics, `arbiter_probe_duration_seconds_count{probe="coding-assistant"}`) {
		t.Error("/metrics lacks the probe's series")
	}
}

// TestProbeDeadEndpoint: an endpoint that never answers counts as slow
// (its timeout) and failing, so p95 rises and success_ratio falls; a
// native rule on success_ratio of the probe's service fires.
func TestProbeDeadEndpoint(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1})
	if _, err := h.admin.ApplyProbes(h.ctx, api.ProbesApply{Source: `probes:
  - name: chat
    url: http://127.0.0.1:1/
    interval: 10s
    timeout: 200ms
`}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "avail", Source: `policies:
  - name: chat_down
    when: {metric: success_ratio, of: service:chat, below: 90%, for: 1m}
    then: [{type: notify, message: chat is failing}]
`}); err != nil {
		t.Fatal(err)
	}
	for range 9 {
		tc.Advance(10 * time.Second)
		h.s.ProbeNow(h.ctx)
		h.s.TickPolicies(h.ctx)
	}
	if _, ok := firstEvent(h, "avail", "fired"); !ok {
		t.Error("success_ratio rule did not fire on a dead endpoint")
	}
	ps, err := h.admin.Probes(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := ps.Items[0]
	if p.SuccessRatio == nil || *p.SuccessRatio != 0 || p.P95 == nil || time.Duration(*p.P95) != 200*time.Millisecond || p.Last == nil || p.Last.OK || p.Last.Error == "" {
		t.Errorf("dead endpoint: %+v last %+v", p, p.Last)
	}
}

// TestProbesHostile: bad probes are refused naming the field; tenants may
// neither read nor change probes; a node reports only its own probes'
// results, within their timeout.
func TestProbesHostile(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1})
	for src, field := range map[string]string{
		"probes:\n  - name: a\n    url: file:///etc/passwd\n":                                       "source.probes[0].url",
		"probes:\n  - name: a\n    url: http://u:p@h/\n":                                            "source.probes[0].url",
		"probes:\n  - name: a\n    url: http://h/\n    interval: 1ms\n":                             "source.probes[0].interval",
		"probes:\n  - name: a\n    url: http://h/\n    body: " + strings.Repeat("x", 70<<10) + "\n": "source.probes[0].body",
	} {
		_, err := h.admin.ApplyProbes(h.ctx, api.ProbesApply{Source: src})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != field {
			t.Errorf("%.60q: %v, want a 400 on %s", src, err, field)
		}
	}
	c := h.tenant("contoso")
	if _, err := c.Probes(h.ctx); !isStatus(err, http.StatusForbidden) {
		t.Errorf("a tenant listed probes: %v", err)
	}
	if _, err := c.ApplyProbes(h.ctx, api.ProbesApply{Source: "probes: []\n"}); !isStatus(err, http.StatusForbidden) {
		t.Errorf("a tenant applied probes: %v", err)
	}

	if _, err := h.admin.ApplyProbes(h.ctx, api.ProbesApply{Source: `probes:
  - name: west
    url: http://10.1.2.3/
    interval: 10s
    timeout: 1s
    from: region:westus2
`}); err != nil {
		t.Fatal(err)
	}
	east, west := fleet.NodeID("eus-a-n0000"), fleet.NodeID("wus-a-n0000")
	if got := h.s.probes.tasksFor(west, "westus2"); len(got) != 1 || got[0].Name != "west" || got[0].HeadersFile != "" {
		t.Errorf("west's tasks: %+v", got)
	}
	if got := h.s.probes.tasksFor(east, "eastus"); len(got) != 0 {
		t.Errorf("east's tasks: %+v", got)
	}
	now := tc.Now()
	// An east node reporting the west probe is ignored; a latency beyond
	// the timeout is refused; a time in the future is taken as now.
	if err := h.s.probes.fromAgent(east, "eastus", []api.ProbeResult{{Probe: "west", At: now, Latency: api.Duration(time.Millisecond), OK: true}}); err != nil {
		t.Fatal(err)
	}
	if ps, _ := h.admin.Probes(h.ctx); ps.Items[0].Samples != 0 {
		t.Errorf("another region's node fed the probe: %+v", ps.Items[0])
	}
	err := h.s.probes.fromAgent(west, "westus2", []api.ProbeResult{{Probe: "west", At: now, Latency: api.Duration(time.Hour), OK: true}})
	if !isStatus(err, http.StatusBadRequest) {
		t.Errorf("a latency of an hour: %v", err)
	}
	if err := h.s.probes.fromAgent(west, "westus2", []api.ProbeResult{{Probe: "west", At: now.Add(time.Hour), Latency: api.Duration(30 * time.Millisecond), OK: true}}); err != nil {
		t.Fatal(err)
	}
	ps, _ := h.admin.Probes(h.ctx)
	if p := ps.Items[0]; p.Samples != 1 || p.Last == nil || p.Last.Node != string(west) || !p.Last.At.Equal(now) {
		t.Errorf("west's report: %+v", p)
	}
	// Too many results at once are refused; a long error is cut.
	flood := make([]api.ProbeResult, maxProbeResults+1)
	for i := range flood {
		flood[i] = api.ProbeResult{Probe: "west", At: now, Latency: api.Duration(time.Millisecond), OK: true}
	}
	if err := h.s.probes.fromAgent(west, "westus2", flood); !isStatus(err, http.StatusBadRequest) {
		t.Errorf("%d results: %v", len(flood), err)
	}
	if err := h.s.probes.fromAgent(west, "westus2", []api.ProbeResult{{Probe: "west", At: now, Latency: api.Duration(time.Second), Error: strings.Repeat("é", 5000)}}); err != nil {
		t.Fatal(err)
	}
	ps, _ = h.admin.Probes(h.ctx)
	if l := ps.Items[0].Last; l == nil || l.OK || len(l.Error) > 200 || !utf8.ValidString(l.Error) || time.Duration(l.Latency) != time.Second {
		t.Errorf("a failed report with a long error: %+v", l)
	}
}

func isStatus(err error, status int) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Status == status
}
