package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const promNative = `policies:
  - name: customer_sla_protection
    when:
      source: prometheus
      server: http://127.0.0.1:9090
      query: histogram_quantile(0.95, sum by (le, service) (rate(request_seconds_bucket[1m])))
      target_label: service
      of: service:coding-assistant
      above: 150ms
      for: 5m
      no_data: %s
    then:
      - {type: reallocate, resources: [inference_gpus], priority: high}
`

const promOperators = `scheduling_policies:
  - name: customer_sla_protection
    conditions:
      - source: prometheus
        server: https://prom.example:9090/prefix
        query: max(request_p95_seconds)
        threshold: 150ms
        duration: 5m
    actions:
      - type: reallocate
        resources: [inference_gpus]
        priority: high
`

// TestLoadProm: both formats load a Prometheus leaf; the leaf carries its
// query, its target mapping and its no_data, and targets named by the
// query's labels need not exist in the fleet.
func TestLoadProm(t *testing.T) {
	p := mustLoad(t, fmt.Sprintf(promNative, "hold"))
	if err := p.Resolve(Targets{Pools: []string{"inference_gpus"}}); err != nil {
		t.Fatalf("Resolve: a Prometheus leaf's target comes from the query's labels, not the fleet: %v", err)
	}
	c := p.Rules[0].When
	want := &PromQuery{Server: "http://127.0.0.1:9090", Expr: "histogram_quantile(0.95, sum by (le, service) (rate(request_seconds_bucket[1m])))",
		TargetLabel: "service", TargetKind: TargetService}
	if diff := cmp.Diff(want, c.Prom); diff != "" {
		t.Errorf("Prom (-want +got):\n%s", diff)
	}
	if c.Kind != CondMetric || c.Metric != MetricNone || c.Target != (Target{TargetService, "coding-assistant"}) || c.NoData != NoDataHold ||
		c.For != 5*time.Minute || c.Threshold.Value != 0.150 || c.Op != OpAbove {
		t.Errorf("condition = %+v", c)
	}
	if got := p.Explain(); !strings.Contains(got, "the Prometheus query `histogram_quantile") || !strings.Contains(got, "keeps its last state") {
		t.Errorf("Explain does not say the query and no_data:\n%s", got)
	}

	op := mustLoad(t, promOperators)
	oc := op.Rules[0].When
	if oc.Prom == nil || oc.Prom.Server != "https://prom.example:9090/prefix" || oc.Prom.Expr != "max(request_p95_seconds)" ||
		oc.Target != Cluster || oc.For != 5*time.Minute || oc.NoData != NoDataFalse {
		t.Errorf("operators' condition = %+v, prom %+v", oc, oc.Prom)
	}
	e, err := NewEngine(op)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.PromQueries(); len(got) != 1 || got[0] != *oc.Prom {
		t.Errorf("PromQueries = %+v", got)
	}
}

// TestLoadPromErrors: hostile or wrong Prometheus fields are refused,
// each naming its file:line:col and field.
func TestLoadPromErrors(t *testing.T) {
	leaf := func(fields string) string {
		return "policies:\n  - name: r\n    when:\n" + fields + "    then: [{type: drain, target: pool:p}]\n"
	}
	huge := strings.Repeat("x", MaxPromQueryLen+1)
	longURL := "http://h/" + strings.Repeat("a", MaxPromServerLen)
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"userinfo", leaf("      source: prometheus\n      server: http://admin:secret@127.0.0.1:9090\n      query: up\n      above: 1\n"),
			[]string{`f.yaml:5:15: policies[0].when.server: the server URL carries a user or password`}},
		{"not http", leaf("      source: prometheus\n      server: file:///etc/passwd\n      query: up\n      above: 1\n"),
			[]string{`f.yaml:5:15: policies[0].when.server: want an http:// or https:// URL with a host`}},
		{"no host", leaf("      source: prometheus\n      server: http://\n      query: up\n      above: 1\n"),
			[]string{`f.yaml:5:15: policies[0].when.server: want an http:// or https:// URL with a host`}},
		{"query in URL", leaf("      source: prometheus\n      server: http://h:9090/?x=1\n      query: up\n      above: 1\n"),
			[]string{`f.yaml:5:15: policies[0].when.server: the server URL is the server's base`}},
		{"long URL", leaf("      source: prometheus\n      server: " + longURL + "\n      query: up\n      above: 1\n"),
			[]string{fmt.Sprintf(`f.yaml:5:15: policies[0].when.server: the server URL has %d bytes, more than 2048`, len(longURL))}},
		{"huge query", leaf("      source: prometheus\n      server: http://h:9090\n      query: " + huge + "\n      above: 1\n"),
			[]string{`f.yaml:6:14: policies[0].when.query: the query has 4097 bytes, more than 4096`}},
		{"empty query", leaf("      source: prometheus\n      server: http://h:9090\n      query: \"  \"\n      above: 1\n"),
			[]string{`f.yaml:6:14: policies[0].when.query: empty query`}},
		{"missing server and query", leaf("      source: prometheus\n      above: 1\n"),
			[]string{`policies[0].when.query: missing: write query:`, `policies[0].when.server: missing: write server:`}},
		{"unknown source", leaf("      source: prometeus\n      server: http://h:9090\n      query: up\n      above: 1\n"),
			[]string{`f.yaml:4:15: policies[0].when.source: unknown source "prometeus" (did you mean "prometheus"?)`}},
		{"no source", leaf("      server: http://h:9090\n      query: up\n      above: 1\n"),
			[]string{`policies[0].when.source: missing: server, query and target_label read a Prometheus query: add source: prometheus`}},
		{"metric and source", leaf("      source: prometheus\n      metric: p95_latency\n      server: http://h:9090\n      query: up\n      above: 1ms\n"),
			[]string{`policies[0].when.metric: a condition reads either a metric or a Prometheus query`}},
		{"target_label without kind", leaf("      source: prometheus\n      server: http://h:9090\n      query: up\n      target_label: service\n      of: chat\n      above: 1\n"),
			[]string{`f.yaml:8:11: policies[0].when.of: with target_label, name the target this condition tests with its kind`}},
		{"target without target_label", leaf("      source: prometheus\n      server: http://h:9090\n      query: up\n      of: service:chat\n      above: 1\n"),
			[]string{`f.yaml:7:11: policies[0].when.of: a query without target_label gives one series, the cluster's`}},
		{"bad label", leaf("      source: prometheus\n      server: http://h:9090\n      query: up\n      target_label: 9lives\n      of: service:chat\n      above: 1\n"),
			[]string{`f.yaml:7:21: policies[0].when.target_label: invalid label name "9lives"`}},
		{"bad no_data", leaf("      source: prometheus\n      server: http://h:9090\n      query: up\n      above: 1\n      no_data: maybe\n"),
			[]string{`f.yaml:8:16: policies[0].when.no_data: want false (no data: the condition does not hold), true (it holds) or hold (it keeps its last state), got "maybe"`}},
		{"hysteresis in another unit", leaf("      source: prometheus\n      server: http://h:9090\n      query: up\n      above: 150ms\n      hysteresis: 5%\n"),
			[]string{`f.yaml:8:19: policies[0].when.hysteresis:`}},
		{"operators: userinfo", "scheduling_policies:\n  - name: r\n    conditions:\n      - source: prometheus\n        server: http://u@h:9090\n        query: up\n        threshold: 150ms\n    actions: [{type: drain, target: pool:p}]\n",
			[]string{`f.yaml:5:17: scheduling_policies[0].conditions[0].server: the server URL carries a user or password`}},
		{"operators: mixed forms", "scheduling_policies:\n  - name: r\n    conditions:\n      - source: prometheus\n        resource_type: gpu_cluster\n        utilization_threshold: 85%\n    actions: [{type: drain, target: pool:p}]\n",
			[]string{`f.yaml:4:9: scheduling_policies[0].conditions[0]: mixes two forms`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("f.yaml", []byte(tc.src))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			msg := err.Error()
			for _, w := range tc.want {
				i := strings.Index(msg, w)
				if i < 0 {
					t.Fatalf("error lacks %q:\n%s", w, msg)
				}
				msg = msg[i+len(w):]
			}
		})
	}
}

// TestPromNoData: a Prometheus leaf without a value (no sample, a stale
// one, a dropped series) follows its rule's no_data, never "below the
// threshold": false starts the duration again, true counts as holding,
// hold keeps the state of the last value.
func TestPromNoData(t *testing.T) {
	svc := Target{TargetService, "coding-assistant"}
	// The value each minute: 250ms, except during the gap (minutes 3-4)
	// where the query gives nothing.
	type result struct{ events []string }
	runWith := func(noData string, gap func(i int) bool) []string {
		p := mustLoad(t, fmt.Sprintf(promNative, noData))
		e, err := NewEngine(p)
		if err != nil {
			t.Fatal(err)
		}
		q := *p.Rules[0].When.Prom
		ws := NewWindows(5 * time.Minute)
		ws.SetMaxAge(20 * time.Second)
		var log []Firing
		for i := 0; i < 12; i++ {
			now := t0.Add(time.Duration(i) * time.Minute)
			ws.Drop(q.Series())
			if !gap(i) {
				ws.Observe(q.Series(), svc, now, 0.250)
			}
			ws.Advance(now)
			st := e.Evaluate(now, ws)
			if gap(i) && !hasNoMetric(st.Errors) {
				t.Errorf("no_data %s, minute %d: no ErrNoMetric in %v", noData, i, st.Errors)
			}
			log = append(log, st.Firings...)
		}
		return events(log)
	}
	gap := func(i int) bool { return i == 3 || i == 4 }
	for _, tc := range []struct {
		noData string
		want   []string
	}{
		// Held minutes 0-2, broken at 3-4, held again from 5: fires at 10.
		{"false", []string{"10:customer_sla_protection:fired"}},
		// The gap counts as holding: 5 minutes after minute 0.
		{"true", []string{"5:customer_sla_protection:fired"}},
		// The gap keeps the held state (held since 0).
		{"hold", []string{"5:customer_sla_protection:fired"}},
	} {
		if got := runWith(tc.noData, gap); !cmp.Equal(got, tc.want) {
			t.Errorf("no_data %s: events %v, want %v", tc.noData, got, tc.want)
		}
	}
	// hold keeps a clear state too: with no data at all, it never fires;
	// true fires after the duration.
	never := func(int) bool { return true }
	if got := runWith("hold", never); len(got) != 0 {
		t.Errorf("no_data hold without any value: %v, want nothing", got)
	}
	if got := runWith("true", never); !cmp.Equal(got, []string{"5:customer_sla_protection:fired"}) {
		t.Errorf("no_data true without any value: %v", got)
	}
}

func hasNoMetric(errs []error) bool {
	for _, e := range errs {
		if errors.Is(e, ErrNoMetric) {
			return true
		}
	}
	return false
}

// TestPromStale: the newest sample of an outside series counts while it is
// at most the max age old; a series query reads the newest value.
func TestPromStale(t *testing.T) {
	ws := NewWindows(5 * time.Minute)
	ws.SetMaxAge(20 * time.Second)
	q := Query{Series: "prometheus x", Target: Cluster}
	ws.Observe(q.Series, Cluster, t0, 0.5)
	ws.Observe(q.Series, Cluster, t0.Add(time.Second), 0.7)
	ws.Advance(t0.Add(21 * time.Second))
	if v, ok := ws.Value(q); !ok || v != 0.7 {
		t.Errorf("at 20s after the newest sample: %v, %v; want 0.7", v, ok)
	}
	ws.Advance(t0.Add(22 * time.Second))
	if v, ok := ws.Value(q); ok {
		t.Errorf("at 21s after the newest sample: %v, want no data", v)
	}
	ws.Observe(q.Series, Cluster, t0.Add(22*time.Second), 0.9)
	ws.Drop(q.Series)
	if v, ok := ws.Value(q); ok {
		t.Errorf("after Drop: %v, want no data", v)
	}
	// A metric's own series is untouched by Drop of another.
	ws.ObserveMetric(MetricUtilization, Cluster, t0.Add(22*time.Second), 0.4)
	ws.Drop(q.Series)
	if _, ok := ws.Value(Query{Metric: MetricUtilization, Target: Cluster}); !ok {
		t.Error("Drop of a Prometheus series dropped utilization")
	}
}

// TestPromTargetFor maps a result's labels to targets.
func TestPromTargetFor(t *testing.T) {
	q := PromQuery{TargetLabel: "service", TargetKind: TargetService}
	for _, tc := range []struct {
		labels map[string]string
		want   Target
		ok     bool
	}{
		{map[string]string{"service": "chat", "le": "0.1"}, Target{TargetService, "chat"}, true},
		{map[string]string{"job": "x"}, Target{}, false},
		{map[string]string{"service": "has space"}, Target{}, false},
		{map[string]string{"service": strings.Repeat("a", 300)}, Target{}, false},
	} {
		got, ok := q.TargetFor(tc.labels)
		if got != tc.want || ok != tc.ok {
			t.Errorf("TargetFor(%v) = %v, %v; want %v, %v", tc.labels, got, ok, tc.want, tc.ok)
		}
	}
	if got, ok := (PromQuery{}).TargetFor(map[string]string{"service": "x"}); !ok || got != Cluster {
		t.Errorf("without target_label: %v, %v; want the cluster", got, ok)
	}
}
