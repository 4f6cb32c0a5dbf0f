package server

import (
	"github.com/arbiterhq/arbiter/internal/alert"
	"github.com/arbiterhq/arbiter/internal/policy"
)

// Alerts on policy metrics read the one metric table as policies do: the
// windows the policy runtime keeps (fed each policy tick by effects.Sample,
// the sampler the simulator uses too, and by POST /v1/metrics). An alert
// on utilization of a target therefore sees, at a tick, exactly the value
// a policy condition on it reads then.

// tableSamples returns one alert sample per policy metric × target the
// policy runtime has a value of, that value (the window's mean, quantile
// or last sample, as Metric.Series says).
func (pr *policyRunner) tableSamples() []alert.Sample {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	qs := pr.windows.Queries()
	out := make([]alert.Sample, 0, len(qs))
	for _, q := range qs {
		if v, ok := pr.windows.Value(q); ok {
			out = append(out, alert.Sample{Metric: q.Metric.String(), Labels: alert.Dims(q.Target), Value: v})
		}
	}
	return out
}

// ofString is the target of a rule on a policy metric or a Prometheus
// query, as the API shows it ("" for a server metric).
func ofString(r alert.Rule) string {
	if _, t, ok := r.Policy(); ok {
		return t.String()
	}
	if _, ok := r.Prom(); ok {
		if r.Of == "" {
			return policy.Cluster.String()
		}
		return r.Of
	}
	return ""
}
