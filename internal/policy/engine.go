package policy

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
)

// Query asks for one metric of one target.
type Query struct {
	Metric Metric
	Target Target
	// Series, when set, names an outside series to read instead of Metric
	// (a Prometheus leaf: PromQuery.Series); its value is the newest sample.
	Series string
}

func (q Query) String() string {
	if q.Series != "" {
		return q.Series + " of " + q.Target.String()
	}
	return q.Metric.String() + " of " + q.Target.String()
}

// Metrics is the source of metric values. The simulator and the server
// implement it (Windows is a ready implementation over raw samples).
type Metrics interface {
	// Value returns the metric's current value for the target in base units:
	// a fraction for utilization and failure rates (0.85 for 85%), seconds
	// for latencies and queue wait, GPUs for pending_gpus, dollars per
	// GPU-hour for spot_price. ok is false when there is no data; a
	// condition on a metric without data does not hold.
	Value(q Query) (v float64, ok bool)
}

// Event is a change of a rule's state.
type Event int

const (
	// EventFired: the condition held and the actions started.
	EventFired Event = iota + 1
	// EventReverted: the condition had been clear for the cooldown and the
	// actions ended.
	EventReverted
	// EventExpired: the actions ran for the rule's max_duration and ended
	// although the condition still held.
	EventExpired
)

func (e Event) String() string {
	switch e {
	case EventFired:
		return "fired"
	case EventReverted:
		return "reverted"
	case EventExpired:
		return "expired"
	}
	return fmt.Sprintf("Event(%d)", int(e))
}

// Observation is one metric value a condition looked at.
type Observation struct {
	Metric    Metric
	Target    Target
	Value     float64 // base units
	Op        Op      // zero for values read by a CEL expression
	Threshold Quantity
	// Held is how long the leaf's condition had held (within its hysteresis
	// band) when observed.
	Held time.Duration
	// Expr is the CEL expression that read the value, if any.
	Expr string
	// Query is the PromQL expression of a Prometheus leaf, if any.
	Query string
	// NoData: the leaf had no value (Value is NaN); it held or not as its
	// no_data says.
	NoData bool
}

// String says "p95_latency of service:chat = 182ms > 150ms, held 5m0s".
func (o Observation) String() string {
	var b strings.Builder
	name, dim := o.Metric.String(), o.Metric.Dim()
	if o.Query != "" {
		name, dim = fmt.Sprintf("prometheus %q", o.Query), o.Threshold.Dim
	}
	if o.NoData {
		fmt.Fprintf(&b, "%s of %s has no data", name, o.Target)
		if o.Held > 0 {
			fmt.Fprintf(&b, ", held %s", o.Held)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%s of %s = %s", name, o.Target, formatValue(o.Value, dim))
	if o.Op != 0 {
		sym := o.Op.Symbol()
		if (o.Op == OpAbove && !(o.Value > o.Threshold.Value)) || (o.Op == OpBelow && !(o.Value < o.Threshold.Value)) {
			sym = map[Op]string{OpAbove: "≤", OpBelow: "≥"}[o.Op]
		}
		fmt.Fprintf(&b, " %s %s", sym, o.Threshold)
	}
	if o.Held > 0 {
		fmt.Fprintf(&b, ", held %s", o.Held)
	}
	return b.String()
}

// Firing is one entry of the firing log: a rule changed state.
type Firing struct {
	Time   time.Time
	Rule   string
	Event  Event
	DryRun bool
	// Values are the observations that decided: for a firing, those that
	// made the condition true; for a revert, the values that were clear.
	Values  []Observation
	Actions []Action
}

// String formats the entry on one line.
func (f Firing) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", f.Time.UTC().Format(time.RFC3339), f.Rule, f.Event)
	if f.DryRun {
		b.WriteString(" (dry run)")
	}
	if len(f.Values) > 0 {
		vals := make([]string, len(f.Values))
		for i, o := range f.Values {
			vals[i] = o.String()
		}
		fmt.Fprintf(&b, ": %s", strings.Join(vals, "; "))
	}
	if len(f.Actions) > 0 {
		acts := make([]string, len(f.Actions))
		for i, a := range f.Actions {
			acts[i] = a.Summary()
		}
		verb := " -> "
		if f.Event != EventFired {
			verb = " -> end "
		}
		b.WriteString(verb + strings.Join(acts, "; "))
	}
	return b.String()
}

// ActiveAction is an action in force.
type ActiveAction struct {
	Rule   string
	Index  int // position of the action in its rule
	Action Action
	Since  time.Time
}

// Step is the output of one evaluation.
type Step struct {
	Now time.Time
	// Active lists every action in force after this step, in rule order then
	// action order: the desired state for the applier. Dry-run rules are
	// never here.
	Active []ActiveAction
	// Firings lists the state changes of this step, in rule order.
	Firings []Firing
	// Errors lists problems that made conditions false: metrics without
	// data (ErrNoMetric), failing expressions (ErrExpr), a clock that went
	// backwards (ErrTimeBackwards). They do not stop the evaluation.
	Errors []error
}

// Engine evaluates a policy's rules step by step. It is a deterministic
// state machine: the same sequence of Evaluate calls with the same metric
// values gives the same steps. It does no I/O, reads no clock and starts no
// goroutines; it is not safe for concurrent use.
type Engine struct {
	rules   []*ruleState
	scope   *exprScope
	last    time.Time
	started bool
}

type ruleState struct {
	rule *Rule
	root *node

	active     bool
	firedAt    time.Time
	changed    bool // has changed state at least once
	changedAt  time.Time
	clearing   bool
	clearSince time.Time
	expired    bool // ended by max_duration; re-arms when the condition clears
}

type node struct {
	c     *Condition
	kids  []*node
	prog  cel.Program
	held  bool
	since time.Time
}

// NewEngine prepares a loaded policy for evaluation. Disabled rules are
// skipped. Call Policy.Resolve first so that bare target names reach
// Metrics with their kind.
func NewEngine(p *Policy) (*Engine, error) {
	e := &Engine{scope: &exprScope{}}
	env, err := newCELEnv(e.scope)
	if err != nil {
		return nil, fmt.Errorf("policy: CEL environment: %w", err)
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		if !r.Options.Enabled {
			continue
		}
		root, err := buildNode(env, &r.When)
		if err != nil {
			return nil, fmt.Errorf("%w: rule %s: %w", ErrInvalid, r.Name, err)
		}
		e.rules = append(e.rules, &ruleState{rule: r, root: root})
	}
	return e, nil
}

// PromQueries returns the Prometheus queries the enabled rules read, each
// once, ordered by series: what the caller must run and record.
func (e *Engine) PromQueries() []PromQuery {
	var qs []PromQuery
	var walk func(c *Condition)
	walk = func(c *Condition) {
		if c.Prom != nil && c.Prom.Server != "" && c.Prom.Expr != "" {
			qs = append(qs, *c.Prom)
		}
		for i := range c.Children {
			walk(&c.Children[i])
		}
	}
	for _, rs := range e.rules {
		walk(&rs.rule.When)
	}
	return DistinctPromQueries(qs)
}

// DistinctPromQueries returns qs without repeats (by Series), ordered by
// series: what a caller runs once each.
func DistinctPromQueries(qs []PromQuery) []PromQuery {
	seen := make(map[string]PromQuery, len(qs))
	for _, q := range qs {
		seen[q.Series()] = q
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]PromQuery, len(keys))
	for i, k := range keys {
		out[i] = seen[k]
	}
	return out
}

func buildNode(env *cel.Env, c *Condition) (*node, error) {
	n := &node{c: c}
	switch c.Kind {
	case CondExpr:
		ast, err := compileExpr(env, c.Expr)
		if err != nil {
			return nil, err
		}
		if n.prog, err = env.Program(ast, cel.CostLimit(exprCostLimit)); err != nil {
			return nil, err
		}
	case CondAll, CondAny:
		for i := range c.Children {
			k, err := buildNode(env, &c.Children[i])
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, k)
		}
	case CondMetric:
	default:
		return nil, fmt.Errorf("condition %s has no kind", c.Path)
	}
	return n, nil
}

// Evaluate advances the engine to now, reading metric values from m, and
// returns the actions in force and the state changes. now should not go
// backwards; if it does, the previous time is used and the step reports
// ErrTimeBackwards.
func (e *Engine) Evaluate(now time.Time, m Metrics) Step {
	st := Step{Now: now}
	if e.started && now.Before(e.last) {
		st.Errors = append(st.Errors, fmt.Errorf("%w: %s is before %s", ErrTimeBackwards, now.Format(time.RFC3339Nano), e.last.Format(time.RFC3339Nano)))
		now = e.last
	}
	e.last, e.started = now, true
	e.scope.m = m
	defer func() { e.scope.m = nil }()
	for _, rs := range e.rules {
		ev := evaluation{now: now, m: m, scope: e.scope, rule: rs.rule.Name}
		holds, obs := ev.eval(rs.root)
		st.Errors = append(st.Errors, ev.errs...)
		if f, ok := rs.step(now, holds, obs); ok {
			st.Firings = append(st.Firings, f)
		}
		if rs.active && !rs.rule.Options.DryRun {
			for i, a := range rs.rule.Actions {
				st.Active = append(st.Active, ActiveAction{Rule: rs.rule.Name, Index: i, Action: a, Since: rs.firedAt})
			}
		}
	}
	return st
}

// step moves one rule's state machine; it returns a firing on a change.
func (rs *ruleState) step(now time.Time, holds bool, obs []Observation) (Firing, bool) {
	o := rs.rule.Options
	cooled := func(since time.Time) bool { return now.Sub(since) >= o.Cooldown }
	change := func(ev Event) Firing {
		rs.changed, rs.changedAt = true, now
		return Firing{Time: now, Rule: rs.rule.Name, Event: ev, DryRun: o.DryRun, Values: obs, Actions: rs.rule.Actions}
	}
	if !rs.active {
		if rs.expired {
			rs.expired = holds
			return Firing{}, false
		}
		if holds && (!rs.changed || cooled(rs.changedAt)) {
			rs.active, rs.firedAt, rs.clearing = true, now, false
			return change(EventFired), true
		}
		return Firing{}, false
	}
	if o.MaxDuration > 0 && now.Sub(rs.firedAt) >= o.MaxDuration {
		rs.active, rs.expired = false, holds
		return change(EventExpired), true
	}
	if holds {
		rs.clearing = false
		return Firing{}, false
	}
	if !rs.clearing {
		rs.clearing, rs.clearSince = true, now
	}
	if cooled(rs.clearSince) && cooled(rs.firedAt) {
		rs.active, rs.clearing = false, false
		return change(EventReverted), true
	}
	return Firing{}, false
}

type evaluation struct {
	now   time.Time
	m     Metrics
	scope *exprScope
	rule  string
	errs  []error
}

// eval evaluates every leaf (no short cut, so that durations keep
// counting) and returns whether the condition holds and the deciding
// observations: for a true result those that made it true, else all.
func (ev *evaluation) eval(n *node) (bool, []Observation) {
	c := n.c
	switch c.Kind {
	case CondAll, CondAny:
		var all, yes []Observation
		count := 0
		for _, k := range n.kids {
			ok, obs := ev.eval(k)
			all = append(all, obs...)
			if ok {
				count++
				yes = append(yes, obs...)
			}
		}
		if c.Kind == CondAll && count == len(n.kids) && count > 0 {
			return true, all
		}
		if c.Kind == CondAny && count > 0 {
			return true, yes
		}
		return false, all
	case CondMetric:
		q := Query{Metric: c.Metric, Target: c.Target}
		if c.Prom != nil {
			q.Series = c.Prom.Series()
		}
		v, ok := ev.m.Value(q)
		if !ok {
			ev.errs = append(ev.errs, fmt.Errorf("%w: rule %s: %s (no_data: %s)", ErrNoMetric, ev.rule, q, c.NoData))
			switch c.NoData {
			case NoDataTrue:
				ev.latch(n, true, true)
			case NoDataHold:
			default:
				n.held = false
				return false, nil
			}
			obs := Observation{Metric: c.Metric, Target: c.Target, Value: math.NaN(), Op: c.Op, Threshold: c.Threshold, NoData: true}
			if c.Prom != nil {
				obs.Query = c.Prom.Expr
			}
			if n.held {
				obs.Held = ev.now.Sub(n.since)
			}
			return n.held && ev.now.Sub(n.since) >= c.For, []Observation{obs}
		}
		thr, h := c.Threshold.Value, c.Hysteresis.Value
		var enter, stay bool
		if c.Op == OpBelow {
			enter, stay = v < thr, v < thr+h
		} else {
			enter, stay = v > thr, v > thr-h
		}
		ev.latch(n, enter, stay)
		obs := Observation{Metric: c.Metric, Target: c.Target, Value: v, Op: c.Op, Threshold: c.Threshold}
		if c.Prom != nil {
			obs.Query = c.Prom.Expr
		}
		if n.held {
			obs.Held = ev.now.Sub(n.since)
		}
		return n.held && ev.now.Sub(n.since) >= c.For, []Observation{obs}
	case CondExpr:
		ev.scope.obs = ev.scope.obs[:0]
		out, _, err := n.prog.Eval(map[string]any{"now": ev.now})
		obs := append([]Observation(nil), ev.scope.obs...)
		for i := range obs {
			obs[i].Expr = c.Expr
		}
		var b, isBool bool
		if err == nil {
			b, isBool = out.Value().(bool)
		}
		if err != nil || !isBool {
			n.held = false
			if err == nil {
				err = fmt.Errorf("result %v is not a bool", out)
			}
			ev.errs = append(ev.errs, fmt.Errorf("%w: rule %s: %s: %v", ErrExpr, ev.rule, c.Expr, err))
			return false, obs
		}
		ev.latch(n, b, b)
		if n.held {
			for i := range obs {
				obs[i].Held = ev.now.Sub(n.since)
			}
		}
		return n.held && ev.now.Sub(n.since) >= c.For, obs
	}
	return false, nil
}

// latch applies hysteresis: a leaf starts holding when enter is true and
// keeps holding while stay is true.
func (ev *evaluation) latch(n *node, enter, stay bool) {
	if !n.held {
		if enter {
			n.held, n.since = true, ev.now
		}
	} else if !stay {
		n.held = false
	}
}
