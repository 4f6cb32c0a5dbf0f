package server

import (
	"fmt"
	"math"
	"net/http"
	"slices"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/policy"
)

// pushable are the metrics policies read that only the outside world can
// measure; the server samples utilization and pending GPUs itself.
var pushable = []policy.Metric{policy.MetricP50Latency, policy.MetricP95Latency, policy.MetricP99Latency,
	policy.MetricQueueWait, policy.MetricSpotPrice, policy.MetricCapacityFailureRate, policy.MetricSuccessRatio}

const maxSamples = 1000

// pushMetrics takes measurements for the policies (admin): each sample is
// recorded at the server's time of arrival in the windows policies read.
func (s *Server) pushMetrics(w http.ResponseWriter, r *http.Request) error {
	var req api.MetricSamples
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if len(req.Samples) == 0 || len(req.Samples) > maxSamples {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "samples", "send 1 to %d samples, got %d", maxSamples, len(req.Samples))
	}
	type sample struct {
		m policy.Metric
		t policy.Target
		v float64
	}
	in := make([]sample, len(req.Samples))
	for i, x := range req.Samples {
		field := func(f string) string { return fmt.Sprintf("samples[%d].%s", i, f) }
		m, err := policy.ParseMetric(x.Metric)
		if err != nil {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field("metric"), "%v", err)
		}
		if !slices.Contains(pushable, m) {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field("metric"), "the server measures %s itself; push one of p50_latency, p95_latency, p99_latency, queue_wait, spot_price, capacity_failure_rate, success_ratio", m)
		}
		t, err := policy.ParseTarget(x.Target)
		if err != nil {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field("target"), "%v", err)
		}
		if t.Kind == policy.TargetUnresolved {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field("target"), "write the target's kind, e.g. service:%s", x.Target)
		}
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) || x.Value < 0 {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field("value"), "want a finite value of at least 0, got %v", x.Value)
		}
		in[i] = sample{m, t, x.Value}
	}
	now := s.now()
	pr := s.policies
	pr.mu.Lock()
	for _, x := range in {
		pr.windows.ObserveMetric(x.m, x.t, now, x.v)
	}
	pr.mu.Unlock()
	writeJSON(w, http.StatusOK, api.MetricsAccepted{Accepted: len(in)})
	return nil
}
