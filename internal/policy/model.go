package policy

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// Sentinel errors. Problems in a policy file come back wrapped in ErrInvalid
// together with a yamlfile.Errors value that lists each one with its
// file:line:column and field path.
var (
	// ErrInvalid wraps every problem found while loading or validating a policy.
	ErrInvalid = errors.New("policy: invalid policy")
	// ErrNoMetric reports a metric the Metrics source could not give.
	ErrNoMetric = errors.New("policy: metric not available")
	// ErrExpr reports a CEL expression that failed at evaluation time.
	ErrExpr = errors.New("policy: expression failed")
	// ErrTimeBackwards reports an Evaluate call with a time before the previous one.
	ErrTimeBackwards = errors.New("policy: time went backwards")
)

// Pos is a position in a policy file.
type Pos = yamlfile.Pos

// Format is the dialect a policy file was written in.
type Format int

const (
	// FormatOperators is the operators' format: a top-level
	// `scheduling_policies:` list, as in ARCHITECTURE.md.
	FormatOperators Format = iota + 1
	// FormatNative is Arbiter's fuller format: a top-level `policies:` list.
	FormatNative
)

func (f Format) String() string {
	switch f {
	case FormatOperators:
		return "operators"
	case FormatNative:
		return "native"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Metric names a measured quantity a condition can test.
type Metric int

const (
	MetricNone Metric = iota
	// MetricUtilization is the mean share of GPUs in use (fraction) in the window.
	MetricUtilization
	// MetricP50Latency, MetricP95Latency and MetricP99Latency are request
	// latency percentiles (seconds) of a service over the window.
	MetricP50Latency
	MetricP95Latency
	MetricP99Latency
	// MetricQueueWait is the mean time (seconds) workloads waited before admission.
	MetricQueueWait
	// MetricPendingGPUs is the latest number of GPUs requested by pending workloads.
	MetricPendingGPUs
	// MetricSpotPrice is the latest spot price, dollars per GPU-hour.
	MetricSpotPrice
	// MetricCapacityFailureRate is the mean share (fraction) of capacity
	// requests that could not be served.
	MetricCapacityFailureRate
	// MetricSuccessRatio is the mean share (fraction) of a service's
	// probe attempts that succeeded (see internal/probe).
	MetricSuccessRatio
	// MetricBusyUtilization is the mean busy ratio (fraction) over the
	// window of the GPUs measured: what NVML says the GPUs did, where
	// MetricUtilization is the share handed out. On the server it comes
	// from the agents' heartbeats; in the simulator from its busy model.
	// A condition selects it with metric: busy_utilization, or with
	// metric: utilization (resource_type + utilization_threshold in the
	// operators' format) and utilization: busy.
	MetricBusyUtilization
	metricCount
)

var metricNames = [...]string{"", "utilization", "p50_latency", "p95_latency", "p99_latency",
	"queue_wait", "pending_gpus", "spot_price", "capacity_failure_rate", "success_ratio", "busy_utilization"}

func (m Metric) String() string {
	if m > MetricNone && m < metricCount {
		return metricNames[m]
	}
	return fmt.Sprintf("Metric(%d)", int(m))
}

// AllMetrics returns every metric, in a fixed order.
func AllMetrics() []Metric {
	out := make([]Metric, 0, metricCount-1)
	for m := MetricNone + 1; m < metricCount; m++ {
		out = append(out, m)
	}
	return out
}

// ParseMetric parses a metric name.
func ParseMetric(s string) (Metric, error) {
	for m := MetricNone + 1; m < metricCount; m++ {
		if metricNames[m] == s {
			return m, nil
		}
	}
	return MetricNone, fmt.Errorf("unknown metric %q%s: write one of %s", s, didYouMean(s, metricNames[1:]), strings.Join(metricNames[1:], ", "))
}

// UnmarshalYAMLScalar implements yamlfile.Unmarshaler.
func (m *Metric) UnmarshalYAMLScalar(s string) error {
	v, err := ParseMetric(s)
	*m = v
	return err
}

// Dim is the dimension the metric is measured in.
func (m Metric) Dim() Dimension {
	switch m {
	case MetricUtilization, MetricCapacityFailureRate, MetricSuccessRatio, MetricBusyUtilization:
		return DimFraction
	case MetricP50Latency, MetricP95Latency, MetricP99Latency, MetricQueueWait:
		return DimDuration
	case MetricPendingGPUs:
		return DimCount
	case MetricSpotPrice:
		return DimPrice
	}
	return DimNone
}

// Series is the raw time series a metric is computed from, and how.
// Several metrics share a series: p50/p95/p99 latency all read "latency".
func (m Metric) Series() (name string, agg Aggregation, q float64) {
	switch m {
	case MetricUtilization:
		return "utilization", AggMean, 0
	case MetricP50Latency:
		return "latency", AggQuantile, 0.50
	case MetricP95Latency:
		return "latency", AggQuantile, 0.95
	case MetricP99Latency:
		return "latency", AggQuantile, 0.99
	case MetricQueueWait:
		return "queue_wait", AggMean, 0
	case MetricPendingGPUs:
		return "pending_gpus", AggLast, 0
	case MetricSpotPrice:
		return "spot_price", AggLast, 0
	case MetricCapacityFailureRate:
		return "capacity_failure_rate", AggMean, 0
	case MetricSuccessRatio:
		return "success", AggMean, 0
	case MetricBusyUtilization:
		return "busy_utilization", AggMean, 0
	}
	return "", AggLast, 0
}

// Aggregation is how a metric reduces its window of samples to one value.
type Aggregation int

const (
	AggLast Aggregation = iota
	AggMean
	AggQuantile
)

func (a Aggregation) String() string {
	switch a {
	case AggLast:
		return "last"
	case AggMean:
		return "mean"
	case AggQuantile:
		return "quantile"
	}
	return fmt.Sprintf("Aggregation(%d)", int(a))
}

// Op is how a metric is compared with its threshold.
type Op int

const (
	// OpAbove holds while the value is strictly greater than the threshold.
	OpAbove Op = iota + 1
	// OpBelow holds while the value is strictly less than the threshold.
	OpBelow
)

func (o Op) String() string {
	switch o {
	case OpAbove:
		return "above"
	case OpBelow:
		return "below"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Symbol is the comparison sign.
func (o Op) Symbol() string {
	if o == OpBelow {
		return "<"
	}
	return ">"
}

// CondKind is the shape of a condition.
type CondKind int

const (
	// CondMetric compares one metric of one target with a threshold.
	CondMetric CondKind = iota + 1
	// CondAll holds when every child holds.
	CondAll
	// CondAny holds when at least one child holds.
	CondAny
	// CondExpr is a CEL expression over the metrics.
	CondExpr
)

func (k CondKind) String() string {
	switch k {
	case CondMetric:
		return "metric"
	case CondAll:
		return "all"
	case CondAny:
		return "any"
	case CondExpr:
		return "expr"
	}
	return fmt.Sprintf("CondKind(%d)", int(k))
}

// ActionType is what an action does to the scheduler's input.
type ActionType int

const (
	ActionNone ActionType = iota
	// ActionScaleDown shrinks the target's limit to MinCapacity of its
	// normal value; preemptible excess is evicted gracefully.
	ActionScaleDown
	// ActionMigrate moves the target's workloads to Destination (a pool or
	// region); they are requeued from their last checkpoint.
	ActionMigrate
	// ActionReallocate gives Resources priority Priority and, when Guarantee
	// is set, a temporary guarantee of that many GPUs.
	ActionReallocate
	// ActionSetPriority sets the target's priority class.
	ActionSetPriority
	// ActionSetLimit sets the target's limit to Limit GPUs.
	ActionSetLimit
	// ActionSetSpotPrice sets the spot price of the target (pool, flavor or region).
	ActionSetSpotPrice
	// ActionDrain stops admitting new work to the target pool.
	ActionDrain
	// ActionNotify sends Message to Channel; it changes nothing else.
	ActionNotify
	actionCount
)

var actionNames = [...]string{"", "scale_down", "migrate", "reallocate", "set_priority",
	"set_limit", "set_spot_price", "drain", "notify"}

func (a ActionType) String() string {
	if a > ActionNone && a < actionCount {
		return actionNames[a]
	}
	return fmt.Sprintf("ActionType(%d)", int(a))
}

// ParseActionType parses an action type name.
func ParseActionType(s string) (ActionType, error) {
	for a := ActionNone + 1; a < actionCount; a++ {
		if actionNames[a] == s {
			return a, nil
		}
	}
	return ActionNone, fmt.Errorf("unknown action type %q%s: write one of %s", s, didYouMean(s, actionNames[1:]), strings.Join(actionNames[1:], ", "))
}

// UnmarshalYAMLScalar implements yamlfile.Unmarshaler.
func (a *ActionType) UnmarshalYAMLScalar(s string) error {
	v, err := ParseActionType(s)
	*a = v
	return err
}

// Priority is a workload priority class.
type Priority int

const (
	PriorityNone Priority = iota
	PrioritySpot
	PriorityLow
	PriorityNormal
	PriorityHigh
	PriorityCritical
	priorityCount
)

var priorityNames = [...]string{"", "spot", "low", "normal", "high", "critical"}

func (p Priority) String() string {
	if p > PriorityNone && p < priorityCount {
		return priorityNames[p]
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// ParsePriority parses a priority class name.
func ParsePriority(s string) (Priority, error) {
	for p := PriorityNone + 1; p < priorityCount; p++ {
		if priorityNames[p] == s {
			return p, nil
		}
	}
	return PriorityNone, fmt.Errorf("unknown priority %q%s: write one of critical, high, normal, low, spot", s, didYouMean(s, priorityNames[1:]))
}

// UnmarshalYAMLScalar implements yamlfile.Unmarshaler.
func (p *Priority) UnmarshalYAMLScalar(s string) error {
	v, err := ParsePriority(s)
	*p = v
	return err
}

// TargetKind says what a target names.
type TargetKind int

const (
	// TargetUnresolved is a bare name ("developer_instances"); Resolve finds
	// which kind of thing it names.
	TargetUnresolved TargetKind = iota
	// TargetCluster is the whole fleet (`resource_type: gpu_cluster`).
	TargetCluster
	TargetTenant
	// TargetClass is a workload class (e.g. batch_jobs, inference).
	TargetClass
	TargetPool
	TargetService
	TargetFlavor
	TargetRegion
	// TargetSelector matches workloads by labels; Name holds "k=v,k2=v2" sorted.
	TargetSelector
	targetKindCount
)

var targetKindNames = [...]string{"", "cluster", "tenant", "class", "pool", "service", "flavor", "region", "selector"}

func (k TargetKind) String() string {
	if k == TargetUnresolved {
		return "unresolved"
	}
	if k > 0 && k < targetKindCount {
		return targetKindNames[k]
	}
	return fmt.Sprintf("TargetKind(%d)", int(k))
}

// Target names what a condition measures or an action changes. Targets are
// comparable and can be map keys.
type Target struct {
	Kind TargetKind
	Name string
}

// Cluster is the whole-fleet target.
var Cluster = Target{Kind: TargetCluster}

// String writes the target as it is written in a native policy file:
// "tenant:acme", "selector:team=ml", "cluster", or a bare name.
func (t Target) String() string {
	switch t.Kind {
	case TargetUnresolved:
		return t.Name
	case TargetCluster:
		return "cluster"
	}
	return t.Kind.String() + ":" + t.Name
}

// Labels returns a selector's labels; nil for other kinds.
func (t Target) Labels() map[string]string {
	if t.Kind != TargetSelector {
		return nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(t.Name, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// ParseTarget parses "kind:name", "selector:k=v,k2=v2", "cluster" (or
// "gpu_cluster") or a bare name.
func ParseTarget(s string) (Target, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Target{}, errors.New("empty target: write a name, or kind:name with kind one of " + strings.Join(targetKindNames[2:], ", "))
	}
	if s == "cluster" || s == "gpu_cluster" {
		return Cluster, nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if !ok {
		if !validName(s) {
			return Target{}, fmt.Errorf("invalid target %q: names use letters, digits, '-', '_' and '.'", s)
		}
		return Target{Kind: TargetUnresolved, Name: s}, nil
	}
	var k TargetKind
	for i := TargetTenant; i < targetKindCount; i++ {
		if targetKindNames[i] == kind {
			k = i
		}
	}
	if k == TargetUnresolved {
		return Target{}, fmt.Errorf("invalid target kind %q in %q%s: write one of %s", kind, s, didYouMean(kind, targetKindNames[2:]), strings.Join(targetKindNames[2:], ", "))
	}
	if k == TargetSelector {
		sel, err := parseSelector(name)
		if err != nil {
			return Target{}, err
		}
		return Target{Kind: k, Name: sel}, nil
	}
	if !validName(name) {
		return Target{}, fmt.Errorf("invalid %s name %q: names use letters, digits, '-', '_' and '.'", kind, name)
	}
	return Target{Kind: k, Name: name}, nil
}

func parseSelector(s string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return "", errors.New("empty selector: write selector:key=value[,key=value]")
	}
	var pairs []string
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !validName(k) || (v != "" && !validName(v)) {
			return "", fmt.Errorf("invalid selector %q: write selector:key=value[,key=value]", s)
		}
		if seen[k] {
			return "", fmt.Errorf("invalid selector %q: label %q appears twice", s, k)
		}
		seen[k] = true
		pairs = append(pairs, k+"="+v)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ","), nil
}

func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.', r == '/':
		default:
			return false
		}
	}
	return true
}

// Policy is a loaded policy file.
type Policy struct {
	File   string
	Format Format
	Rules  []Rule
}

// Rule is one policy: when Condition holds, Actions apply, under Options.
type Rule struct {
	Pos         Pos
	Path        string // field path of the rule in its file, e.g. "policies[1]"
	Name        string
	Description string
	When        Condition
	Actions     []Action
	Options     Options
}

// Options tune how a rule's actions switch on and off.
type Options struct {
	// Enabled rules are evaluated; disabled ones are skipped entirely.
	Enabled bool
	// DryRun rules are evaluated and their firings logged, but their actions
	// are not in Step.Active.
	DryRun bool
	// Cooldown is the least time between two changes of the rule's state:
	// an active rule reverts only once its condition has been clear for
	// Cooldown, and at least Cooldown after it fired; a reverted rule fires
	// again at least Cooldown after it reverted.
	Cooldown time.Duration
	// MaxDuration, when set, ends the actions after that long even while the
	// condition holds; the rule fires again only after its condition cleared.
	MaxDuration time.Duration
}

// DefaultCooldown applies when a rule does not set a cooldown.
const DefaultCooldown = 5 * time.Minute

// Condition is a tree: metric comparisons and CEL expressions at the
// leaves, all/any above them.
type Condition struct {
	Pos  Pos
	Path string
	Kind CondKind

	// CondMetric
	Metric Metric
	// Prom, when set, makes the leaf read a Prometheus query instead of
	// Metric (which is then MetricNone): `source: prometheus`.
	Prom      *PromQuery
	Target    Target
	Op        Op
	Threshold Quantity
	// NoData says what a leaf without a value means (no sample, a stale
	// one, a failed query): by default it does not hold.
	NoData NoData
	// Hysteresis widens the band for clearing: an above-condition that
	// holds clears only when the value falls to Threshold−Hysteresis or below.
	Hysteresis Quantity

	// CondExpr
	Expr string

	// CondAll, CondAny
	Children []Condition

	// For is how long the leaf must hold continuously before it counts as
	// true (metric and expr leaves).
	For time.Duration

	at             map[string]Pos // exact positions of fields, for messages
	targetField    string         // what the target is called in the file
	thresholdField string         // what the threshold is called in the file
}

// NoData is what a metric leaf without a value means (`no_data:`).
type NoData int

const (
	// NoDataFalse: the leaf does not hold (and its `for` starts again).
	NoDataFalse NoData = iota
	// NoDataTrue: the leaf holds, as if its value were past the threshold.
	NoDataTrue
	// NoDataHold: the leaf keeps the state it had at the last value.
	NoDataHold
)

func (n NoData) String() string {
	switch n {
	case NoDataFalse:
		return "false"
	case NoDataTrue:
		return "true"
	case NoDataHold:
		return "hold"
	}
	return fmt.Sprintf("NoData(%d)", int(n))
}

// PromQuery is a leaf's Prometheus query: a PromQL expression that a
// Prometheus server evaluates (GET/POST /api/v1/query). The caller runs
// it and records each sample of the result with Windows.Observe under
// Series(), for the target TargetFor gives its labels; the leaf reads the
// newest value.
type PromQuery struct {
	// Server is the server's base URL (http or https, no userinfo).
	Server string
	// Expr is the PromQL expression, in the result's units (seconds,
	// fractions: the threshold is compared with it in base units).
	Expr string
	// TargetLabel is the result label whose value names the target, as
	// TargetKind:<value>; empty when the query gives one series, which is
	// the cluster's.
	TargetLabel string
	TargetKind  TargetKind
}

// Series is the name of the series the query's results are recorded in.
// Two leaves with the same query share it.
func (q PromQuery) Series() string {
	return "prometheus " + q.Server + " " + q.TargetLabel + "/" + q.TargetKind.String() + " " + q.Expr
}

// TargetFor returns the target a result sample with labels stands for,
// and false when it names none (the label is missing or is not a valid
// name).
func (q PromQuery) TargetFor(labels map[string]string) (Target, bool) {
	if q.TargetLabel == "" {
		return Cluster, true
	}
	v := labels[q.TargetLabel]
	if !validName(v) {
		return Target{}, false
	}
	return Target{Kind: q.TargetKind, Name: v}, true
}

// Limits of a Prometheus leaf.
const (
	MaxPromServerLen = 2048
	MaxPromQueryLen  = 4096
)

// dim is the dimension the leaf's value is measured in: its metric's, or
// for a Prometheus leaf its threshold's.
func (c *Condition) dim() Dimension {
	if c.Prom != nil {
		return c.Threshold.Dim
	}
	return c.Metric.Dim()
}

// Action is one change a rule makes while active. Which fields matter
// depends on Type; see ActionType.
type Action struct {
	Pos  Pos
	Path string
	Type ActionType

	Target      Target
	MinCapacity Quantity // scale_down: fraction of the normal limit to keep
	Destination Target   // migrate: pool or region
	Resources   []Target // reallocate
	Priority    Priority // reallocate, set_priority
	Guarantee   Quantity // reallocate: temporary guarantee, GPUs
	Limit       Quantity // set_limit: GPUs
	Price       Quantity // set_spot_price: dollars per GPU-hour
	Channel     string   // notify
	Message     string   // notify

	at map[string]Pos
}

// fieldPos returns the exact position of a field when known, else the
// position of the mapping that holds it.
func fieldPos(at map[string]Pos, field string, def Pos) Pos {
	if p, ok := at[field]; ok {
		return p
	}
	return def
}

// didYouMean returns ` (did you mean "x"?)` when a known name is close to s.
func didYouMean(s string, known []string) string { return yamlfile.DidYouMean(s, known) }
