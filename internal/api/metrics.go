package api

// MetricSamples are measurements pushed to the server for its policies:
// what it cannot see itself, such as an inference service's latency
// (POST /v1/metrics).
type MetricSamples struct {
	Samples []MetricSample `json:"samples"`
}

// MetricSample is one value of one metric on one target, taken now.
type MetricSample struct {
	// Metric is one of p50_latency, p95_latency, p99_latency (seconds),
	// queue_wait (seconds), spot_price (USD per GPU-hour) and
	// capacity_failure_rate (a fraction).
	Metric string `json:"metric"`
	// Target is kind:name (service:coding-assistant, class:batch_jobs,
	// tenant:contoso, region:eastus, ...) or "cluster".
	Target string  `json:"target"`
	Value  float64 `json:"value"`
}

// MetricsAccepted answers a push.
type MetricsAccepted struct {
	Accepted int `json:"accepted"`
}
