package alert

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
)

// Sample is one observation of a metric series.
type Sample struct {
	Metric string
	Labels map[string]string
	Value  float64
}

type point struct {
	t time.Time
	v float64
}

// series is the recent history of one metric and label set.
type series struct {
	metric string
	labels map[string]string
	points []point
}

// Condition of an alert.
const (
	Fired    = "Fired"
	Resolved = "Resolved"
)

// State is a rule's evaluation state.
type State struct {
	Rule          Rule      `json:"rule"`
	Fired         bool      `json:"fired"`
	FiredAt       time.Time `json:"fired_at,omitzero"`
	LastEvaluated time.Time `json:"last_evaluated,omitzero"`
	// LastValue is the aggregate of the last evaluation; HasValue is false
	// when the window held no sample. For a split rule they are those of
	// the instance with the most extreme value (by the operator), and
	// Fired says whether any instance is fired.
	LastValue float64 `json:"last_value"`
	HasValue  bool    `json:"has_value"`
	// Instances are a split rule's alerts, one per series seen, by labels.
	Instances []Instance `json:"instances,omitempty"`
}

// Instance is one series' alert of a split rule.
type Instance struct {
	Labels    map[string]string `json:"labels"`
	Fired     bool              `json:"fired"`
	FiredAt   time.Time         `json:"fired_at,omitzero"`
	LastValue float64           `json:"last_value"`
	HasValue  bool              `json:"has_value"`
}

type ruleState struct {
	rule    Rule
	webhook string
	key     string // the rule's definition, to keep state across reapplies
	State
	next time.Time
	// inst holds a split rule's instances by series key.
	inst map[string]*Instance
}

// Notification is a fired or resolved alert, ready to POST.
type Notification struct {
	Webhook string
	Payload Payload
}

// Evaluator holds the rules, the samples of their windows and each rule's
// state. It is not safe for concurrent use.
type Evaluator struct {
	rules  []*ruleState
	series map[string]*series
	keep   time.Duration
}

// NewEvaluator returns an evaluator of a rules file (nil: no rules).
func NewEvaluator(f *File) *Evaluator {
	e := &Evaluator{series: map[string]*series{}}
	e.SetRules(f)
	return e
}

func ruleKey(r Rule, webhook string) string {
	b, _ := json.Marshal(r)
	return fmt.Sprintf("%s|%d|%v|%v|%s", b, r.Sev(), r.Mitigates(), r.On(), webhook)
}

// SetRules replaces the rules; a rule whose definition did not change
// keeps its state (a fired alert stays fired without a new notification).
// Fired alerts of removed or changed rules are dropped silently.
func (e *Evaluator) SetRules(f *File) {
	old := map[string]*ruleState{}
	for _, rs := range e.rules {
		old[rs.key] = rs
	}
	e.rules = nil
	e.keep = 0
	if f == nil {
		return
	}
	for _, r := range f.Rules {
		wh := r.Webhook
		if wh == "" {
			wh = f.Webhook
		}
		k := ruleKey(r, wh)
		if rs, ok := old[k]; ok {
			rs.rule, rs.State.Rule = r, r
			e.rules = append(e.rules, rs)
		} else {
			e.rules = append(e.rules, &ruleState{rule: r, webhook: wh, key: k, State: State{Rule: r}})
		}
		e.keep = max(e.keep, r.Window)
	}
}

// PromQueries returns the Prometheus queries the enabled rules read, each
// once, ordered by series: what the server runs for them.
func (e *Evaluator) PromQueries() []policy.PromQuery {
	var qs []policy.PromQuery
	for _, rs := range e.rules {
		if q, ok := rs.rule.Prom(); ok && rs.rule.On() {
			qs = append(qs, q)
		}
	}
	return policy.DistinctPromQueries(qs)
}

func seriesKey(metric string, labels map[string]string) string {
	var b strings.Builder
	b.WriteString(metric)
	for _, k := range keys(labels) {
		b.WriteString("|" + k + "=" + labels[k])
	}
	return b.String()
}

// Observe records samples taken at now and forgets samples older than the
// longest window.
func (e *Evaluator) Observe(now time.Time, samples []Sample) {
	for _, s := range samples {
		k := seriesKey(s.Metric, s.Labels)
		ser := e.series[k]
		if ser == nil {
			ser = &series{metric: s.Metric, labels: s.Labels}
			e.series[k] = ser
		}
		ser.points = append(ser.points, point{now, s.Value})
	}
	cut := now.Add(-e.keep)
	for k, ser := range e.series {
		i := 0
		for i < len(ser.points) && !ser.points[i].t.After(cut) {
			i++
		}
		ser.points = ser.points[i:]
		if len(ser.points) == 0 {
			delete(e.series, k)
		}
	}
}

// matches reports whether a series is the rule's: same metric, same
// label names, each value equal or the rule's "*".
func matches(r *Rule, s *series) bool {
	dims := r.Dims()
	if s.metric != r.seriesName() || len(s.labels) != len(dims) {
		return false
	}
	for k, want := range dims {
		got, ok := s.labels[k]
		if !ok || (want != "*" && got != want) {
			return false
		}
	}
	return true
}

// aggregate folds the rule's samples in (now-window, now].
func (e *Evaluator) aggregate(r *Rule, now time.Time) (float64, bool) {
	var ss []*series
	for _, k := range e.sortedSeries() {
		if s := e.series[k]; matches(r, s) {
			ss = append(ss, s)
		}
	}
	return fold(r, ss, now)
}

// fold aggregates the samples of ss in (now-window, now].
func fold(r *Rule, ss []*series, now time.Time) (float64, bool) {
	from := now.Add(-r.Window)
	var sum, n float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range s.points {
			if !p.t.After(from) || p.t.After(now) {
				continue
			}
			sum += p.v
			n++
			lo, hi = min(lo, p.v), max(hi, p.v)
		}
	}
	if r.Aggregation == "count" {
		return n, true
	}
	if n == 0 {
		if r.Aggregation == "total" {
			return 0, true
		}
		return 0, false
	}
	switch r.Aggregation {
	case "avg":
		return sum / n, true
	case "max":
		return hi, true
	case "min":
		return lo, true
	default: // total
		return sum, true
	}
}

func (e *Evaluator) sortedSeries() []string {
	out := make([]string, 0, len(e.series))
	for k := range e.series {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func compare(op string, v, threshold float64) bool {
	switch op {
	case ">":
		return v > threshold
	case ">=":
		return v >= threshold
	case "<":
		return v < threshold
	case "<=":
		return v <= threshold
	}
	return false
}

// Evaluate evaluates every rule that is due at now (a rule is due every
// Frequency from its first evaluation) and returns the notifications of
// the alerts that fired or resolved. A window without samples leaves the
// state as it is (no data is neither a breach nor a recovery).
func (e *Evaluator) Evaluate(now time.Time) []Notification {
	var out []Notification
	for _, rs := range e.rules {
		r := &rs.rule
		if !r.On() || now.Before(rs.next) {
			continue
		}
		rs.next = now.Add(r.Frequency)
		if r.Split {
			out = append(out, e.evaluateSplit(rs, now)...)
			continue
		}
		v, ok := e.aggregate(r, now)
		rs.LastEvaluated, rs.LastValue, rs.HasValue = now, v, ok
		if n, changed := rs.step(&rs.Fired, &rs.FiredAt, r.Dims(), v, ok, now); changed {
			out = append(out, n)
		}
	}
	return out
}

// step moves one alert (the rule's, or a split instance's, whose fired
// state and time are given) on a new value: it fires when the condition
// becomes true and, with auto-mitigate, resolves when it clears. No value
// changes nothing.
func (rs *ruleState) step(fired *bool, firedAt *time.Time, labels map[string]string, v float64, ok bool, now time.Time) (Notification, bool) {
	r := &rs.rule
	if !ok {
		return Notification{}, false
	}
	breach := compare(r.Operator, v, r.Threshold)
	switch {
	case breach && !*fired:
		*fired, *firedAt = true, now
		return Notification{Webhook: rs.webhook, Payload: payload(r, labels, Fired, now, time.Time{}, v)}, true
	case !breach && *fired && r.Mitigates():
		*fired = false
		return Notification{Webhook: rs.webhook, Payload: payload(r, labels, Resolved, *firedAt, now, v)}, true
	}
	return Notification{}, false
}

// evaluateSplit evaluates each matching series of a split rule as its own
// alert. A series without samples in the window leaves its alert as it is.
func (e *Evaluator) evaluateSplit(rs *ruleState, now time.Time) []Notification {
	r := &rs.rule
	if rs.inst == nil {
		rs.inst = map[string]*Instance{}
	}
	var out []Notification
	for _, k := range e.sortedSeries() {
		s := e.series[k]
		if !matches(r, s) {
			continue
		}
		in := rs.inst[k]
		if in == nil {
			in = &Instance{Labels: s.labels}
			rs.inst[k] = in
		}
		v, ok := fold(r, []*series{s}, now)
		in.LastValue, in.HasValue = v, ok
		if n, changed := rs.step(&in.Fired, &in.FiredAt, s.labels, v, ok, now); changed {
			out = append(out, n)
		}
	}
	// The rule's summary: fired if any instance is, and the most extreme
	// value by the operator.
	rs.LastEvaluated, rs.Fired, rs.HasValue = now, false, false
	rs.Instances = make([]Instance, 0, len(rs.inst))
	keys := make([]string, 0, len(rs.inst))
	for k := range rs.inst {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		in := rs.inst[k]
		rs.Instances = append(rs.Instances, *in)
		if in.Fired && (!rs.Fired || in.FiredAt.Before(rs.FiredAt)) {
			rs.FiredAt = in.FiredAt
		}
		rs.Fired = rs.Fired || in.Fired
		if in.HasValue && (!rs.HasValue || worse(r.Operator, in.LastValue, rs.LastValue)) {
			rs.LastValue, rs.HasValue = in.LastValue, true
		}
	}
	return out
}

// worse reports whether a is further than b in the operator's direction.
func worse(op string, a, b float64) bool {
	if op == "<" || op == "<=" {
		return a < b
	}
	return a > b
}

// States returns each rule's state, in the file's order.
func (e *Evaluator) States() []State {
	out := make([]State, len(e.rules))
	for i, rs := range e.rules {
		out[i] = rs.State
	}
	return out
}

// Payload is the body POSTed to a webhook: Azure Monitor's common alert
// schema, simplified to a metric alert with one criterion.
type Payload struct {
	SchemaID string `json:"schemaId"`
	Data     Data   `json:"data"`
}

// Data of a payload.
type Data struct {
	Essentials   Essentials   `json:"essentials"`
	AlertContext AlertContext `json:"alertContext"`
}

// Essentials identify the alert and its condition.
type Essentials struct {
	AlertID           string     `json:"alertId"`
	AlertRule         string     `json:"alertRule"`
	Severity          string     `json:"severity"`
	SignalType        string     `json:"signalType"`
	MonitorCondition  string     `json:"monitorCondition"`
	MonitoringService string     `json:"monitoringService"`
	FiredDateTime     time.Time  `json:"firedDateTime"`
	ResolvedDateTime  *time.Time `json:"resolvedDateTime,omitempty"`
	Description       string     `json:"description,omitempty"`
}

// AlertContext holds the condition evaluated.
type AlertContext struct {
	ConditionType string    `json:"conditionType"`
	Condition     Condition `json:"condition"`
}

// Condition of a metric alert.
type Condition struct {
	WindowSize          string      `json:"windowSize"`
	EvaluationFrequency string      `json:"evaluationFrequency"`
	AllOf               []Criterion `json:"allOf"`
}

// Criterion is one metric comparison and the value that decided it.
type Criterion struct {
	MetricName      string      `json:"metricName"`
	Dimensions      []Dimension `json:"dimensions"`
	Operator        string      `json:"operator"`
	Threshold       string      `json:"threshold"`
	TimeAggregation string      `json:"timeAggregation"`
	MetricValue     float64     `json:"metricValue"`
}

// Dimension is a label filter of the criterion.
type Dimension struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

var opNames = map[string]string{">": "GreaterThan", ">=": "GreaterThanOrEqual", "<": "LessThan", "<=": "LessThanOrEqual"}
var aggNames = map[string]string{"avg": "Average", "max": "Maximum", "min": "Minimum", "total": "Total", "count": "Count"}

// isoDuration writes whole seconds as an ISO 8601 duration (PT5M, PT90S).
func isoDuration(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s%3600 == 0:
		return "PT" + strconv.FormatInt(s/3600, 10) + "H"
	case s%60 == 0:
		return "PT" + strconv.FormatInt(s/60, 10) + "M"
	}
	return "PT" + strconv.FormatInt(s, 10) + "S"
}

// payload describes the alert of rule r on the series with these labels
// (the rule's own labels, or a split instance's values).
func payload(r *Rule, labels map[string]string, cond string, fired, resolved time.Time, v float64) Payload {
	dims := []Dimension{}
	id := "arbiter/alerts/" + r.Name
	for _, k := range keys(labels) {
		dims = append(dims, Dimension{Name: k, Value: labels[k]})
		if r.Split {
			id += "/" + k + "=" + labels[k]
		}
	}
	p := Payload{SchemaID: "azureMonitorCommonAlertSchema", Data: Data{
		Essentials: Essentials{
			AlertID:           fmt.Sprintf("%s/%d", id, fired.UnixNano()),
			AlertRule:         r.Name,
			Severity:          fmt.Sprintf("Sev%d", r.Sev()),
			SignalType:        "Metric",
			MonitorCondition:  cond,
			MonitoringService: "Arbiter",
			FiredDateTime:     fired.UTC(),
			Description:       r.Description,
		},
		AlertContext: AlertContext{
			ConditionType: "SingleResourceMultipleMetricCriteria",
			Condition: Condition{
				WindowSize:          isoDuration(r.Window),
				EvaluationFrequency: isoDuration(r.Frequency),
				AllOf: []Criterion{{
					MetricName: r.displayMetric(), Dimensions: dims, Operator: opNames[r.Operator],
					Threshold: strconv.FormatFloat(r.Threshold, 'g', -1, 64), TimeAggregation: aggNames[r.Aggregation],
					MetricValue: v,
				}},
			},
		},
	}}
	if !resolved.IsZero() {
		t := resolved.UTC()
		p.Data.Essentials.ResolvedDateTime = &t
	}
	return p
}

// Saved is what survives a restart of a rule's alerts: whether each is
// fired and since when (the whole rule's, or each split instance's by
// series).
type Saved struct {
	Fired     bool                  `json:"fired,omitempty"`
	FiredAt   time.Time             `json:"fired_at,omitzero"`
	Instances map[string]SavedAlert `json:"instances,omitempty"`
}

// SavedAlert is one split instance's saved state.
type SavedAlert struct {
	Labels  map[string]string `json:"labels"`
	FiredAt time.Time         `json:"fired_at"`
}

// Save returns the fired alerts by rule definition (a changed rule does
// not inherit its old state).
func (e *Evaluator) Save() map[string]Saved {
	out := map[string]Saved{}
	for _, rs := range e.rules {
		sv := Saved{Fired: rs.Fired, FiredAt: rs.FiredAt}
		if rs.rule.Split {
			sv.Fired, sv.FiredAt = false, time.Time{}
			for k, in := range rs.inst {
				if in.Fired {
					if sv.Instances == nil {
						sv.Instances = map[string]SavedAlert{}
					}
					sv.Instances[k] = SavedAlert{Labels: in.Labels, FiredAt: in.FiredAt}
				}
			}
		}
		if sv.Fired || len(sv.Instances) > 0 {
			out[rs.key] = sv
		}
	}
	return out
}

// Restore marks the alerts of rules with an unchanged definition fired as
// saved, so that a restarted server neither fires them again nor forgets
// to resolve them.
func (e *Evaluator) Restore(m map[string]Saved) {
	for _, rs := range e.rules {
		sv, ok := m[rs.key]
		if !ok {
			continue
		}
		if !rs.rule.Split {
			rs.Fired, rs.FiredAt = sv.Fired, sv.FiredAt
			continue
		}
		if rs.inst == nil {
			rs.inst = map[string]*Instance{}
		}
		for k, a := range sv.Instances {
			rs.inst[k] = &Instance{Labels: a.Labels, Fired: true, FiredAt: a.FiredAt}
			if !rs.Fired || a.FiredAt.Before(rs.FiredAt) {
				rs.FiredAt = a.FiredAt
			}
			rs.Fired = true
		}
	}
}
