package policy

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// The file layer: what the YAML decodes into before conversion to Rule.
// Fields whose exact position matters later (targets) are kept as nodes.

type rawFile struct {
	SchedulingPolicies []opRule     `yaml:"scheduling_policies"`
	Policies           []nativeRule `yaml:"policies"`
}

// ruleOptions are accepted by both formats.
type ruleOptions struct {
	Description string    `yaml:"description"`
	Cooldown    *Duration `yaml:"cooldown"`
	MaxDuration *Duration `yaml:"max_duration"`
	Enabled     *bool     `yaml:"enabled"`
	DryRun      bool      `yaml:"dry_run"`
	Hysteresis  yaml.Node `yaml:"hysteresis"`
}

type opRule struct {
	Pos        Pos
	Name       string      `yaml:"name"`
	Conditions []opCond    `yaml:"conditions"`
	Actions    []rawAction `yaml:"actions"`
	Options    ruleOptions `yaml:",inline"`
}

type opCond struct {
	Pos                  Pos
	ResourceType         yaml.Node `yaml:"resource_type"`
	UtilizationThreshold yaml.Node `yaml:"utilization_threshold"`
	Metric               *Metric   `yaml:"metric"`
	Target               yaml.Node `yaml:"target"`
	Threshold            yaml.Node `yaml:"threshold"`
	Duration             *Duration `yaml:"duration"`
	Hysteresis           yaml.Node `yaml:"hysteresis"`
	// Utilization selects what a utilization condition measures:
	// allocation (the default) or busy (see utilizationKind).
	Utilization yaml.Node  `yaml:"utilization"`
	NoData      yaml.Node  `yaml:"no_data"`
	Prom        promFields `yaml:",inline"`
}

// promFields are a leaf's Prometheus query (source: prometheus), in both
// formats.
type promFields struct {
	Source      yaml.Node `yaml:"source"`
	Server      yaml.Node `yaml:"server"`
	Query       yaml.Node `yaml:"query"`
	TargetLabel yaml.Node `yaml:"target_label"`
}

func (f *promFields) present() bool {
	return f.Source.Kind != 0 || f.Server.Kind != 0 || f.Query.Kind != 0 || f.TargetLabel.Kind != 0
}

type nativeRule struct {
	Pos     Pos
	Name    string      `yaml:"name"`
	When    *nativeCond `yaml:"when"`
	Then    []rawAction `yaml:"then"`
	Options ruleOptions `yaml:",inline"`
}

type nativeCond struct {
	Pos        Pos
	Metric     *Metric   `yaml:"metric"`
	Of         yaml.Node `yaml:"of"`
	Above      yaml.Node `yaml:"above"`
	Below      yaml.Node `yaml:"below"`
	For        *Duration `yaml:"for"`
	Hysteresis yaml.Node `yaml:"hysteresis"`
	// Utilization is allocation (the default) or busy; see utilizationKind.
	Utilization yaml.Node    `yaml:"utilization"`
	All         []nativeCond `yaml:"all"`
	Any         []nativeCond `yaml:"any"`
	Expr        *string      `yaml:"expr"`
	NoData      yaml.Node    `yaml:"no_data"`
	Prom        promFields   `yaml:",inline"`
}

type rawAction struct {
	Pos         Pos
	Type        *ActionType `yaml:"type"`
	Target      yaml.Node   `yaml:"target"`
	MinCapacity yaml.Node   `yaml:"min_capacity"`
	Destination yaml.Node   `yaml:"destination"`
	Resources   yaml.Node   `yaml:"resources"`
	Priority    *Priority   `yaml:"priority"`
	Guarantee   yaml.Node   `yaml:"guarantee"`
	Limit       yaml.Node   `yaml:"limit"`
	Price       yaml.Node   `yaml:"price"`
	Channel     string      `yaml:"channel"`
	Message     string      `yaml:"message"`
}

// maxDepth bounds all/any nesting.
const maxDepth = 8

// Load parses a policy file in either format (told apart by its top-level
// key) and checks everything that needs no outside knowledge: units, names,
// required fields, action types, CEL expressions. Every problem is reported,
// each with file:line:column and field path; the error wraps ErrInvalid and
// a yamlfile.Errors. Whether targets exist is checked by Validate.
func Load(file string, data []byte) (*Policy, error) {
	var raw rawFile
	l := loader{file: file}
	if err := yamlfile.Decode(file, data, &raw); err != nil {
		errs, ok := err.(yamlfile.Errors)
		if !ok {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		l.errs = errs
	}
	p := &Policy{File: file}
	switch {
	case raw.SchedulingPolicies != nil && raw.Policies != nil:
		l.errs.Add(Pos{File: file, Line: 1, Col: 1}, "", "a file holds one format: keep either scheduling_policies: (operators' format) or policies: (native format)")
	case raw.SchedulingPolicies != nil:
		p.Format = FormatOperators
		for i, r := range raw.SchedulingPolicies {
			p.Rules = append(p.Rules, l.opRule(fmt.Sprintf("scheduling_policies[%d]", i), r))
		}
	case raw.Policies != nil:
		p.Format = FormatNative
		for i, r := range raw.Policies {
			p.Rules = append(p.Rules, l.nativeRule(fmt.Sprintf("policies[%d]", i), r))
		}
	default:
		if len(l.errs) == 0 {
			l.errs.Add(Pos{File: file, Line: 1, Col: 1}, "", "no rules: write a scheduling_policies: list (operators' format) or a policies: list (native format)")
		}
	}
	if p.Format != 0 && len(p.Rules) == 0 {
		l.errs.Add(Pos{File: file, Line: 1, Col: 1}, "", "the %s list is empty: add at least one rule", map[Format]string{FormatOperators: "scheduling_policies", FormatNative: "policies"}[p.Format])
	}
	l.checkNames(p)
	for i := range p.Rules {
		l.compileExprs(&p.Rules[i].When)
	}
	if err := l.errs.Err(); err != nil {
		return nil, fmt.Errorf("%w:\n%w", ErrInvalid, err)
	}
	return p, nil
}

type loader struct {
	file string
	errs yamlfile.Errors
}

func (l *loader) nodePos(n *yaml.Node, def Pos) Pos {
	if n.Kind == 0 {
		return def
	}
	return Pos{File: l.file, Line: n.Line, Col: n.Column}
}

func present(n *yaml.Node) bool {
	return n.Kind != 0 && !(n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// quantity parses a quantity held as a node and checks its dimension
// (unless want is DimNone). ok is false when absent or bad.
func (l *loader) quantity(n *yaml.Node, def Pos, path, what string, want Dimension) (q Quantity, pos Pos, ok bool) {
	pos = l.nodePos(n, def)
	if !present(n) {
		return Quantity{}, pos, false
	}
	if n.Kind != yaml.ScalarNode {
		l.errs.Add(pos, path, "want a single value, such as %s", nonEmpty(want.example(), "85%, 150ms or $2.50"))
		return Quantity{}, pos, false
	}
	q, err := ParseQuantity(n.Value)
	if err != nil {
		l.errs.Add(pos, path, "%v", err)
		return Quantity{}, pos, false
	}
	if want != DimNone {
		if msg := checkDim(q, want, what); msg != "" {
			l.errs.Add(pos, path, "%s", msg)
			return Quantity{}, pos, false
		}
	}
	if q.Value < 0 {
		l.errs.Add(pos, path, "%s %s is negative", what, q)
		return Quantity{}, pos, false
	}
	return q, pos, true
}

// target parses a target held as a node; ok is false when absent or bad.
func (l *loader) target(n *yaml.Node, def Pos, path string) (Target, bool) {
	if n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return Target{}, false
	}
	if n.Kind != yaml.ScalarNode {
		l.errs.Add(l.nodePos(n, def), path, "want one target name, such as tenant:acme, class:batch_jobs or pool:low_priority_pool")
		return Target{}, false
	}
	t, err := ParseTarget(n.Value)
	if err != nil {
		l.errs.Add(l.nodePos(n, def), path, "%v", err)
		return Target{}, false
	}
	return t, true
}

func (l *loader) options(r *Rule, o ruleOptions) {
	r.Description = o.Description
	r.Options = Options{Enabled: true, DryRun: o.DryRun, Cooldown: DefaultCooldown}
	if o.Enabled != nil {
		r.Options.Enabled = *o.Enabled
	}
	if o.Cooldown != nil {
		r.Options.Cooldown = time.Duration(*o.Cooldown)
	}
	if o.MaxDuration != nil {
		r.Options.MaxDuration = time.Duration(*o.MaxDuration)
		if r.Options.MaxDuration == 0 {
			l.errs.Add(r.Pos, r.Path+".max_duration", "max_duration 0 would end every action at once: remove it, or write a time such as 2h")
		}
	}
}

func (l *loader) opRule(path string, r opRule) Rule {
	rule := Rule{Pos: r.Pos, Path: path, Name: r.Name}
	l.options(&rule, r.Options)
	switch len(r.Conditions) {
	case 0:
		l.errs.Add(r.Pos, path+".conditions", "missing: add at least one condition, such as {resource_type: gpu_cluster, utilization_threshold: 85%%}")
	case 1:
		rule.When = l.opCond(path+".conditions[0]", r.Conditions[0])
	default:
		rule.When = Condition{Pos: r.Pos, Path: path + ".conditions", Kind: CondAll}
		for i, c := range r.Conditions {
			rule.When.Children = append(rule.When.Children, l.opCond(fmt.Sprintf("%s.conditions[%d]", path, i), c))
		}
	}
	l.applyRuleHysteresis(&rule.When, &r.Options.Hysteresis, r.Pos, path)
	rule.Actions = l.actions(path+".actions", r.Pos, r.Actions)
	return rule
}

func (l *loader) opCond(path string, c opCond) Condition {
	cond := Condition{Pos: c.Pos, Path: path, Kind: CondMetric, Op: OpAbove, at: map[string]Pos{}}
	utilForm := c.ResourceType.Kind != 0 || c.UtilizationThreshold.Kind != 0
	metricForm := c.Metric != nil || c.Threshold.Kind != 0 || c.Prom.present()
	switch {
	case utilForm && metricForm:
		l.errs.Add(c.Pos, path, "mixes two forms: write either resource_type + utilization_threshold, or metric (or source: prometheus with query and server) + threshold [+ duration]")
		return cond
	case utilForm:
		cond.Metric = MetricUtilization
		if t, ok := l.target(&c.ResourceType, c.Pos, path+".resource_type"); ok {
			cond.Target = t
			cond.at["target"] = l.nodePos(&c.ResourceType, c.Pos)
			cond.targetField = "resource_type"
		} else if c.ResourceType.Kind == 0 {
			l.errs.Add(c.Pos, path+".resource_type", "missing: write resource_type: gpu_cluster (the whole fleet) or a pool, region, flavor or tenant")
		}
		if c.Target.Kind != 0 {
			l.errs.Add(l.nodePos(&c.Target, c.Pos), path+".target", "a utilization condition names what it measures in resource_type: move the target there")
		}
		l.utilizationKind(&cond, &c.Utilization)
		if !present(&c.UtilizationThreshold) {
			l.errs.Add(c.Pos, path+".utilization_threshold", "missing: write utilization_threshold: 85%%")
		} else {
			l.leafThreshold(&cond, &c.UtilizationThreshold, "utilization_threshold")
		}
	default:
		switch {
		case c.Prom.present() && c.Metric != nil:
			l.errs.Add(c.Pos, path+".metric", "a condition reads either a metric or a Prometheus query (source: prometheus): remove one")
		case c.Prom.present():
		case c.Metric == nil:
			l.errs.Add(c.Pos, path+".metric", "missing: write metric: p95_latency (or %s), or use resource_type + utilization_threshold, or source: prometheus with query and server", strings.Join(metricNames[1:], ", "))
		default:
			cond.Metric = *c.Metric
		}
		cond.Target = Cluster
		cond.targetField = "target"
		if t, ok := l.target(&c.Target, c.Pos, path+".target"); ok {
			cond.Target = t
			cond.at["target"] = l.nodePos(&c.Target, c.Pos)
		}
		if c.Prom.present() {
			l.prom(&cond, &c.Prom)
		}
		l.utilizationKind(&cond, &c.Utilization)
		if !present(&c.Threshold) {
			l.errs.Add(c.Pos, path+".threshold", "missing: write threshold: with %s", nonEmpty(cond.Metric.Dim().example(), "a value"))
		} else {
			l.leafThreshold(&cond, &c.Threshold, "threshold")
		}
	}
	if c.Duration != nil {
		cond.For = time.Duration(*c.Duration)
	}
	l.leafHysteresis(&cond, &c.Hysteresis)
	l.noData(&cond, &c.NoData)
	l.checkLeafTarget(&cond)
	return cond
}

// Values of a condition's utilization: field.
const (
	// UtilizationAllocation is the share of GPUs handed out to running
	// work (metric utilization): what the arbiter controls, and what the
	// operators' utilization_threshold means unless told otherwise.
	UtilizationAllocation = "allocation"
	// UtilizationBusy is what NVML says the GPUs did (metric
	// busy_utilization): an efficiency signal.
	UtilizationBusy = "busy"
)

// utilizationKind applies a condition's utilization: field to its
// metric: allocation keeps utilization, busy makes it busy_utilization.
// The field belongs to utilization conditions only.
func (l *loader) utilizationKind(c *Condition, n *yaml.Node) {
	if n.Kind == 0 {
		return
	}
	pos := l.nodePos(n, c.Pos)
	field := c.Path + ".utilization"
	c.at["utilization"] = pos
	if n.Kind != yaml.ScalarNode || !present(n) {
		l.errs.Add(pos, field, "want %s or %s", UtilizationAllocation, UtilizationBusy)
		return
	}
	switch v := n.Value; {
	case c.Metric != MetricUtilization && c.Metric != MetricBusyUtilization:
		l.errs.Add(pos, field, "utilization: applies to utilization conditions, not to %s: remove it", nonEmpty(metricNameOr(c.Metric), "a condition without a metric"))
	case v == UtilizationBusy:
		c.Metric = MetricBusyUtilization
	case v == UtilizationAllocation:
		if c.Metric == MetricBusyUtilization {
			l.errs.Add(pos, field, "utilization: allocation contradicts metric busy_utilization: write metric: utilization for the share of GPUs handed out")
		}
	default:
		l.errs.Add(pos, field, "unknown utilization %q%s: write %s (GPUs handed out, the default) or %s (what NVML says the GPUs do)",
			v, didYouMean(v, []string{UtilizationAllocation, UtilizationBusy}), UtilizationAllocation, UtilizationBusy)
	}
}

func metricNameOr(m Metric) string {
	if m == MetricNone {
		return ""
	}
	return m.String()
}

// prom parses a leaf's Prometheus query; the leaf's target is parsed.
func (l *loader) prom(c *Condition, f *promFields) {
	q := &PromQuery{}
	str := func(n *yaml.Node, field string) (string, bool) {
		if !present(n) {
			return "", false
		}
		if n.Kind != yaml.ScalarNode {
			l.errs.Add(l.nodePos(n, c.Pos), c.Path+"."+field, "want a single string")
			return "", false
		}
		return n.Value, true
	}
	if src, ok := str(&f.Source, "source"); !ok {
		l.errs.Add(l.nodePos(&f.Source, c.Pos), c.Path+".source", "missing: server, query and target_label read a Prometheus query: add source: prometheus")
	} else if src != "prometheus" {
		l.errs.Add(l.nodePos(&f.Source, c.Pos), c.Path+".source", "unknown source %q%s: write source: prometheus", src, didYouMean(src, []string{"prometheus"}))
	}
	if srv, ok := str(&f.Server, "server"); !ok {
		l.errs.Add(l.nodePos(&f.Server, c.Pos), c.Path+".server", "missing: write server: the Prometheus server's URL, such as http://127.0.0.1:9090")
	} else if err := CheckPromServer(srv); err != nil {
		l.errs.Add(l.nodePos(&f.Server, c.Pos), c.Path+".server", "%v", err)
	} else {
		q.Server = srv
	}
	if expr, ok := str(&f.Query, "query"); !ok {
		l.errs.Add(l.nodePos(&f.Query, c.Pos), c.Path+".query", "missing: write query: a PromQL expression, such as histogram_quantile(0.95, sum by (le) (rate(request_seconds_bucket[1m])))")
	} else if err := CheckPromQuery(expr); err != nil {
		l.errs.Add(l.nodePos(&f.Query, c.Pos), c.Path+".query", "%v", err)
	} else {
		q.Expr = expr
	}
	tpos := fieldPos(c.at, "target", c.Pos)
	if lab, ok := str(&f.TargetLabel, "target_label"); ok {
		if !promLabel(lab) {
			l.errs.Add(l.nodePos(&f.TargetLabel, c.Pos), c.Path+".target_label", "invalid label name %q: Prometheus labels match [a-zA-Z_][a-zA-Z0-9_]* (at most 128 characters)", lab)
		}
		q.TargetLabel = lab
		switch c.Target.Kind {
		case TargetTenant, TargetClass, TargetPool, TargetService, TargetFlavor, TargetRegion:
			q.TargetKind = c.Target.Kind
		default:
			l.errs.Add(tpos, c.Path+"."+c.targetField, "with target_label, name the target this condition tests with its kind, such as service:coding-assistant (each result series is the target <kind>:<its %s label>)", lab)
		}
	} else if c.Target != Cluster {
		l.errs.Add(tpos, c.Path+"."+c.targetField, "a query without target_label gives one series, the cluster's: add target_label: (the result label that names %s) or remove %s", c.Target, c.targetField)
	}
	c.Prom = q
}

// CheckPromServer checks a Prometheus server's URL: http or https, with
// a host, without userinfo, query or fragment, at most MaxPromServerLen
// bytes.
func CheckPromServer(s string) error {
	if len(s) > MaxPromServerLen {
		return fmt.Errorf("the server URL has %d bytes, more than %d", len(s), MaxPromServerLen)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "":
		return fmt.Errorf("want an http:// or https:// URL with a host, such as http://127.0.0.1:9090, got %q", s)
	case u.User != nil:
		return errors.New("the server URL carries a user or password: Arbiter sends no credentials to Prometheus; remove them")
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#"):
		return fmt.Errorf("the server URL is the server's base (Arbiter adds /api/v1/query): remove the query or fragment of %q", s)
	}
	return nil
}

// CheckPromQuery checks a PromQL expression's size: not empty, at most
// MaxPromQueryLen bytes, valid UTF-8 (the server checks its syntax).
func CheckPromQuery(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return errors.New("empty query: write a PromQL expression")
	case len(s) > MaxPromQueryLen:
		return fmt.Errorf("the query has %d bytes, more than %d", len(s), MaxPromQueryLen)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return errors.New("the query is not valid UTF-8 text")
	}
	return nil
}

func promLabel(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// noData parses a leaf's no_data.
func (l *loader) noData(c *Condition, n *yaml.Node) {
	if !present(n) {
		return
	}
	pos := l.nodePos(n, c.Pos)
	c.at["no_data"] = pos
	switch {
	case n.Kind == yaml.ScalarNode && n.Value == "false":
		c.NoData = NoDataFalse
	case n.Kind == yaml.ScalarNode && n.Value == "true":
		c.NoData = NoDataTrue
	case n.Kind == yaml.ScalarNode && n.Value == "hold":
		c.NoData = NoDataHold
	default:
		l.errs.Add(pos, c.Path+".no_data", "want false (no data: the condition does not hold), true (it holds) or hold (it keeps its last state), got %q", n.Value)
	}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// leafThreshold parses a leaf's threshold in its metric's unit.
func (l *loader) leafThreshold(c *Condition, n *yaml.Node, field string) {
	want := c.Metric.Dim()
	q, pos, ok := l.quantity(n, c.Pos, c.Path+"."+field, "threshold", DimNone)
	c.at["threshold"] = pos
	if !ok {
		return
	}
	if want != DimNone {
		if msg := checkDim(q, want, "threshold"); msg != "" {
			l.errs.Add(pos, c.Path+"."+field, "%s (%s is measured as a %s)", msg, c.Metric, want)
			return
		}
	}
	if want == DimFraction && q.Value > 1 {
		l.errs.Add(pos, c.Path+"."+field, "threshold %s is over 100%%", q)
	}
	c.Threshold = q
	c.thresholdField = field
}

// leafHysteresis parses a leaf's hysteresis in its metric's unit.
func (l *loader) leafHysteresis(c *Condition, n *yaml.Node) {
	if q, pos, ok := l.quantity(n, c.Pos, c.Path+".hysteresis", "hysteresis", c.dim()); ok {
		c.Hysteresis = q
		c.at["hysteresis"] = pos
	}
}

// checkLeafTarget rejects an explicit target kind the metric is not measured on.
func (l *loader) checkLeafTarget(c *Condition) {
	if c.Prom != nil {
		return // its targets are the query's labels (see prom)
	}
	if ks, ok := metricKinds[c.Metric]; ok && c.Target.Kind != TargetUnresolved && !hasKind(ks, c.Target.Kind) {
		l.errs.Add(fieldPos(c.at, "target", c.Pos), c.Path+"."+c.targetField, "%s is not measured on a %s: use a %s", c.Metric, c.Target.Kind, kindList(ks))
	}
}

// applyRuleHysteresis sets a rule-level hysteresis on every metric leaf that
// has none and whose metric is measured in the same unit.
func (l *loader) applyRuleHysteresis(c *Condition, n *yaml.Node, pos Pos, rulePath string) {
	h, hpos, ok := l.quantity(n, pos, rulePath+".hysteresis", "hysteresis", DimNone)
	if !ok {
		return
	}
	fits := false
	var walk func(c *Condition)
	walk = func(c *Condition) {
		switch c.Kind {
		case CondMetric:
			if c.dim() == h.Dim {
				fits = true
				if c.Hysteresis.IsZero() {
					c.Hysteresis = h
				}
			}
		case CondAll, CondAny:
			for i := range c.Children {
				walk(&c.Children[i])
			}
		}
	}
	walk(c)
	if !fits {
		l.errs.Add(hpos, rulePath+".hysteresis", "hysteresis %s fits no condition of this rule: write it in the unit of the metric (5%% for utilization, 20ms for latency) or set it on each condition", h)
	}
}

func (l *loader) nativeRule(path string, r nativeRule) Rule {
	rule := Rule{Pos: r.Pos, Path: path, Name: r.Name}
	l.options(&rule, r.Options)
	if r.When == nil {
		l.errs.Add(r.Pos, path+".when", "missing: write when: with a condition, such as {metric: utilization, of: cluster, above: 85%%}")
	} else {
		rule.When = l.nativeCond(path+".when", *r.When, 0)
	}
	l.applyRuleHysteresis(&rule.When, &r.Options.Hysteresis, r.Pos, path)
	rule.Actions = l.actions(path+".then", r.Pos, r.Then)
	return rule
}

func (l *loader) nativeCond(path string, c nativeCond, depth int) Condition {
	cond := Condition{Pos: c.Pos, Path: path, at: map[string]Pos{}}
	forms := 0
	for _, b := range []bool{c.Metric != nil || c.Above.Kind != 0 || c.Below.Kind != 0 || c.Utilization.Kind != 0 || c.Prom.present(), c.All != nil, c.Any != nil, c.Expr != nil} {
		if b {
			forms++
		}
	}
	if forms != 1 {
		l.errs.Add(c.Pos, path, "write exactly one of: metric (with of, above or below), source: prometheus (with server, query, above or below), all, any, expr")
		return cond
	}
	if c.For != nil {
		cond.For = time.Duration(*c.For)
	}
	if depth >= maxDepth && (c.All != nil || c.Any != nil) {
		l.errs.Add(c.Pos, path, "conditions nest deeper than %d levels: flatten them", maxDepth)
		return cond
	}
	switch {
	case c.All != nil || c.Any != nil:
		kids, name := c.All, "all"
		cond.Kind = CondAll
		if c.Any != nil {
			kids, name, cond.Kind = c.Any, "any", CondAny
		}
		if len(kids) == 0 {
			l.errs.Add(c.Pos, path+"."+name, "empty: list at least one condition")
		}
		if c.For != nil || c.Hysteresis.Kind != 0 || c.Of.Kind != 0 || c.NoData.Kind != 0 {
			l.errs.Add(c.Pos, path, "for, hysteresis, no_data and of belong on the conditions inside %s", name)
		}
		for i, k := range kids {
			cond.Children = append(cond.Children, l.nativeCond(fmt.Sprintf("%s.%s[%d]", path, name, i), k, depth+1))
		}
	case c.Expr != nil:
		cond.Kind = CondExpr
		cond.Expr = *c.Expr
		if strings.TrimSpace(cond.Expr) == "" {
			l.errs.Add(c.Pos, path+".expr", "empty expression: write a CEL expression such as p95_latency('service:chat') > duration('150ms')")
		}
		if c.Hysteresis.Kind != 0 || c.Of.Kind != 0 || c.NoData.Kind != 0 {
			l.errs.Add(c.Pos, path, "hysteresis, no_data and of do not apply to expr: name targets inside the expression")
		}
	default:
		cond.Kind = CondMetric
		switch {
		case c.Prom.present() && c.Metric != nil:
			l.errs.Add(c.Pos, path+".metric", "a condition reads either a metric or a Prometheus query (source: prometheus): remove one")
		case c.Prom.present():
		case c.Metric == nil:
			l.errs.Add(c.Pos, path+".metric", "missing: write metric: one of %s", strings.Join(metricNames[1:], ", "))
		default:
			cond.Metric = *c.Metric
		}
		cond.Target = Cluster
		cond.targetField = "of"
		if t, ok := l.target(&c.Of, c.Pos, path+".of"); ok {
			cond.Target = t
			cond.at["target"] = l.nodePos(&c.Of, c.Pos)
		}
		if c.Prom.present() {
			l.prom(&cond, &c.Prom)
		}
		l.utilizationKind(&cond, &c.Utilization)
		switch {
		case c.Above.Kind != 0 && c.Below.Kind != 0:
			l.errs.Add(c.Pos, path, "write above or below, not both (use any: for a band)")
		case c.Above.Kind != 0:
			cond.Op = OpAbove
			l.leafThreshold(&cond, &c.Above, "above")
		case c.Below.Kind != 0:
			cond.Op = OpBelow
			l.leafThreshold(&cond, &c.Below, "below")
		default:
			l.errs.Add(c.Pos, path+".above", "missing: write above: or below: with %s", nonEmpty(cond.Metric.Dim().example(), "a value"))
		}
		l.leafHysteresis(&cond, &c.Hysteresis)
		l.noData(&cond, &c.NoData)
		l.checkLeafTarget(&cond)
	}
	return cond
}

// actionFields says which optional fields each action type takes.
var actionFields = map[ActionType][]string{
	ActionScaleDown:    {"target", "min_capacity"},
	ActionMigrate:      {"target", "destination"},
	ActionReallocate:   {"resources", "priority", "guarantee"},
	ActionSetPriority:  {"target", "priority"},
	ActionSetLimit:     {"target", "limit"},
	ActionSetSpotPrice: {"target", "price"},
	ActionDrain:        {"target"},
	ActionNotify:       {"channel", "message"},
}

func (l *loader) actions(path string, rulePos Pos, raws []rawAction) []Action {
	if len(raws) == 0 {
		l.errs.Add(rulePos, path, "missing: list at least one action (%s)", strings.Join(actionNames[1:], ", "))
	}
	var out []Action
	for i, r := range raws {
		out = append(out, l.action(fmt.Sprintf("%s[%d]", path, i), r))
	}
	return out
}

func (l *loader) action(path string, r rawAction) Action {
	a := Action{Pos: r.Pos, Path: path, at: map[string]Pos{}, Channel: r.Channel, Message: r.Message}
	if r.Type == nil {
		l.errs.Add(r.Pos, path+".type", "missing: write type: one of %s", strings.Join(actionNames[1:], ", "))
		return a
	}
	a.Type = *r.Type
	if a.Type == ActionNone {
		return a // the decoder reported the unknown type
	}
	if t, ok := l.target(&r.Target, r.Pos, path+".target"); ok {
		a.Target = t
		a.at["target"] = l.nodePos(&r.Target, r.Pos)
	}
	if t, ok := l.target(&r.Destination, r.Pos, path+".destination"); ok {
		a.Destination = t
		a.at["destination"] = l.nodePos(&r.Destination, r.Pos)
	}
	if r.Resources.Kind != 0 {
		if r.Resources.Kind == yaml.ScalarNode {
			if t, ok := l.target(&r.Resources, r.Pos, path+".resources"); ok {
				a.Resources = append(a.Resources, t)
				a.at["resources[0]"] = l.nodePos(&r.Resources, r.Pos)
			}
		} else if r.Resources.Kind != yaml.SequenceNode {
			l.errs.Add(l.nodePos(&r.Resources, r.Pos), path+".resources", "want a list of names, such as [inference_gpus]")
		} else {
			for i, n := range r.Resources.Content {
				f := fmt.Sprintf("resources[%d]", i)
				if t, ok := l.target(n, r.Pos, path+"."+f); ok {
					a.Resources = append(a.Resources, t)
					a.at[f] = l.nodePos(n, r.Pos)
				}
			}
		}
	}
	if r.Priority != nil {
		a.Priority = *r.Priority
	}
	set := map[string]bool{
		"target": r.Target.Kind != 0, "destination": r.Destination.Kind != 0, "resources": r.Resources.Kind != 0,
		"min_capacity": r.MinCapacity.Kind != 0, "priority": r.Priority != nil, "guarantee": r.Guarantee.Kind != 0,
		"limit": r.Limit.Kind != 0, "price": r.Price.Kind != 0, "channel": r.Channel != "", "message": r.Message != "",
	}
	allowed := map[string]bool{}
	for _, f := range actionFields[a.Type] {
		allowed[f] = true
	}
	for _, f := range []string{"target", "destination", "resources", "min_capacity", "priority", "guarantee", "limit", "price", "channel", "message"} {
		if set[f] && !allowed[f] {
			l.errs.Add(r.Pos, path+"."+f, "%s does not take %s (it takes %s)", a.Type, f, strings.Join(actionFields[a.Type], ", "))
		}
	}
	need := func(f, hint string) {
		if !set[f] {
			l.errs.Add(r.Pos, path+"."+f, "missing: %s needs %s", a.Type, hint)
		}
	}
	quantity := func(f string, n *yaml.Node, dim Dimension) Quantity {
		q, pos, _ := l.quantity(n, r.Pos, path+"."+f, f, dim)
		a.at[f] = pos
		return q
	}
	switch a.Type {
	case ActionScaleDown:
		need("target", "target: the tenant or workload class to shrink")
		need("min_capacity", "min_capacity: the share of its limit to keep, such as 30%")
		a.MinCapacity = quantity("min_capacity", &r.MinCapacity, DimFraction)
		if a.MinCapacity.Dim == DimFraction && a.MinCapacity.Value > 1 {
			l.errs.Add(a.at["min_capacity"], path+".min_capacity", "min_capacity %s is over 100%%: scale_down keeps a share of the limit, at most 100%%", a.MinCapacity)
		}
	case ActionMigrate:
		need("target", "target: the workloads to move (a workload class, tenant or selector)")
		need("destination", "destination: the pool or region to move them to")
	case ActionReallocate:
		need("resources", "resources: the tenants, classes, pools, services or selectors to favour, such as [inference_gpus]")
		if !set["priority"] && !set["guarantee"] {
			l.errs.Add(r.Pos, path+".priority", "missing: reallocate needs priority: (critical, high, ...) or guarantee: (GPUs), or both")
		}
		a.Guarantee = quantity("guarantee", &r.Guarantee, DimCount)
	case ActionSetPriority:
		need("target", "target: whose priority to set")
		need("priority", "priority: one of critical, high, normal, low, spot")
	case ActionSetLimit:
		need("target", "target: whose limit to set")
		need("limit", "limit: a number of GPUs, such as 64")
		a.Limit = quantity("limit", &r.Limit, DimCount)
	case ActionSetSpotPrice:
		need("target", "target: the pool, flavor or region whose spot price to set (or cluster)")
		need("price", "price: such as $1.20")
		a.Price = quantity("price", &r.Price, DimPrice)
	case ActionDrain:
		need("target", "target: the pool or region to stop admitting to")
	case ActionNotify:
		need("message", "message: the text to send")
	}
	l.checkKinds(&a)
	return a
}

// actionKinds says which target kinds each action field accepts. A bare
// name is resolved among these kinds by Validate.
var actionKinds = map[ActionType]map[string][]TargetKind{
	ActionScaleDown:    {"target": {TargetTenant, TargetClass, TargetSelector}},
	ActionMigrate:      {"target": {TargetTenant, TargetClass, TargetSelector}, "destination": {TargetPool, TargetRegion}},
	ActionReallocate:   {"resources": {TargetTenant, TargetClass, TargetPool, TargetService, TargetSelector, TargetFlavor, TargetRegion}},
	ActionSetPriority:  {"target": {TargetTenant, TargetClass, TargetService, TargetSelector}},
	ActionSetLimit:     {"target": {TargetTenant, TargetClass, TargetSelector}},
	ActionSetSpotPrice: {"target": {TargetCluster, TargetPool, TargetFlavor, TargetRegion}},
	ActionDrain:        {"target": {TargetPool, TargetRegion}},
}

func kindList(ks []TargetKind) string {
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = k.String()
	}
	switch len(names) {
	case 1:
		return names[0]
	case 2:
		return names[0] + " or " + names[1]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func hasKind(ks []TargetKind, k TargetKind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// checkKinds rejects explicitly kinded targets of the wrong kind.
func (l *loader) checkKinds(a *Action) {
	for field, t := range actionTargets(a) {
		ks := actionKinds[a.Type][baseField(field)]
		if t.Kind != TargetUnresolved && !hasKind(ks, t.Kind) {
			l.errs.Add(fieldPos(a.at, field, a.Pos), a.Path+"."+field, "%s of %s must be a %s, not a %s", baseField(field), a.Type, kindList(ks), t.Kind)
		}
	}
}

func baseField(f string) string {
	if i := strings.IndexByte(f, '['); i >= 0 {
		return f[:i]
	}
	return f
}

// actionTargets returns an action's targets by field name, in a fixed order.
func actionTargets(a *Action) map[string]*Target {
	out := map[string]*Target{}
	if a.Target != (Target{}) {
		out["target"] = &a.Target
	}
	if a.Destination != (Target{}) {
		out["destination"] = &a.Destination
	}
	for i := range a.Resources {
		out[fmt.Sprintf("resources[%d]", i)] = &a.Resources[i]
	}
	return out
}

func (l *loader) checkNames(p *Policy) {
	seen := map[string]string{}
	for _, r := range p.Rules {
		switch {
		case r.Name == "":
			l.errs.Add(r.Pos, r.Path+".name", "missing: every rule needs a name, such as customer_sla_protection")
		case !validName(r.Name):
			l.errs.Add(r.Pos, r.Path+".name", "invalid name %q: use letters, digits, '-', '_' and '.'", r.Name)
		case seen[r.Name] != "":
			l.errs.Add(r.Pos, r.Path+".name", "rule %q is already defined at %s: give each rule its own name", r.Name, seen[r.Name])
		default:
			seen[r.Name] = r.Pos.String()
		}
	}
}

// ActionTargetKinds returns the target kinds an action's field ("target",
// "destination" or "resources") accepts: the loader refuses the others.
// The policy runtime must give every one of them an effect.
func ActionTargetKinds(a ActionType, field string) []TargetKind {
	return append([]TargetKind(nil), actionKinds[a][field]...)
}
