package alert

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
)

const rulesYAML = `
webhook: http://127.0.0.1:9/hook
rules:
  - name: a100-full
    description: A100 utilization is high
    metric: utilization
    of: flavor:A100-80G
    aggregation: avg
    window: 5m
    frequency: 1m
    operator: ">="
    threshold: 0.9
    severity: 2
  - name: pending
    metric: pending_gpus
    aggregation: max
    window: 2m
    frequency: 1m
    operator: ">"
    threshold: 0
    auto_mitigate: false
    webhook: https://example.com/other
`

func load(t *testing.T, src string) *File {
	t.Helper()
	f, err := Load("alerts.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestLoad(t *testing.T) {
	f := load(t, rulesYAML)
	if len(f.Rules) != 2 || f.Rules[0].Sev() != 2 || f.Rules[1].Sev() != 3 || !f.Rules[0].Mitigates() || f.Rules[1].Mitigates() {
		t.Fatalf("loaded %+v", f)
	}
	if m, tg, ok := f.Rules[0].Policy(); f.Rules[0].Window != 5*time.Minute || !ok || m.String() != "utilization" || tg.String() != "flavor:A100-80G" || f.Rules[0].Dims()["flavor"] != "A100-80G" {
		t.Fatalf("rule 0 = %+v", f.Rules[0])
	}
}

func TestLoadErrors(t *testing.T) {
	base := "rules:\n  - name: r\n    metric: pending_gpus\n    aggregation: avg\n    window: 5m\n    frequency: 1m\n    operator: \">\"\n    threshold: 1\n"
	for _, tc := range []struct{ edit, want string }{
		{strings.Replace(base, "pending_gpus", "pending_gpu", 1), `alerts.yaml:2:5: rules[0].metric: unknown metric "pending_gpu"`},
		{strings.Replace(base, "avg", "mean", 1), `rules[0].aggregation: want one of avg, max, min, total, count, got "mean"`},
		{strings.Replace(base, `">"`, `"=="`, 1), `rules[0].operator: want one of`},
		{strings.Replace(base, "frequency: 1m", "frequency: 10m", 1), `rules[0].frequency: the frequency (10m0s) must not exceed the window`},
		{strings.Replace(base, "window: 5m", "window: 5 minutes", 1), `alerts.yaml:5:13: rules[0].window: invalid duration`},
		{base + "    severity: 7\n", `rules[0].severity: want 0 (critical) to 4 (verbose), got 7`},
		{base + "    labels: {flavor: A100-80G}\n", `rules[0].labels: pending_gpus is a policy metric: name its target with of:`},
		{strings.Replace(base, "pending_gpus", "preemptions", 1) + "    labels: {flavor: A100-80G}\n", `rules[0].labels: metric preemptions is published with the labels {} or {tenant}, not {flavor}`},
		{base + "    webhook: ftp://x\n", `rules[0].webhook: want an http:// or https:// URL`},
		{base + "    thresold: 2\n", `rules[0].thresold: unknown field (did you mean "threshold"?)`},
		{base + "  - name: r\n", `rules[1].name: duplicate rule name "r"`},
		{"webhook: nope\n", `webhook: want an http:// or https:// URL`},
	} {
		_, err := Load("alerts.yaml", []byte(tc.edit))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load:\n%s\n= %v\nwant it to contain %q", tc.edit, err, tc.want)
		}
	}
}

// TestLoadReportsEverything: a value that does not decode does not hide
// the problems of the other rules, and is not reported twice.
func TestLoadReportsEverything(t *testing.T) {
	src := "rules:\n  - name: a\n    metric: pending_gpus\n    aggregation: avg\n    window: 5 minutes\n    frequency: 1m\n    operator: \">\"\n" +
		"  - name: b\n    metric: pending_gpu\n    aggregation: avg\n    window: 5m\n    frequency: 1m\n    operator: \">\"\n"
	_, err := Load("alerts.yaml", []byte(src))
	want := "alerts.yaml:5:13: rules[0].window: invalid duration \"5 minutes\": write a number with a unit, such as 30s, 5m, 2h or 7d\n" +
		"alerts.yaml:8:5: rules[1].metric: unknown metric \"pending_gpu\""
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("Load = %v\nwant two problems:\n%s...", err, want)
	}
}

func FuzzLoad(f *testing.F) {
	f.Add([]byte(rulesYAML))
	f.Add([]byte("rules: [{name: x, metric: preemptions, labels: {tenant: '*'}, aggregation: total, window: 1h, frequency: 5m, operator: '>', threshold: 3}]"))
	f.Add([]byte("rules: [{severity: -1, window: 1e9}]"))
	f.Add([]byte("rules: [{name: u, metric: utilization, of: 'tenant:*', split: true, aggregation: max, window: 5m, frequency: 1m, operator: '>', threshold: 0.9}]"))
	f.Add([]byte("rules: [{name: u, metric: p95_latency, of: 'selector:team=ml', aggregation: max, window: 5m, frequency: 1m, operator: '>', threshold: 0.3}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Load("f.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "f.yaml") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		// A valid file evaluates without panicking.
		e := NewEvaluator(file)
		now := time.Unix(1e9, 0)
		e.Observe(now, []Sample{{Metric: "pending_gpus", Value: 1}})
		e.Evaluate(now)
	})
}

func TestEvaluateFireResolve(t *testing.T) {
	f := load(t, rulesYAML)
	e := NewEvaluator(f)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	obs := func(at time.Duration, ratio, pending float64) {
		e.Observe(t0.Add(at), []Sample{
			{Metric: "utilization", Labels: map[string]string{"flavor": "A100-80G"}, Value: ratio},
			{Metric: "utilization", Labels: map[string]string{"flavor": "H100-80G"}, Value: 1},
			{Metric: "utilization", Labels: map[string]string{}, Value: 1},
			{Metric: "pending_gpus", Labels: map[string]string{}, Value: pending},
		})
	}
	// Minute 0: 0.5 — no alert; evaluation at 0 for both rules.
	obs(0, 0.5, 0)
	if n := e.Evaluate(t0); len(n) != 0 {
		t.Fatalf("fired at once: %+v", n)
	}
	// Minutes 1, 2: 1.0 — avg over 5m of (0.5, 1, 1) = 0.833 at 2m, below 0.9.
	obs(time.Minute, 1, 8)
	n := e.Evaluate(t0.Add(time.Minute))
	if len(n) != 1 || n[0].Payload.Data.Essentials.AlertRule != "pending" || n[0].Webhook != "https://example.com/other" {
		t.Fatalf("minute 1: %+v", n)
	}
	obs(2*time.Minute, 1, 0)
	if n := e.Evaluate(t0.Add(2*time.Minute + 30*time.Second)); len(n) != 0 {
		t.Fatalf("minute 2: %+v", n)
	}
	// Not due before the frequency elapsed: minute 2:30 evaluated, next at 3:30.
	obs(3*time.Minute, 1, 0)
	obs(4*time.Minute, 1, 0)
	if n := e.Evaluate(t0.Add(3 * time.Minute)); len(n) != 0 {
		t.Fatalf("evaluated before due: %+v", n)
	}
	// At 5:01 the window (0:01, 5:01] holds 1,1,1,1 -> fired.
	obs(5*time.Minute, 1, 0)
	n = e.Evaluate(t0.Add(5*time.Minute + time.Second))
	if len(n) != 1 {
		t.Fatalf("minute 5: %+v", n)
	}
	p := n[0].Payload
	es := p.Data.Essentials
	c := p.Data.AlertContext.Condition
	if es.MonitorCondition != Fired || es.Severity != "Sev2" || es.AlertRule != "a100-full" || n[0].Webhook != "http://127.0.0.1:9/hook" ||
		c.WindowSize != "PT5M" || c.EvaluationFrequency != "PT1M" || c.AllOf[0].MetricValue != 1 || c.AllOf[0].Operator != "GreaterThanOrEqual" ||
		c.AllOf[0].TimeAggregation != "Average" || len(c.AllOf[0].Dimensions) != 1 || c.AllOf[0].Dimensions[0].Value != "A100-80G" {
		t.Fatalf("payload %+v", p)
	}
	// Stays fired without new notifications while the condition holds.
	obs(6*time.Minute, 0.95, 0)
	if n := e.Evaluate(t0.Add(6*time.Minute + time.Second)); len(n) != 0 {
		t.Fatalf("refired: %+v", n)
	}
	// Reapplying the same rules keeps the state.
	e.SetRules(load(t, rulesYAML))
	// Drop to 0: avg of (1,1,1,0.95,0,0,0) over 5m window (2:02..7:02] etc.
	for m := 7; m <= 11; m++ {
		obs(time.Duration(m)*time.Minute, 0, 0)
	}
	n = e.Evaluate(t0.Add(11*time.Minute + time.Second))
	if len(n) != 1 || n[0].Payload.Data.Essentials.MonitorCondition != Resolved || n[0].Payload.Data.Essentials.ResolvedDateTime == nil ||
		!n[0].Payload.Data.Essentials.FiredDateTime.Equal(t0.Add(5*time.Minute+time.Second)) {
		t.Fatalf("resolution: %+v", n)
	}
	// pending has auto_mitigate: false: still fired though pending is 0.
	st := e.States()
	if !st[1].Fired || st[0].Fired {
		t.Fatalf("states %+v", st)
	}
}

func TestAggregations(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		agg  string
		want float64
		ok   bool
	}{{"avg", 2, true}, {"max", 3, true}, {"min", 1, true}, {"total", 6, true}, {"count", 3, true}} {
		f := &File{Rules: []Rule{{Name: "r", Metric: "preemptions", Labels: map[string]string{"tenant": "*"}, Aggregation: tc.agg, Window: time.Minute, Frequency: time.Minute, Operator: ">", Threshold: 100}}}
		e := NewEvaluator(f)
		e.Observe(t0.Add(-2*time.Minute), []Sample{{Metric: "preemptions", Labels: map[string]string{"tenant": "a"}, Value: 50}}) // outside the window
		e.Observe(t0.Add(-30*time.Second), []Sample{{Metric: "preemptions", Labels: map[string]string{"tenant": "a"}, Value: 1}, {Metric: "preemptions", Labels: map[string]string{}, Value: 40}})
		e.Observe(t0, []Sample{{Metric: "preemptions", Labels: map[string]string{"tenant": "a"}, Value: 2}, {Metric: "preemptions", Labels: map[string]string{"tenant": "b"}, Value: 3}})
		e.Evaluate(t0)
		s := e.States()[0]
		if s.LastValue != tc.want || s.HasValue != tc.ok {
			t.Errorf("%s = %v (%v), want %v", tc.agg, s.LastValue, s.HasValue, tc.want)
		}
	}
}

// TestSplit: a split rule alerts per series — each tenant's alert fires
// and resolves on its own values, with the tenant in its dimensions — and
// the rule's summary is fired while any instance is.
func TestSplit(t *testing.T) {
	f, err := Load("alerts.yaml", []byte(`
webhook: http://127.0.0.1:1/hook
rules:
  - name: pending-per-tenant
    metric: pending_gpus
    of: "tenant:*"
    split: true
    aggregation: max
    window: 2m
    frequency: 1m
    operator: ">"
    threshold: 10
`))
	if err != nil {
		t.Fatal(err)
	}
	e := NewEvaluator(f)
	t0 := time.Unix(10_000, 0)
	step := func(m int, a, b float64) []Notification {
		now := t0.Add(time.Duration(m) * time.Minute)
		e.Observe(now, []Sample{
			{Metric: "pending_gpus", Labels: map[string]string{"tenant": "a"}, Value: a},
			{Metric: "pending_gpus", Labels: map[string]string{"tenant": "b"}, Value: b},
		})
		return e.Evaluate(now)
	}
	got := func(ns []Notification) (out []string) {
		for _, n := range ns {
			c := n.Payload.Data.AlertContext.Condition.AllOf[0]
			out = append(out, fmt.Sprintf("%s %s=%s", n.Payload.Data.Essentials.MonitorCondition, c.Dimensions[0].Name, c.Dimensions[0].Value))
		}
		return out
	}
	if n := got(step(0, 20, 1)); fmt.Sprint(n) != "[Fired tenant=a]" {
		t.Fatalf("minute 0: %v, want only a fired", n)
	}
	if n := got(step(1, 20, 30)); fmt.Sprint(n) != "[Fired tenant=b]" {
		t.Fatalf("minute 1: %v, want b fired (a still fired, no repeat)", n)
	}
	step(2, 0, 30)
	if n := got(step(3, 0, 30)); fmt.Sprint(n) != "[Resolved tenant=a]" {
		t.Fatalf("minute 3: %v, want a resolved once its window is clear", n)
	}
	st := e.States()[0]
	if !st.Fired || len(st.Instances) != 2 || st.Instances[0].Fired || !st.Instances[1].Fired || st.LastValue != 30 {
		t.Fatalf("state %+v", st)
	}
	ids := map[string]bool{}
	step(4, 0, 0)
	for _, n := range step(5, 0, 0) {
		ids[n.Payload.Data.Essentials.AlertID] = true
	}
	if len(ids) != 1 {
		t.Fatalf("b's resolution: %v", ids)
	}
	for id := range ids {
		if !strings.Contains(id, "tenant=b") {
			t.Errorf("alert id %q does not name its series", id)
		}
	}

	_, err = Load("bad.yaml", []byte(`
rules:
  - name: r
    metric: pending_gpus
    of: tenant:contoso
    split: true
    aggregation: max
    window: 1m
    frequency: 1m
    operator: ">"
    threshold: 1
`))
	if err == nil || !strings.Contains(err.Error(), "rules[0].split") || !strings.Contains(err.Error(), "bad.yaml:") {
		t.Errorf("split without a wildcard: %v", err)
	}
}

// TestLoadProm: a rule may read a Prometheus query, with the checks
// policies make; its samples are named by the query's series and the
// target's dimension.
func TestLoadProm(t *testing.T) {
	f := load(t, `rules:
  - name: slow
    source: prometheus
    server: http://127.0.0.1:9090
    query: histogram_quantile(0.95, sum by (le, service) (rate(request_seconds_bucket[1m])))
    target_label: service
    of: service:*
    split: true
    aggregation: max
    window: 5m
    frequency: 1m
    operator: ">"
    threshold: 0.15
`)
	r := &f.Rules[0]
	q, ok := r.Prom()
	if !ok || q.TargetKind != policy.TargetService || q.TargetLabel != "service" || q.Server != "http://127.0.0.1:9090" {
		t.Fatalf("Prom() = %+v, %v", q, ok)
	}
	if d := r.Dims(); len(d) != 1 || d["service"] != "*" {
		t.Errorf("Dims = %v", d)
	}
	e := NewEvaluator(f)
	if qs := e.PromQueries(); len(qs) != 1 || qs[0] != q {
		t.Errorf("PromQueries = %+v", qs)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.Observe(t0, []Sample{{Metric: q.Series(), Labels: map[string]string{"service": "chat"}, Value: 0.25},
		{Metric: q.Series(), Labels: map[string]string{"service": "code"}, Value: 0.02}})
	notes := e.Evaluate(t0)
	if len(notes) != 1 || !strings.Contains(fmt.Sprint(notes[0].Payload.Data.AlertContext.Condition.AllOf[0].Dimensions), "chat") {
		t.Fatalf("notifications %+v, want one for service chat", notes)
	}

	for _, tc := range []struct{ rule, want string }{
		{"source: prometheus\n    server: http://u:p@h:9090\n    query: up", "rules[0].server: the server URL carries a user or password"},
		{"source: prometheus\n    server: ftp://h\n    query: up", "rules[0].server: want an http:// or https:// URL"},
		{"source: prometheus\n    server: http://h:9090\n    query: " + strings.Repeat("x", policy.MaxPromQueryLen+1), "rules[0].query: the query has 4097 bytes"},
		{"source: prom\n    server: http://h:9090\n    query: up", "rules[0].source: server, query and target_label read a Prometheus query: write source: prometheus"},
		{"source: prometheus\n    metric: utilization\n    server: http://h:9090\n    query: up", "rules[0].metric: a rule reads either a metric or a Prometheus query"},
		{"source: prometheus\n    server: http://h:9090\n    query: up\n    of: service:chat", "rules[0].of: a query without target_label gives one series"},
		{"source: prometheus\n    server: http://h:9090\n    query: up\n    target_label: service", "rules[0].of: with target_label, of: names the kind"},
	} {
		src := "rules:\n  - name: r\n    " + tc.rule + "\n    aggregation: max\n    window: 5m\n    frequency: 1m\n    operator: \">\"\n    threshold: 1\n"
		_, err := Load("a.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "a.yaml:2:") {
			t.Errorf("%q: err %v, want %q at a.yaml:2", tc.rule, err, tc.want)
		}
	}
}
