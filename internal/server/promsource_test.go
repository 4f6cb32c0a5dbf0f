package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/policy"
)

func TestParsePromResponse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		want   []promSample
		reason string // "" for success
	}{
		{"vector", `{"status":"success","data":{"resultType":"vector","result":[
			{"metric":{"service":"chat"},"value":[1700000000.5,"0.25"]},
			{"metric":{"service":"code"},"value":[1700000000.5,"0.02"]}]}}`,
			[]promSample{{map[string]string{"service": "chat"}, 0.25}, {map[string]string{"service": "code"}, 0.02}}, ""},
		{"scalar", `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"3"]}}`,
			[]promSample{{map[string]string{}, 3}}, ""},
		{"empty", `{"status":"success","data":{"resultType":"vector","result":[]}}`, []promSample{}, ""},
		{"NaN and Inf are no data", `{"status":"success","data":{"resultType":"vector","result":[
			{"metric":{"a":"1"},"value":[1,"NaN"]},{"metric":{"a":"2"},"value":[1,"+Inf"]},{"metric":{"a":"3"},"value":[1,"1.5"]}]}}`,
			[]promSample{{map[string]string{"a": "3"}, 1.5}}, ""},
		{"NaN scalar", `{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}`, nil, ""},
		{"error status", `{"status":"error","errorType":"bad_data","error":"parse error at char 5"}`, nil, promErrStatus},
		{"matrix", `{"status":"success","data":{"resultType":"matrix","result":[]}}`, nil, promErrInvalid},
		{"string", `{"status":"success","data":{"resultType":"string","result":[1,"x"]}}`, nil, promErrInvalid},
		{"not JSON", `<html>502 Bad Gateway</html>`, nil, promErrInvalid},
		{"value not a number", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"fast"]}]}}`, nil, promErrInvalid},
		{"value not a string", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}}`, nil, promErrInvalid},
		{"short pair", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}`, nil, promErrInvalid},
		{"oversized", `{"status":"success","data":{"resultType":"vector","result":[` + strings.Repeat(" ", promMaxBody) + `]}}`, nil, promErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePromResponse([]byte(tc.body))
			if tc.reason != "" {
				var pe *promError
				if !errors.As(err, &pe) || pe.reason != tc.reason {
					t.Fatalf("err = %v, want reason %s", err, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPromTargets(t *testing.T) {
	svc := func(n string) policy.Target { return policy.Target{Kind: policy.TargetService, Name: n} }
	byService := policy.PromQuery{TargetLabel: "service", TargetKind: policy.TargetService}
	samples := []promSample{
		{map[string]string{"service": "chat"}, 0.25},
		{map[string]string{"service": "code"}, 0.02},
		{map[string]string{"job": "no-service"}, 9},
		{map[string]string{"service": "bad name!"}, 9},
		{map[string]string{"service": "twice", "le": "1"}, 1},
		{map[string]string{"service": "twice", "le": "2"}, 2},
	}
	got, err := promTargets(byService, samples)
	if err != nil {
		t.Fatal(err)
	}
	// "twice" is named by two series: which is meant is unknown, so none.
	if diff := cmp.Diff(map[policy.Target]float64{svc("chat"): 0.25, svc("code"): 0.02}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	cluster := policy.PromQuery{}
	if got, err := promTargets(cluster, samples[:1]); err != nil || !cmp.Equal(got, map[policy.Target]float64{policy.Cluster: 0.25}) {
		t.Errorf("one series: %v, %v; want the cluster's", got, err)
	}
	if got, err := promTargets(cluster, nil); err != nil || len(got) != 0 {
		t.Errorf("no series: %v, %v; want no data", got, err)
	}
	var pe *promError
	if _, err := promTargets(cluster, samples[:2]); !errors.As(err, &pe) || pe.reason != promErrShape {
		t.Errorf("two series without target_label: %v, want a shape error", err)
	}
}

// FuzzParsePromResponse: any answer parses or fails with a reason, never
// panics, and what parses holds only finite values, within the bounds.
func FuzzParsePromResponse(f *testing.F) {
	f.Add(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"service":"chat"},"value":[1700000000.5,"0.25"]}]}}`)
	f.Add(`{"status":"success","data":{"resultType":"scalar","result":[1700000000,"NaN"]}}`)
	f.Add(`{"status":"error","errorType":"timeout","error":"query timed out"}`)
	f.Add(`{"status":"success","data":{"resultType":"vector","result":[{"metric":null,"value":null}]}}`)
	f.Add(`{"status":"success","data":{"resultType":"scalar","result":{}}}`)
	f.Fuzz(func(t *testing.T, body string) {
		got, err := parsePromResponse([]byte(body))
		if err != nil {
			var pe *promError
			if !errors.As(err, &pe) || pe.reason == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if len(got) > promMaxSamples {
			t.Fatalf("%d samples", len(got))
		}
		for _, s := range got {
			if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
				t.Fatalf("non-finite value %v", s.Value)
			}
		}
		_, _ = promTargets(policy.PromQuery{TargetLabel: "service", TargetKind: policy.TargetService}, got)
	})
}

// fakeProm is a Prometheus HTTP API on loopback whose answers the test
// sets: the /api/v1/query requests it got are kept.
type fakeProm struct {
	*httptest.Server
	mu     sync.Mutex
	answer func(w http.ResponseWriter, r *http.Request)
	times  []string
}

func newFakeProm(t *testing.T) *fakeProm {
	fp := &fakeProm{}
	fp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || r.Method != http.MethodPost || r.FormValue("query") == "" {
			t.Errorf("fake Prometheus got %s %s query %q", r.Method, r.URL.Path, r.FormValue("query"))
		}
		fp.mu.Lock()
		fp.times = append(fp.times, r.FormValue("time"))
		answer := fp.answer
		fp.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(fp.Close)
	return fp
}

func (fp *fakeProm) set(answer func(w http.ResponseWriter, r *http.Request)) {
	fp.mu.Lock()
	fp.answer = answer
	fp.mu.Unlock()
}

func vectorAnswer(service string, v float64) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"service":%q},"value":[1,"%g"]}]}}`, service, v)
	}
}

// counterValue reads one series of a counter or a histogram's count.
func counterValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	c.Collect(ch)
	close(ch)
	total := 0.0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Counter != nil:
			total += d.Counter.GetValue()
		case d.Histogram != nil:
			total += float64(d.Histogram.GetSampleCount())
		}
	}
	return total
}

func slaPolicy(server, noData string) string {
	return fmt.Sprintf(`policies:
  - name: protect
    when:
      source: prometheus
      server: %s
      query: histogram_quantile(0.95, sum by (le, service) (rate(request_seconds_bucket[1m])))
      target_label: service
      of: service:coding-assistant
      above: 150ms
      for: 5m
      no_data: %s
    then:
      - {type: set_priority, target: tenant:fabrikam, priority: high}
`, server, noData)
}

// events lists a policy's firings as "minute:event", minutes from t0.
func firingMinutes(t *testing.T, h *harness, name string, t0 time.Time) []string {
	t.Helper()
	fs, err := h.admin.Firings(h.ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%d:%s", int(f.Time.Sub(t0)/time.Minute), f.Event))
	}
	return out
}

// TestPromSourceDrivesRule: the server runs the policy's query at its own
// clock, maps the result's service label to targets, and the rule fires
// once the value held for its 5 minutes; a failing Prometheus is no data,
// which with no_data: false is not "below the threshold" but clears the
// rule's duration, and is counted.
func TestPromSourceDrivesRule(t *testing.T) {
	fp := newFakeProm(t)
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1})
	fp.set(vectorAnswer("coding-assistant", 0.250))
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "sla", Source: slaPolicy(fp.URL, "false")}); err != nil {
		t.Fatal(err)
	}
	t0 := tc.Now()
	step := func() {
		h.s.PollSources(h.ctx)
		h.s.TickPolicies(h.ctx)
		tc.Advance(time.Minute)
	}
	for range 3 { // minutes 0-2: 250ms
		step()
	}
	fp.set(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}`)
	})
	step() // minute 3: failed, no data
	fp.set(vectorAnswer("coding-assistant", 0.250))
	for range 7 { // minutes 4-10
		step()
	}
	// Held from minute 4 (minute 3 broke it): fires at 9, not at 5.
	if got, want := firingMinutes(t, h, "sla", t0), []string{"9:fired"}; !cmp.Equal(got, want) {
		t.Errorf("firings %v, want %v", got, want)
	}
	if n := counterValue(t, h.s.metrics.promErrors); n != 1 {
		t.Errorf("arbiter_prometheus_query_errors_total = %v, want 1", n)
	}
	if n := counterValue(t, h.s.metrics.promQuery); n != 11 {
		t.Errorf("arbiter_prometheus_query_duration_seconds count = %v, want 11", n)
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if want := fmt.Sprintf("%.3f", float64(t0.UnixMilli())/1000); len(fp.times) == 0 || fp.times[0] != want {
		t.Errorf("first query at time=%v, want the server's clock %s", fp.times, want)
	}
}

// TestPromSourceNoData: with no_data: true a Prometheus that answers
// nothing for the target (another service's series only) holds the
// rule; with hold, the rule keeps the state the last value gave it.
func TestPromSourceNoData(t *testing.T) {
	for _, tc := range []struct {
		noData string
		want   []string
	}{
		{"true", []string{"5:fired"}},
		{"hold", []string{"5:fired"}},
		{"false", nil},
	} {
		t.Run(tc.noData, func(t *testing.T) {
			fp := newFakeProm(t)
			clock := newTestClock()
			h := newHarness(t, testConfig, Options{Clock: clock.Now, RateLimit: -1})
			fp.set(vectorAnswer("coding-assistant", 0.250))
			if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "sla", Source: slaPolicy(fp.URL, tc.noData)}); err != nil {
				t.Fatal(err)
			}
			t0 := clock.Now()
			for i := range 7 {
				if i == 1 { // from minute 1, only another service's series
					fp.set(vectorAnswer("other", 0.250))
				}
				h.s.PollSources(h.ctx)
				h.s.TickPolicies(h.ctx)
				clock.Advance(time.Minute)
			}
			if got := firingMinutes(t, h, "sla", t0); !cmp.Equal(got, tc.want) {
				t.Errorf("no_data %s: firings %v, want %v", tc.noData, got, tc.want)
			}
		})
	}
}

// TestPromSourceStale: a result older than two policy intervals (the
// poller stopped) is no data.
func TestPromSourceStale(t *testing.T) {
	fp := newFakeProm(t)
	clock := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: clock.Now, RateLimit: -1, PolicyInterval: 10 * time.Second})
	fp.set(vectorAnswer("coding-assistant", 0.250))
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "sla", Source: slaPolicy(fp.URL, "true")}); err != nil {
		t.Fatal(err)
	}
	q := h.s.policies.promQueries()
	if len(q) != 1 {
		t.Fatalf("queries %v", q)
	}
	h.s.PollSources(h.ctx)
	read := func() (float64, bool) {
		pr := h.s.policies
		pr.mu.Lock()
		defer pr.mu.Unlock()
		pr.windows.Advance(clock.Now())
		return pr.windows.Value(policy.Query{Series: q[0].Series(), Target: policy.Target{Kind: policy.TargetService, Name: "coding-assistant"}})
	}
	clock.Advance(20 * time.Second)
	if v, ok := read(); !ok || v != 0.250 {
		t.Errorf("20s after the poll: %v, %v; want 0.25", v, ok)
	}
	clock.Advance(time.Second)
	if v, ok := read(); ok {
		t.Errorf("21s after the poll (two intervals): %v, want no data", v)
	}
}

// TestPromSourceHangingServer: a Prometheus that never answers does not
// hold up the policy tick, which runs while the query hangs and reads no
// data; the query ends at its timeout and is counted as one.
func TestPromSourceHangingServer(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	clock := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: clock.Now, RateLimit: -1})
	h.s.prom.timeout = 300 * time.Millisecond
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "sla", Source: slaPolicy(hang.URL, "false")}); err != nil {
		t.Fatal(err)
	}
	polled := make(chan struct{})
	go func() {
		h.s.PollSources(context.Background())
		close(polled)
	}()
	<-entered
	// The query hangs; the tick does not wait for it.
	h.s.TickPolicies(h.ctx)
	select {
	case <-polled:
		t.Fatal("the poll ended before the hanging query timed out")
	default:
	}
	<-polled
	pr := h.s.policies
	pr.mu.Lock()
	st := pr.active["sla"]
	pr.mu.Unlock()
	if len(st) != 0 {
		t.Errorf("actions in force without data: %v", st)
	}
	var d dto.Metric
	if err := h.s.metrics.promErrors.WithLabelValues(hang.URL, promErrTimeout).Write(&d); err != nil || d.Counter.GetValue() != 1 {
		t.Errorf("timeouts counted: %v (%v), want 1", d.Counter.GetValue(), err)
	}
}

// TestPromSourceHostileAnswers: an answer larger than the bound, a
// redirect elsewhere and a non-Prometheus error page are failures (no
// data), each counted with its reason.
func TestPromSourceHostileAnswers(t *testing.T) {
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the redirect was followed")
	}))
	t.Cleanup(elsewhere.Close)
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
	}{
		{"oversized", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[`)
			chunk := strings.Repeat(" ", 64<<10)
			for i := 0; i < promMaxBody/len(chunk)+2; i++ {
				if _, err := fmt.Fprint(w, chunk); err != nil {
					return
				}
			}
		}},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+"/api/v1/query", http.StatusTemporaryRedirect)
		}},
		{"error page", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "<html>bad gateway</html>")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := newFakeProm(t)
			fp.set(tc.answer)
			h := newHarness(t, testConfig, Options{RateLimit: -1})
			if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "sla", Source: slaPolicy(fp.URL, "false")}); err != nil {
				t.Fatal(err)
			}
			h.s.PollSources(h.ctx)
			var d dto.Metric
			if err := h.s.metrics.promErrors.WithLabelValues(fp.URL, promErrInvalid).Write(&d); err != nil || d.Counter.GetValue() != 1 {
				t.Errorf("%s: invalid answers counted %v, want 1", tc.name, d.Counter.GetValue())
			}
		})
	}
}

// TestPromSourceRefusedAtApply: a policy naming a hostile server or an
// oversized query is refused at apply with the field named.
func TestPromSourceRefusedAtApply(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	for _, tc := range []struct{ server, query, want string }{
		{"http://admin:pw@127.0.0.1:9090", "up", "source.policies[0].when.server"},
		{"gopher://127.0.0.1", "up", "source.policies[0].when.server"},
		{"http://127.0.0.1:9090", strings.Repeat("x", policy.MaxPromQueryLen+1), "source.policies[0].when.query"},
	} {
		src := fmt.Sprintf("policies:\n  - name: r\n    when: {source: prometheus, server: %q, query: %q, above: 1}\n    then: [{type: set_priority, target: tenant:fabrikam, priority: high}]\n", tc.server, tc.query)
		_, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "bad", Source: src})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Field != tc.want {
			t.Errorf("server %q: err %v, want a 400 naming %s", tc.server, err, tc.want)
		}
	}
}

// TestPromSourceAlert: an alert rule reading a Prometheus query gets the
// server's poll of it: split by service, the slow service's alert fires
// with its value; a failing Prometheus leaves it fired (no data), and it
// resolves once the service is fast again.
func TestPromSourceAlert(t *testing.T) {
	fp := newFakeProm(t)
	fp.set(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[
			{"metric":{"service":"chat"},"value":[1,"0.25"]},{"metric":{"service":"code"},"value":[1,"0.02"]}]}}`)
	})
	hookURL, got := webhookSink(t)
	clock := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: clock.Now, RateLimit: -1})
	rules := `webhook: ` + hookURL + `
rules:
  - name: slow-service
    source: prometheus
    server: ` + fp.URL + `
    query: histogram_quantile(0.95, sum by (le, service) (rate(request_seconds_bucket[1m])))
    target_label: service
    of: service:*
    split: true
    aggregation: max
    window: 1m
    frequency: 1m
    operator: ">"
    threshold: 0.15
`
	if _, err := h.admin.ApplyAlerts(h.ctx, api.AlertsApply{File: "alerts.yaml", Source: rules}); err != nil {
		t.Fatal(err)
	}
	h.s.PollSources(h.ctx)
	if n := h.s.TickAlerts(h.ctx); n != 1 {
		t.Fatalf("delivered %d notifications, want 1", n)
	}
	p := <-got
	c := p.Data.AlertContext.Condition.AllOf[0]
	if p.Data.Essentials.MonitorCondition != "Fired" || c.MetricValue != 0.25 || len(c.Dimensions) != 1 || c.Dimensions[0].Value != "chat" ||
		!strings.Contains(c.MetricName, "histogram_quantile") {
		t.Fatalf("payload %+v", p)
	}
	as, err := h.admin.Alerts(h.ctx)
	if err != nil || len(as.Items) != 1 || as.Items[0].Source != "prometheus" || as.Items[0].Of != "service:*" || as.Items[0].Metric != "" ||
		!strings.HasPrefix(as.Items[0].Query, "histogram_quantile") || as.Items[0].State != "Fired" {
		t.Fatalf("alerts list %+v %v", as, err)
	}
	// A failing Prometheus is no data, which for alert rules is neither a
	// breach nor a recovery: the alert stays fired.
	fp.set(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	clock.Advance(2 * time.Minute)
	h.s.PollSources(h.ctx)
	if n := h.s.TickAlerts(h.ctx); n != 0 {
		t.Fatalf("after Prometheus failed: %d notifications, want none (no data)", n)
	}
	fp.set(vectorAnswer("chat", 0.02))
	clock.Advance(2 * time.Minute)
	h.s.PollSources(h.ctx)
	if n := h.s.TickAlerts(h.ctx); n != 1 {
		t.Fatalf("after chat recovered: %d notifications, want the resolution", n)
	}
	if p := <-got; p.Data.Essentials.MonitorCondition != "Resolved" {
		t.Errorf("got %s, want Resolved", p.Data.Essentials.MonitorCondition)
	}
}

// TestPromSourceForgetsRemovedQueries: once no policy reads a query, the
// next poll neither runs it nor keeps its values.
func TestPromSourceForgetsRemovedQueries(t *testing.T) {
	fp := newFakeProm(t)
	fp.set(vectorAnswer("coding-assistant", 0.250))
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "sla", Source: slaPolicy(fp.URL, "false")}); err != nil {
		t.Fatal(err)
	}
	series := h.s.policies.promQueries()[0].Series()
	targets := func() []policy.Target {
		pr := h.s.policies
		pr.mu.Lock()
		defer pr.mu.Unlock()
		return pr.windows.Targets(series)
	}
	h.s.PollSources(h.ctx)
	if got := targets(); len(got) != 1 {
		t.Fatalf("after a poll: targets %v, want coding-assistant", got)
	}
	if err := h.admin.DeletePolicy(h.ctx, "sla"); err != nil {
		t.Fatal(err)
	}
	h.s.PollSources(h.ctx)
	if got := targets(); len(got) != 0 {
		t.Errorf("after the policy was deleted: targets %v, want none", got)
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if len(fp.times) != 1 {
		t.Errorf("%d queries, want 1 (none after the delete)", len(fp.times))
	}
}
