package policy

import (
	"fmt"
	"strings"
	"time"
)

// Explain says in plain words what each rule of the policy will do, one
// paragraph per rule.
func (p *Policy) Explain() string {
	var b strings.Builder
	for i, r := range p.Rules {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(r.Explain())
	}
	return b.String()
}

// Explain says in plain words what the rule will do.
func (r *Rule) Explain() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:", r.Name)
	if r.Description != "" {
		fmt.Fprintf(&b, " %s", r.Description)
	}
	b.WriteString("\n")
	if !r.Options.Enabled {
		b.WriteString("  Disabled: this rule is skipped.\n")
	}
	fmt.Fprintf(&b, "  When %s,\n", r.When.Describe())
	for i, a := range r.Actions {
		sep := ";"
		if i == len(r.Actions)-1 {
			sep = "."
		}
		lead := "  "
		if i > 0 {
			lead = "  and "
		}
		fmt.Fprintf(&b, "%s%s%s\n", lead, a.Describe(), sep)
	}
	cd := r.Options.Cooldown
	fmt.Fprintf(&b, "  The actions last while the condition holds and end once it has been clear for %s", plainDuration(cd))
	if cd > 0 {
		fmt.Fprintf(&b, "; the rule changes state at most once every %s", plainDuration(cd))
	}
	b.WriteString(".\n")
	if r.Options.MaxDuration > 0 {
		fmt.Fprintf(&b, "  They end after %s at most, and the rule fires again only after its condition has cleared.\n", plainDuration(r.Options.MaxDuration))
	}
	if r.Options.DryRun {
		b.WriteString("  Dry run: firings are logged, nothing is changed.\n")
	}
	return b.String()
}

func plainDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	s := d.String() // "1h30m0s"
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// Describe says the condition in words.
func (c *Condition) Describe() string {
	var s string
	switch c.Kind {
	case CondMetric:
		what := metricWords(c.Metric)
		if c.Prom != nil {
			what = fmt.Sprintf("the Prometheus query `%s` (on %s)", c.Prom.Expr, c.Prom.Server)
		}
		s = fmt.Sprintf("%s of %s is %s %s", what, targetWords(c.Target), c.Op, c.Threshold)
		if !c.Hysteresis.IsZero() && c.Hysteresis.Value > 0 {
			back := c.Threshold.Value - c.Hysteresis.Value
			if c.Op == OpBelow {
				back = c.Threshold.Value + c.Hysteresis.Value
			}
			s += fmt.Sprintf(" (once true, it stays true until the value is back to %s)", formatValue(back, c.dim()))
		}
		switch c.NoData {
		case NoDataTrue:
			s += " (without data, it counts as true)"
		case NoDataHold:
			s += " (without data, it keeps its last state)"
		}
	case CondExpr:
		s = fmt.Sprintf("the expression `%s` is true", strings.TrimSpace(c.Expr))
	case CondAll, CondAny:
		parts := make([]string, len(c.Children))
		for i := range c.Children {
			parts[i] = c.Children[i].Describe()
		}
		word := "and"
		if c.Kind == CondAny {
			word = "or"
		}
		if len(parts) > 1 {
			s = "(" + strings.Join(parts, " "+word+" ") + ")"
		} else {
			s = strings.Join(parts, "")
		}
	default:
		s = "(no condition)"
	}
	if c.For > 0 {
		s += fmt.Sprintf(" for %s without a break", plainDuration(c.For))
	}
	return s
}

func metricWords(m Metric) string {
	switch m {
	case MetricUtilization:
		return "GPU utilization"
	case MetricBusyUtilization:
		return "busy GPU utilization (NVML)"
	case MetricP50Latency:
		return "median (p50) latency"
	case MetricP95Latency:
		return "p95 latency"
	case MetricP99Latency:
		return "p99 latency"
	case MetricQueueWait:
		return "mean queue wait"
	case MetricPendingGPUs:
		return "the number of pending GPUs"
	case MetricSpotPrice:
		return "the spot price per GPU-hour"
	case MetricCapacityFailureRate:
		return "the capacity failure rate"
	}
	return m.String()
}

func targetWords(t Target) string {
	switch t.Kind {
	case TargetCluster:
		return "the whole cluster"
	case TargetUnresolved:
		return t.Name
	case TargetSelector:
		return "workloads labelled " + t.Name
	}
	return t.Kind.String() + " " + t.Name
}

func targetList(ts []Target) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = targetWords(t)
	}
	return strings.Join(parts, ", ")
}

// Describe says the action in words.
func (a *Action) Describe() string {
	switch a.Type {
	case ActionScaleDown:
		return fmt.Sprintf("shrink %s to %s of its limit, evicting preemptible excess gracefully", targetWords(a.Target), a.MinCapacity)
	case ActionMigrate:
		return fmt.Sprintf("move %s to %s, requeued from their last checkpoint", targetWords(a.Target), targetWords(a.Destination))
	case ActionReallocate:
		var parts []string
		if a.Priority != PriorityNone {
			parts = append(parts, fmt.Sprintf("%s priority", a.Priority))
		}
		if !a.Guarantee.IsZero() {
			parts = append(parts, fmt.Sprintf("a temporary guarantee of %s GPUs", a.Guarantee))
		}
		return fmt.Sprintf("give %s %s", targetList(a.Resources), strings.Join(parts, " and "))
	case ActionSetPriority:
		return fmt.Sprintf("set the priority of %s to %s", targetWords(a.Target), a.Priority)
	case ActionSetLimit:
		return fmt.Sprintf("set the limit of %s to %s GPUs", targetWords(a.Target), a.Limit)
	case ActionSetSpotPrice:
		return fmt.Sprintf("set the spot price of %s to %s per GPU-hour", targetWords(a.Target), formatValue(a.Price.Value, DimPrice))
	case ActionDrain:
		return fmt.Sprintf("stop admitting new work to %s (running work stays)", targetWords(a.Target))
	case ActionNotify:
		if a.Channel != "" {
			return fmt.Sprintf("notify %s: %q", a.Channel, a.Message)
		}
		return fmt.Sprintf("notify: %q", a.Message)
	}
	return a.Type.String()
}

// Summary is a short form for logs: "scale_down developer_instances to 30%".
func (a *Action) Summary() string {
	switch a.Type {
	case ActionScaleDown:
		return fmt.Sprintf("scale_down %s to %s", a.Target, a.MinCapacity)
	case ActionMigrate:
		return fmt.Sprintf("migrate %s to %s", a.Target, a.Destination)
	case ActionReallocate:
		names := make([]string, len(a.Resources))
		for i, t := range a.Resources {
			names[i] = t.String()
		}
		s := "reallocate " + strings.Join(names, ",")
		if a.Priority != PriorityNone {
			s += " priority " + a.Priority.String()
		}
		if !a.Guarantee.IsZero() {
			s += " guarantee " + a.Guarantee.String()
		}
		return s
	case ActionSetPriority:
		return fmt.Sprintf("set_priority %s %s", a.Target, a.Priority)
	case ActionSetLimit:
		return fmt.Sprintf("set_limit %s %s", a.Target, a.Limit)
	case ActionSetSpotPrice:
		return fmt.Sprintf("set_spot_price %s %s", a.Target, a.Price)
	case ActionDrain:
		return fmt.Sprintf("drain %s", a.Target)
	case ActionNotify:
		return fmt.Sprintf("notify %s %q", a.Channel, a.Message)
	}
	return a.Type.String()
}
