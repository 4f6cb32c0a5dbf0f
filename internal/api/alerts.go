package api

import "time"

// AlertsApply replaces the server's alert rules with a rules file.
type AlertsApply struct {
	File   string `json:"file,omitempty"`
	Source string `json:"source"`
}

// AlertRule is one alert rule with its evaluation state.
type AlertRule struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Metric      string `json:"metric"`
	// Of is a policy metric's target (cluster, tenant:contoso, "tenant:*");
	// Labels pick a server metric's series.
	Of     string            `json:"of,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Source "prometheus": the rule reads Query from the Prometheus
	// server Server (Metric is empty), TargetLabel naming the targets.
	Source       string   `json:"source,omitempty"`
	Server       string   `json:"server,omitempty"`
	Query        string   `json:"query,omitempty"`
	TargetLabel  string   `json:"target_label,omitempty"`
	Aggregation  string   `json:"aggregation"`
	Window       Duration `json:"window"`
	Frequency    Duration `json:"frequency"`
	Operator     string   `json:"operator"`
	Threshold    float64  `json:"threshold"`
	Severity     int      `json:"severity"`
	AutoMitigate bool     `json:"auto_mitigate"`
	Enabled      bool     `json:"enabled"`
	// Split rules alert per matching series (see Instances).
	Split bool `json:"split,omitempty"`
	// State is "Fired", "OK" or "NotEvaluated"; a split rule is Fired
	// while any instance is, and LastValue is its most extreme instance's.
	State         string     `json:"state"`
	FiredAt       *time.Time `json:"fired_at,omitempty"`
	LastEvaluated *time.Time `json:"last_evaluated,omitempty"`
	LastValue     *float64   `json:"last_value,omitempty"`
	// Instances are a split rule's alerts, one per series seen.
	Instances []AlertInstance `json:"instances,omitempty"`
}

// AlertInstance is the alert of one series of a split rule.
type AlertInstance struct {
	Labels    map[string]string `json:"labels"`
	State     string            `json:"state"` // "Fired", "OK" or "NoData"
	FiredAt   *time.Time        `json:"fired_at,omitempty"`
	LastValue *float64          `json:"last_value,omitempty"`
}

// Alerts are the applied alert rules.
type Alerts struct {
	File      string      `json:"file,omitempty"`
	AppliedAt *time.Time  `json:"applied_at,omitempty"`
	Items     []AlertRule `json:"items"`
}
