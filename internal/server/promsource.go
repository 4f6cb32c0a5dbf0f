package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter/internal/alert"
	"github.com/arbiterhq/arbiter/internal/policy"
)

// The Prometheus source: the policies' (and alert rules') leaves that read
// a PromQL expression (source: prometheus). On the leader, promLoop runs
// every distinct query at the policy interval through the server's HTTP
// API (/api/v1/query, at the server's clock) in its own goroutine, a few
// at a time, each bounded in time and size, and records the results in
// the windows the policy tick reads; the tick never waits for a query.
// A failed query drops its series (no data), and a result older than
// twice the policy interval counts as no data (Windows.SetMaxAge): the
// leaf's no_data says what that means.

const (
	// promTimeout bounds one query: connection, Prometheus' evaluation
	// (sent as its timeout parameter) and the response.
	promTimeout = 5 * time.Second
	// promMaxBody bounds a response body; a larger one is an error.
	promMaxBody = 4 << 20
	// promMaxSamples bounds the series of one result.
	promMaxSamples = 10000
	// promWorkers is how many queries run at once.
	promWorkers = 4
)

// Reasons a query failed, the reason label of
// arbiter_prometheus_query_errors_total.
const (
	promErrTimeout     = "timeout"     // no answer within promTimeout
	promErrUnreachable = "unreachable" // connection or transport failure
	promErrStatus      = "status"      // Prometheus answered status "error" (bad query, ...)
	promErrInvalid     = "invalid"     // not a Prometheus answer: HTTP status, JSON, size, result type
	promErrShape       = "shape"       // the result does not map to targets (several series without target_label)
)

// promError is a failed query with its reason.
type promError struct {
	reason string
	err    error
}

func (e *promError) Error() string { return "prometheus: " + e.err.Error() }
func (e *promError) Unwrap() error { return e.err }

func promErrorf(reason, format string, args ...any) error {
	return &promError{reason: reason, err: fmt.Errorf(format, args...)}
}

// promSample is one series of a query's result.
type promSample struct {
	Labels map[string]string
	Value  float64
}

// promResponse is the envelope of /api/v1/query's answer.
type promResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// parsePromResponse parses an /api/v1/query answer: a vector (one sample
// per series) or a scalar (one sample without labels). NaN and infinite
// values are left out: a series without a number has no data.
func parsePromResponse(body []byte) ([]promSample, error) {
	if len(body) > promMaxBody {
		return nil, promErrorf(promErrInvalid, "answer larger than %d bytes", promMaxBody)
	}
	var r promResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, promErrorf(promErrInvalid, "answer is not Prometheus JSON: %v", err)
	}
	switch r.Status {
	case "success":
	case "error":
		return nil, promErrorf(promErrStatus, "query failed: %s: %s", clip(r.ErrorType, 64), clip(r.Error, 512))
	default:
		return nil, promErrorf(promErrInvalid, "answer has status %q", clip(r.Status, 64))
	}
	switch r.Data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  []json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &vec); err != nil {
			return nil, promErrorf(promErrInvalid, "vector result: %v", err)
		}
		if len(vec) > promMaxSamples {
			return nil, promErrorf(promErrInvalid, "result has %d series, more than %d", len(vec), promMaxSamples)
		}
		out := make([]promSample, 0, len(vec))
		for _, x := range vec {
			v, err := promValue(x.Value)
			if err != nil {
				return nil, err
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			out = append(out, promSample{Labels: x.Metric, Value: v})
		}
		return out, nil
	case "scalar":
		var pair []json.RawMessage
		if err := json.Unmarshal(r.Data.Result, &pair); err != nil {
			return nil, promErrorf(promErrInvalid, "scalar result: %v", err)
		}
		v, err := promValue(pair)
		if err != nil {
			return nil, err
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil
		}
		return []promSample{{Labels: map[string]string{}, Value: v}}, nil
	}
	return nil, promErrorf(promErrInvalid, "result type %q: write a query that gives an instant vector or a scalar", clip(r.Data.ResultType, 64))
}

// promValue parses a [timestamp, "value"] pair.
func promValue(pair []json.RawMessage) (float64, error) {
	if len(pair) != 2 {
		return 0, promErrorf(promErrInvalid, "sample is not a [time, value] pair")
	}
	var s string
	if err := json.Unmarshal(pair[1], &s); err != nil {
		return 0, promErrorf(promErrInvalid, "sample value is not a string: %v", err)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, promErrorf(promErrInvalid, "sample value %q is not a number", clip(s, 64))
	}
	return v, nil
}

// promTargets maps a result to the targets it gives values for (see
// policy.PromQuery.TargetFor): without a target label the result must be
// one series, the cluster's (none: no data); with one, each series is the
// target its label names, series without a valid name are left out, and
// a target two series name has no value (which of them is meant?).
func promTargets(q policy.PromQuery, samples []promSample) (map[policy.Target]float64, error) {
	out := map[policy.Target]float64{}
	if q.TargetLabel == "" {
		switch len(samples) {
		case 0:
			return out, nil
		case 1:
			out[policy.Cluster] = samples[0].Value
			return out, nil
		}
		return nil, promErrorf(promErrShape, "the query gives %d series: aggregate it to one, or set target_label to the label that names each series' target", len(samples))
	}
	twice := map[policy.Target]bool{}
	for _, x := range samples {
		t, ok := q.TargetFor(x.Labels)
		if !ok {
			continue
		}
		if _, dup := out[t]; dup {
			twice[t] = true
		}
		out[t] = x.Value
	}
	for t := range twice {
		delete(out, t)
	}
	return out, nil
}

// promClient runs queries against Prometheus servers.
type promClient struct {
	hc *http.Client
	// timeout bounds one query (promTimeout; tests shorten it).
	timeout time.Duration
}

func newPromClient() *promClient {
	return &promClient{timeout: promTimeout, hc: &http.Client{
		// A query goes to the server the policy names, and no further.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// query evaluates q.Expr at time at on q.Server.
func (pc *promClient) query(ctx context.Context, q policy.PromQuery, at time.Time) ([]promSample, error) {
	ctx, cancel := context.WithTimeout(ctx, pc.timeout)
	defer cancel()
	form := url.Values{
		"query":   {q.Expr},
		"time":    {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)},
		"timeout": {pc.timeout.String()},
	}
	endpoint := strings.TrimRight(q.Server, "/") + "/api/v1/query"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, promErrorf(promErrInvalid, "%v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := pc.hc.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return nil, promErrorf(promErrTimeout, "no answer from %s within %s", q.Server, pc.timeout)
		}
		return nil, promErrorf(promErrUnreachable, "%s: %v", q.Server, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, promMaxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, promErrorf(promErrTimeout, "answer from %s not complete within %s", q.Server, pc.timeout)
		}
		return nil, promErrorf(promErrUnreachable, "%s: reading the answer: %v", q.Server, err)
	}
	samples, perr := parsePromResponse(body)
	// Prometheus answers a bad query with a 4xx and an error status: keep
	// its message.
	var pe *promError
	if resp.StatusCode/100 != 2 && !(errors.As(perr, &pe) && pe.reason == promErrStatus) {
		return nil, promErrorf(promErrInvalid, "%s answered HTTP %d: %s", q.Server, resp.StatusCode, clip(string(bytes.TrimSpace(body)), 200))
	}
	return samples, perr
}

// promQueries returns the distinct Prometheus queries the applied
// policies read, ordered by series.
func (pr *policyRunner) promQueries() []policy.PromQuery {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var qs []policy.PromQuery
	for _, e := range pr.engines {
		qs = append(qs, e.PromQueries()...)
	}
	return policy.DistinctPromQueries(qs)
}

// promSamples returns the alert samples of a Prometheus query: one per
// target its last result gave, while fresh (see Windows.SetMaxAge).
func (pr *policyRunner) promSamples(q policy.PromQuery, now time.Time) []alert.Sample {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.windows.Advance(now)
	var out []alert.Sample
	for _, t := range pr.windows.Targets(q.Series()) {
		if v, ok := pr.windows.Value(policy.Query{Series: q.Series(), Target: t}); ok {
			out = append(out, alert.Sample{Metric: q.Series(), Labels: alert.Dims(t), Value: v})
		}
	}
	return out
}

// recordProm records a query's result at time at in the windows: the
// series is replaced by the targets the result gives (none on err).
func (pr *policyRunner) recordProm(q policy.PromQuery, at time.Time, values map[policy.Target]float64) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.windows.Drop(q.Series())
	for t, v := range values {
		pr.windows.Observe(q.Series(), t, at, v)
	}
	if pr.promSeries == nil {
		pr.promSeries = map[string]bool{}
	}
	pr.promSeries[q.Series()] = true
}

// pruneProm drops the series of queries no policy or alert rule reads
// any more (keep holds the series of those that do).
func (pr *policyRunner) pruneProm(keep map[string]bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for series := range pr.promSeries {
		if !keep[series] {
			pr.windows.Drop(series)
			delete(pr.promSeries, series)
		}
	}
}

// PollSources runs every Prometheus query the applied policies and alert
// rules read once now, promWorkers at a time, and records the results
// (the leader's loop does so every policy interval; tests call it to
// drive the source on a pinned clock). It returns when every query
// answered or timed out.
func (s *Server) PollSources(ctx context.Context) {
	qs := s.policies.promQueries()
	seen := map[string]bool{}
	for _, q := range qs {
		seen[q.Series()] = true
	}
	for _, q := range s.alerts.promQueries() {
		if !seen[q.Series()] {
			seen[q.Series()] = true
			qs = append(qs, q)
		}
	}
	defer s.policies.pruneProm(seen)
	if len(qs) == 0 {
		return
	}
	at := s.now()
	sem := make(chan struct{}, promWorkers)
	var wg sync.WaitGroup
	for _, q := range qs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			start := time.Now()
			samples, err := s.prom.query(ctx, q, at)
			var values map[policy.Target]float64
			if err == nil {
				values, err = promTargets(q, samples)
			}
			s.metrics.promQuery.WithLabelValues(q.Server).Observe(time.Since(start).Seconds())
			if err != nil {
				reason := promErrInvalid
				var pe *promError
				if errors.As(err, &pe) {
					reason = pe.reason
				}
				s.metrics.promErrors.WithLabelValues(q.Server, reason).Inc()
				s.log.Warn("prometheus source: query failed; its conditions have no data", "server", q.Server, "query", clip(q.Expr, 200), "reason", reason, "err", err)
			}
			s.policies.recordProm(q, at, values)
		})
	}
	wg.Wait()
}

// promLoop polls the Prometheus sources every policy interval until ctx
// ends, apart from the scheduler loop and the policy tick.
func (s *Server) promLoop(ctx context.Context) {
	tick := time.NewTicker(s.opts.PolicyInterval)
	defer tick.Stop()
	for {
		s.PollSources(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
