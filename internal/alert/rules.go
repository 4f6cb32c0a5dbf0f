// Package alert evaluates metric alert rules in the shape cloud monitors
// use (metric, dimension filter, aggregation over a window, evaluation
// frequency, operator, threshold, severity, auto-mitigate) and builds the
// webhook payloads of fired and resolved alerts, a simplified form of Azure
// Monitor's common alert schema.
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

	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// Metrics are the metric names a rule may read, with the label sets each
// is published with (a rule's labels must be one of them).
var Metrics = map[string][][]string{
	"gpu_allocation_ratio":    {{}, {"flavor"}, {"region"}, {"flavor", "region"}},
	"gpus_allocated":          {{}, {"flavor"}, {"region"}, {"flavor", "region"}, {"tenant"}},
	"gpus_capacity":           {{}, {"flavor"}, {"region"}, {"flavor", "region"}},
	"pending_gpus":            {{}, {"tenant"}},
	"pending_workloads":       {{}, {"tenant"}},
	"preemptions":             {{}, {"tenant"}},
	"reservation_utilization": {{"tenant", "reservation"}},
	"schedule_cycle_seconds":  {{}},
	"plan_conflicts":          {{}},
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
	Pos         yamlfile.Pos      `json:"-"`
	Name        string            `yaml:"name" json:"name"`
	Description string            `yaml:"description" json:"description,omitempty"`
	Metric      string            `yaml:"metric" json:"metric"`
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

// Load decodes and validates an alert rules file; problems carry
// file:line:col and the field.
func Load(file string, data []byte) (*File, error) {
	var f File
	if err := yamlfile.Decode(file, data, &f); err != nil {
		return nil, err
	}
	if errs := f.validate(file); len(errs) > 0 {
		return nil, errs.Err()
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
		sets, ok := Metrics[r.Metric]
		if !ok {
			errs.Add(p, field("metric"), "unknown metric %q (known: %s)", r.Metric, strings.Join(sortedMetrics(), ", "))
		} else if !labelSetOK(sets, r.Labels) {
			errs.Add(p, field("labels"), "metric %s is published with the labels %s, not %s", r.Metric, describeSets(sets), describeSet(keys(r.Labels)))
		}
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
		if r.Split && !anyWildcard(r.Labels) {
			errs.Add(p, field("split"), "split needs a label whose value is \"*\" (it alerts per value of such labels)")
		}
	}
	return errs
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
	out := make([]string, 0, len(Metrics))
	for m := range Metrics {
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
