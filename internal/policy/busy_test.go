package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLoadBusyUtilization: a utilization condition measures allocation
// unless it says utilization: busy (or names metric busy_utilization),
// in both formats.
func TestLoadBusyUtilization(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []Metric // the rules' leaf metrics, in order
	}{
		{"operators: default allocation, busy by field or by metric", `
scheduling_policies:
  - name: alloc
    conditions: [{resource_type: gpu_cluster, utilization_threshold: 85%}]
    actions: [{type: notify, message: a}]
  - name: alloc-said
    conditions: [{resource_type: gpu_cluster, utilization_threshold: 85%, utilization: allocation}]
    actions: [{type: notify, message: a}]
  - name: busy
    conditions: [{resource_type: gpu_cluster, utilization_threshold: 85%, utilization: busy}]
    actions: [{type: notify, message: b}]
  - name: busy-metric
    conditions: [{metric: busy_utilization, target: tenant:acme, threshold: 5%}]
    actions: [{type: notify, message: b}]
  - name: busy-metric-field
    conditions: [{metric: utilization, target: pool:inference_gpus, threshold: 50%, utilization: busy}]
    actions: [{type: notify, message: b}]
`, []Metric{MetricUtilization, MetricUtilization, MetricBusyUtilization, MetricBusyUtilization, MetricBusyUtilization}},
		{"native", `
policies:
  - name: alloc
    when: {metric: utilization, above: 85%}
    then: [{type: notify, message: a}]
  - name: busy
    when: {metric: utilization, utilization: busy, of: region:eastus, above: 85%}
    then: [{type: notify, message: b}]
  - name: busy-metric
    when: {metric: busy_utilization, of: flavor:H100-80G, below: 10%, utilization: busy}
    then: [{type: notify, message: b}]
  - name: expr
    when: {expr: "busy_utilization('tenant:acme') < 0.05"}
    then: [{type: notify, message: b}]
`, []Metric{MetricUtilization, MetricBusyUtilization, MetricBusyUtilization, MetricNone}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Load("f.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Resolve(known); err != nil {
				t.Fatal(err)
			}
			var got []Metric
			for _, r := range p.Rules {
				got = append(got, r.When.Metric)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("metrics (-want +got):\n%s", d)
			}
			if _, err := NewEngine(p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPolicyMetrics lists the metrics a policy reads, expressions
// included, so that a runtime samples busy utilization only when asked.
func TestPolicyMetrics(t *testing.T) {
	p, err := Load("f.yaml", []byte(`
policies:
  - name: a
    when:
      any:
        - {metric: p95_latency, of: service:coding-assistant, above: 150ms}
        - {expr: "busy_utilization() < 0.1 && pending_gpus() > 4.0"}
    then: [{type: notify, message: a}]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Metric{MetricP95Latency, MetricPendingGPUs, MetricBusyUtilization}
	if d := cmp.Diff(want, p.Metrics()); d != "" {
		t.Errorf("metrics (-want +got):\n%s", d)
	}
	if !p.Reads(MetricBusyUtilization) || p.Reads(MetricUtilization) {
		t.Errorf("Reads: busy %v, utilization %v; want true, false", p.Reads(MetricBusyUtilization), p.Reads(MetricUtilization))
	}
}

// TestLoadBusyErrors: a bad utilization: field is refused at its line,
// naming the field.
func TestLoadBusyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      string
	}{
		{"unknown value", `
scheduling_policies:
  - name: r
    conditions:
      - resource_type: gpu_cluster
        utilization_threshold: 85%
        utilization: bussy
    actions: [{type: notify, message: a}]
`, `f.yaml:7:22: scheduling_policies[0].conditions[0].utilization: unknown utilization "bussy" (did you mean "busy"?)`},
		{"on another metric", `
policies:
  - name: r
    when: {metric: p95_latency, above: 150ms, utilization: busy}
    then: [{type: notify, message: a}]
`, `f.yaml:4:60: policies[0].when.utilization: utilization: applies to utilization conditions, not to p95_latency`},
		{"contradiction", `
policies:
  - name: r
    when:
      metric: busy_utilization
      utilization: allocation
      above: 50%
    then: [{type: notify, message: a}]
`, `f.yaml:6:20: policies[0].when.utilization: utilization: allocation contradicts metric busy_utilization`},
		{"not a scalar", `
policies:
  - name: r
    when: {metric: utilization, above: 50%, utilization: [busy]}
    then: [{type: notify, message: a}]
`, `f.yaml:4:58: policies[0].when.utilization: want allocation or busy`},
		{"beside all", `
policies:
  - name: r
    when: {utilization: busy, all: [{metric: utilization, above: 50%}]}
    then: [{type: notify, message: a}]
`, `f.yaml:4:11: policies[0].when: write exactly one of`},
		{"over 100%", `
scheduling_policies:
  - name: r
    conditions: [{resource_type: gpu_cluster, utilization_threshold: 120%, utilization: busy}]
    actions: [{type: notify, message: a}]
`, `f.yaml:4:70: scheduling_policies[0].conditions[0].utilization_threshold: threshold 120% is over 100%`},
		{"busy on a class", `
policies:
  - name: r
    when: {metric: busy_utilization, of: class:batch_jobs, above: 50%}
    then: [{type: notify, message: a}]
`, `f.yaml:4:42: policies[0].when.of: busy_utilization is not measured on a class`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("f.yaml", []byte(tc.src))
			if err == nil {
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n%v\nwant it to contain\n%s", err, tc.want)
			}
		})
	}
}
