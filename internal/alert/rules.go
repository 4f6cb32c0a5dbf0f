// Package alert evaluates metric alert rules in the shape cloud monitors
// use (metric, dimension filter, aggregation over a window, evaluation
// frequency, operator, threshold, severity, auto-mitigate) and builds the
// webhook payloads of fired and resolved alerts, a simplified form of Azure
// Monitor's common alert schema.
//
// A rule reads one of three kinds of metric:
//   - a policy metric (utilization, pending_gpus, p95_latency, ...) of a
//     target (of: cluster, tenant:contoso, flavor:H100-80G, "tenant:*"),
//     on exactly the metric × target pairs of the one table policies use
//     (policy.MetricSources): the server samples it as the policy runtime
//     does, so an alert and a policy on the same metric see the same value;
//   - a server metric (ServerMetrics: gpus_allocated, preemptions,
//     schedule_cycle_seconds, ...), which no policy reads, derived from the
//     server's own Prometheus registry and picked by labels;
//   - a Prometheus query (source: prometheus, server, query, and
//     target_label with of: kind:name or kind:*), which the server runs as
//     it runs the policies' (policy.PromQuery); its samples carry the
//     metric name PromQuery.Series and the labels Dims of their target.
//
// The evaluator holds no clock: callers pass Now to Observe and Evaluate,
// so tests drive time; the server supplies the wall clock.
package alert

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// ServerMetrics are the server metrics a rule may read (the metrics of the
// server's own Prometheus registry that no policy reads), with the label
// sets each is published with (a rule's labels must be one of them). The
// GPU utilization and the pending GPUs are policy metrics (utilization,
// pending_gpus: see policy.MetricSources), read with of:, not here.
var ServerMetrics = map[string][][]string{
	"gpus_allocated":          {{}, {"flavor"}, {"region"}, {"flavor", "region"}, {"tenant"}},
	"gpus_capacity":           {{}, {"flavor"}, {"region"}, {"flavor", "region"}},
	"pending_workloads":       {{}, {"tenant"}},
	"preemptions":             {{}, {"tenant"}},
	"reservation_utilization": {{"tenant", "reservation"}},
	"schedule_cycle_seconds":  {{}},
	"plan_conflicts":          {{}},
}

// Dims are the labels of the samples of a policy metric of target t: none
// for the cluster, else the kind's name with the target's name ("*" for
// any), e.g. {tenant: contoso}.
func Dims(t policy.Target) map[string]string {
	if t.Kind == policy.TargetCluster {
		return map[string]string{}
	}
	return map[string]string{t.Kind.String(): t.Name}
}

// Aggregations over a window's samples.
var Aggregations = []string{"avg", "max", "min", "total", "count"}

// Operators compare the aggregate with the threshold.
var Operators = []string{">", ">=", "<", "<="}

// File is an alert rules file.
type File struct {
	Pos yamlfile.Pos
	// Webhook receives every rule's notifications unless the rule names
	// its own.
	Webhook string `yaml:"webhook"`
	Rules   []Rule `yaml:"rules"`
}

// Rule is one metric alert rule.
type Rule struct {
	Pos         yamlfile.Pos `json:"-"`
	Name        string       `yaml:"name" json:"name"`
	Description string       `yaml:"description" json:"description,omitempty"`
	Metric      string       `yaml:"metric" json:"metric"`
	// Of is a policy metric's target (default cluster); "kind:*" reads
	// every target of the kind.
	Of string `yaml:"of" json:"of,omitempty"`
	// Labels pick a server metric's series.
	Labels      map[string]string `yaml:"labels" json:"labels,omitempty"`
	Aggregation string            `yaml:"aggregation" json:"aggregation"`
	Window      time.Duration     `yaml:"window" json:"window"`
	Frequency   time.Duration     `yaml:"frequency" json:"frequency"`
	Operator    string            `yaml:"operator" json:"operator"`
	Threshold   float64           `yaml:"threshold" json:"threshold"`
	Severity    *int              `yaml:"severity" json:"severity"`
	// AutoMitigate resolves a fired alert when its condition clears
	// (default true); otherwise it stays fired until the rule changes.
	AutoMitigate *bool  `yaml:"auto_mitigate" json:"auto_mitigate"`
	Webhook      string `yaml:"webhook" json:"webhook,omitempty"`
	Enabled      *bool  `yaml:"enabled" json:"enabled,omitempty"`
	// Split makes each matching series (each combination of label values,
	// e.g. each tenant for `tenant: "*"`) its own alert, which fires and
	// resolves on its own series alone, as Azure Monitor splits a metric
	// alert by dimension values. Without it the rule folds every matching
	// series into one value.
	Split bool `yaml:"split" json:"split,omitempty"`

	// Source "prometheus" reads Query, a PromQL expression, from the
	// Prometheus server Server instead of Metric; TargetLabel is the
	// result label that names each series' target (see policy.PromQuery).
	Source      string `yaml:"source" json:"source,omitempty"`
	Server      string `yaml:"server" json:"server,omitempty"`
	Query       string `yaml:"query" json:"query,omitempty"`
	TargetLabel string `yaml:"target_label" json:"target_label,omitempty"`

	// policy and target are a policy metric's, set by Load; dims are the
	// labels of the series the rule reads (Labels for a server metric);
	// prom is a Prometheus query's.
	policy policy.Metric
	target policy.Target
	dims   map[string]string
	prom   *policy.PromQuery
}

// Prom returns the Prometheus query the rule reads, and false for a rule
// on a metric.
func (r *Rule) Prom() (policy.PromQuery, bool) {
	if r.prom == nil {
		return policy.PromQuery{}, false
	}
	return *r.prom, true
}

// displayMetric is what payloads call the rule's metric: its name, or a
// Prometheus query's expression.
func (r *Rule) displayMetric() string {
	if r.prom != nil {
		return r.prom.Expr
	}
	return r.Metric
}

// seriesName is the metric name of the samples the rule reads.
func (r *Rule) seriesName() string {
	if r.prom != nil {
		return r.prom.Series()
	}
	return r.Metric
}

// Policy returns the policy metric and target the rule reads, and false
// for a rule on a server metric.
func (r *Rule) Policy() (policy.Metric, policy.Target, bool) {
	return r.policy, r.target, r.policy != policy.MetricNone
}

// Dims are the labels of the series the rule reads, "*" matching any
// value.
func (r *Rule) Dims() map[string]string {
	if r.dims != nil {
		return r.dims
	}
	return r.Labels
}

// Sev returns the severity (default 3).
func (r *Rule) Sev() int {
	if r.Severity == nil {
		return 3
	}
	return *r.Severity
}

// Mitigates reports whether the alert resolves on its own.
func (r *Rule) Mitigates() bool { return r.AutoMitigate == nil || *r.AutoMitigate }

// On reports whether the rule is evaluated.
func (r *Rule) On() bool { return r.Enabled == nil || *r.Enabled }

// Load decodes and validates an alert rules file; every problem is
// reported, with file:line:col and the field.
func Load(file string, data []byte) (*File, error) {
	var f File
	err := yamlfile.Decode(file, data, &f)
	if yamlfile.Stopped(err) {
		return nil, err
	}
	if err := yamlfile.Merge(err, f.validate(file)).Err(); err != nil {
		return nil, err
	}
	return &f, nil
}

func validWebhook(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("want an http:// or https:// URL, got %q", s)
	}
	return nil
}

func (f *File) validate(file string) yamlfile.Errors {
	var errs yamlfile.Errors
	pos := func(p yamlfile.Pos) yamlfile.Pos {
		if p.Line == 0 {
			return yamlfile.Pos{File: file, Line: 1, Col: 1}
		}
		return p
	}
	if f.Webhook != "" {
		if err := validWebhook(f.Webhook); err != nil {
			errs.Add(pos(f.Pos), "webhook", "%v", err)
		}
	}
	seen := map[string]bool{}
	for i := range f.Rules {
		r := &f.Rules[i]
		p := pos(r.Pos)
		field := func(n string) string { return fmt.Sprintf("rules[%d].%s", i, n) }
		switch {
		case r.Name == "":
			errs.Add(p, field("name"), "a rule needs a name")
		case len(r.Name) > 100 || strings.ContainsAny(r.Name, "\n\r\t/"):
			errs.Add(p, field("name"), "a name has at most 100 characters and no '/' or control characters")
		case seen[r.Name]:
			errs.Add(p, field("name"), "duplicate rule name %q", r.Name)
		}
		seen[r.Name] = true
		r.metric(&errs, p, field)
		for k, v := range r.Labels {
			if v == "" {
				errs.Add(p, field("labels."+k), "empty label value; use \"*\" for any")
			}
		}
		if !contains(Aggregations, r.Aggregation) {
			errs.Add(p, field("aggregation"), "want one of %s, got %q", strings.Join(Aggregations, ", "), r.Aggregation)
		}
		if !contains(Operators, r.Operator) {
			errs.Add(p, field("operator"), "want one of %s, got %q", strings.Join(Operators, " "), r.Operator)
		}
		if r.Window < time.Second || r.Window > 7*24*time.Hour {
			errs.Add(p, field("window"), "want a window between 1s and 7d, got %v", r.Window)
		}
		if r.Frequency < time.Second || r.Frequency > 24*time.Hour {
			errs.Add(p, field("frequency"), "want a frequency between 1s and 24h, got %v", r.Frequency)
		} else if r.Window >= time.Second && r.Frequency > r.Window {
			errs.Add(p, field("frequency"), "the frequency (%v) must not exceed the window (%v)", r.Frequency, r.Window)
		}
		if math.IsNaN(r.Threshold) || math.IsInf(r.Threshold, 0) {
			errs.Add(p, field("threshold"), "want a finite number")
		}
		if r.Severity != nil && (*r.Severity < 0 || *r.Severity > 4) {
			errs.Add(p, field("severity"), "want 0 (critical) to 4 (verbose), got %d", *r.Severity)
		}
		if r.Webhook != "" {
			if err := validWebhook(r.Webhook); err != nil {
				errs.Add(p, field("webhook"), "%v", err)
			}
		}
		if r.Split && !anyWildcard(r.Dims()) {
			errs.Add(p, field("split"), "split needs a target \"kind:*\" (of a policy metric) or a label whose value is \"*\" (it alerts per value)")
		}
	}
	return errs
}

// metric checks the rule's metric and what picks its series: a policy
// metric's target must be one the metric table measures it on; a server
// metric's labels one of its label sets.
func (r *Rule) metric(errs *yamlfile.Errors, p yamlfile.Pos, field func(string) string) {
	if r.Source != "" || r.Server != "" || r.Query != "" || r.TargetLabel != "" {
		r.promQuery(errs, p, field)
		return
	}
	if m, err := policy.ParseMetric(r.Metric); err == nil {
		if len(r.Labels) > 0 {
			errs.Add(p, field("labels"), "%s is a policy metric: name its target with of: (e.g. of: tenant:contoso), not labels", m)
		}
		t, err := parseOf(r.Of)
		if err != nil {
			errs.Add(p, field("of"), "%v", err)
			return
		}
		if _, ok := policy.MetricSources[m][t.Kind]; !ok {
			errs.Add(p, field("of"), "%s is not measured on %s targets: the metric table has it on %s", m, t.Kind, strings.Join(measuredOn(m), ", "))
			return
		}
		r.policy, r.target, r.dims = m, t, Dims(t)
		return
	}
	sets, ok := ServerMetrics[r.Metric]
	switch {
	case !ok:
		errs.Add(p, field("metric"), "unknown metric %q: write a policy metric (%s) with of:, or a server metric (%s) with labels",
			r.Metric, strings.Join(policyMetrics(), ", "), strings.Join(sortedMetrics(), ", "))
	case r.Of != "":
		errs.Add(p, field("of"), "%s is a server metric, which no policy reads: pick its series with labels, not of:", r.Metric)
	case !labelSetOK(sets, r.Labels):
		errs.Add(p, field("labels"), "metric %s is published with the labels %s, not %s", r.Metric, describeSets(sets), describeSet(keys(r.Labels)))
	}
}

// promQuery checks a rule on a Prometheus query: the source, the
// server's URL and the query's size as policies check them, and a target
// (of:) the target label maps to.
func (r *Rule) promQuery(errs *yamlfile.Errors, p yamlfile.Pos, field func(string) string) {
	q := &policy.PromQuery{Server: r.Server, Expr: r.Query, TargetLabel: r.TargetLabel}
	ok := true
	bad := func(f, format string, args ...any) {
		errs.Add(p, field(f), format, args...)
		ok = false
	}
	if r.Source != "prometheus" {
		bad("source", "server, query and target_label read a Prometheus query: write source: prometheus, got %q", r.Source)
	}
	if r.Metric != "" {
		bad("metric", "a rule reads either a metric or a Prometheus query (source: prometheus): remove one")
	}
	if len(r.Labels) > 0 {
		bad("labels", "a Prometheus query's series are picked by target_label and of:, not labels")
	}
	if r.Server == "" {
		bad("server", "missing: write server: the Prometheus server's URL, such as http://127.0.0.1:9090")
	} else if err := policy.CheckPromServer(r.Server); err != nil {
		bad("server", "%v", err)
	}
	if err := policy.CheckPromQuery(r.Query); err != nil {
		bad("query", "%v", err)
	}
	t, err := parseOf(r.Of)
	switch {
	case err != nil:
		bad("of", "%v", err)
	case r.TargetLabel == "" && t != policy.Cluster:
		bad("of", "a query without target_label gives one series, the cluster's: add target_label (the result label that names %s) or remove of:", t)
	case r.TargetLabel != "":
		switch t.Kind {
		case policy.TargetTenant, policy.TargetClass, policy.TargetPool, policy.TargetService, policy.TargetFlavor, policy.TargetRegion:
			q.TargetKind = t.Kind
		default:
			bad("of", "with target_label, of: names the kind of its values and a target or \"*\", such as service:coding-assistant or service:*")
		}
		if !promLabel(r.TargetLabel) {
			bad("target_label", "invalid label name %q: Prometheus labels match [a-zA-Z_][a-zA-Z0-9_]*", r.TargetLabel)
		}
	}
	if ok {
		r.prom, r.target, r.dims = q, t, Dims(t)
	}
}

func promLabel(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// parseOf parses a policy metric's target: "" is the cluster, "kind:*"
// every target of the kind, otherwise a target as policies write it, with
// its kind.
func parseOf(s string) (policy.Target, error) {
	if strings.TrimSpace(s) == "" {
		return policy.Cluster, nil
	}
	if kind, name, ok := strings.Cut(s, ":"); ok && name == "*" {
		if kind == policy.TargetSelector.String() {
			return policy.Target{}, fmt.Errorf("a selector names its labels; it has no \"*\"")
		}
		t, err := policy.ParseTarget(kind + ":x")
		if err != nil {
			return policy.Target{}, err
		}
		return policy.Target{Kind: t.Kind, Name: "*"}, nil
	}
	t, err := policy.ParseTarget(s)
	if err != nil {
		return policy.Target{}, err
	}
	if t.Kind == policy.TargetUnresolved {
		return policy.Target{}, fmt.Errorf("write the target's kind, e.g. tenant:%s or service:%s", s, s)
	}
	return t, nil
}

// measuredOn lists the target kinds the metric table has m on.
func measuredOn(m policy.Metric) []string {
	var out []string
	for k := policy.TargetCluster; k <= policy.TargetSelector; k++ {
		if _, ok := policy.MetricSources[m][k]; ok {
			out = append(out, k.String())
		}
	}
	return out
}

// policyMetrics lists the policy metrics the table measures.
func policyMetrics() []string {
	var out []string
	for _, m := range policy.AllMetrics() {
		if len(policy.MetricSources[m]) > 0 {
			out = append(out, m.String())
		}
	}
	return out
}

func anyWildcard(labels map[string]string) bool {
	for _, v := range labels {
		if v == "*" {
			return true
		}
	}
	return false
}

func labelSetOK(sets [][]string, labels map[string]string) bool {
	ks := keys(labels)
	for _, s := range sets {
		if strings.Join(s, ",") == strings.Join(ks, ",") {
			return true
		}
	}
	return false
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func describeSet(s []string) string {
	if len(s) == 0 {
		return "{}"
	}
	return "{" + strings.Join(s, ",") + "}"
}

func describeSets(sets [][]string) string {
	out := make([]string, len(sets))
	for i, s := range sets {
		out[i] = describeSet(s)
	}
	return strings.Join(out, " or ")
}

func sortedMetrics() []string {
	out := make([]string, 0, len(ServerMetrics))
	for m := range ServerMetrics {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
