package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/probe"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// settingProbes holds the applied probes (probesSetting).
const settingProbes = "probes"

type probesSetting struct {
	File      string       `json:"file"`
	Specs     []probe.Spec `json:"specs"`
	AppliedAt time.Time    `json:"applied_at"`
}

// probeTick is how often the leader looks for probes that are due.
const probeTick = 100 * time.Millisecond

// maxProbeResults bounds the attempts one heartbeat may report.
const maxProbeResults = 4096

// probeRunner runs the server's probes (from: server) on the leader and
// takes the agents' (from: agents, region:, node:) from their
// heartbeats. Every attempt becomes a latency and a success sample of
// the probe's target and of the cluster in the policy windows (what
// policies and alerts read), and of the probe in its own windows (what
// GET /v1/probes shows).
type probeRunner struct {
	s   *Server
	run *probe.Runner

	mu     sync.Mutex
	set    *probesSetting
	probes map[string]probe.Probe
	// stats holds each probe's samples by the target service:<probe name>.
	stats   *policy.Windows
	last    map[string]api.ProbeAttempt
	metrics probeMetrics
}

// probeMetrics are the probes' Prometheus metrics; their probe label has
// one value per applied probe (at most probe.MaxProbes), removed with it.
type probeMetrics struct {
	duration *prometheus.HistogramVec
	attempts *prometheus.CounterVec
}

func newProbeRunner(s *Server) *probeRunner {
	pr := &probeRunner{s: s, probes: map[string]probe.Probe{}, stats: policy.NewWindows(policyWindow), last: map[string]api.ProbeAttempt{}}
	pr.run = probe.NewRunner(probe.Options{Concurrency: s.opts.ProbeConcurrency, Clock: s.now, Record: func(r probe.Result) { pr.record(r, "") }})
	pr.metrics = probeMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "arbiter_probe_duration_seconds",
			Help: "Duration of probe attempts, by probe (a failed attempt counts as its timeout).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"probe"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "arbiter_probe_attempts_total",
			Help: "Probe attempts, by probe and result (ok, failed)."}, []string{"probe", "result"}),
	}
	missed := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "arbiter_probe_missed_intervals_total",
		Help: "Intervals the server's probes missed because every probe slot was busy (see --probe-concurrency)."},
		func() float64 { return float64(pr.run.Missed()) })
	s.metrics.register(pr.metrics.duration, pr.metrics.attempts, missed)
	return pr
}

func (m probeMetrics) observe(name string, d time.Duration, ok bool) {
	m.duration.WithLabelValues(name).Observe(d.Seconds())
	result := "failed"
	if ok {
		result = "ok"
	}
	m.attempts.WithLabelValues(name, result).Inc()
}

func (m probeMetrics) forget(name string) {
	m.duration.DeleteLabelValues(name)
	m.attempts.DeleteLabelValues(name, "ok")
	m.attempts.DeleteLabelValues(name, "failed")
}

// compileProbes checks a probes file; problems are 400s naming
// source.<field>.
func compileProbes(file, source string) ([]probe.Spec, []probe.Probe, error) {
	if file == "" {
		file = "probes.yaml"
	}
	var f probe.File
	err := yamlfile.Decode(file, []byte(source), &f)
	var ps []probe.Probe
	if !yamlfile.Stopped(err) {
		var errs yamlfile.Errors
		ps, errs = probe.Check(file, "probes", f.Probes)
		err = yamlfile.Merge(err, errs).Err()
	}
	if err != nil {
		field := "source"
		var ye yamlfile.Errors
		if errors.As(err, &ye) && len(ye) > 0 && ye[0].Field != "" {
			field = "source." + ye[0].Field
		}
		return nil, nil, apiErr(http.StatusBadRequest, api.CodeInvalid, field, "%s", err.Error())
	}
	return f.Probes, ps, nil
}

// install makes set the probes in force.
func (pr *probeRunner) install(set *probesSetting) error {
	ps, errs := probe.Check(set.File, "probes", set.Specs)
	if err := errs.Err(); err != nil {
		return err
	}
	pr.mu.Lock()
	old := pr.probes
	pr.set, pr.probes = set, map[string]probe.Probe{}
	var own []probe.Probe
	for _, p := range ps {
		pr.probes[p.Name] = p
		if p.From.Server {
			own = append(own, p)
		}
	}
	for name := range old {
		if _, ok := pr.probes[name]; !ok {
			delete(pr.last, name)
			pr.metrics.forget(name)
		}
	}
	pr.mu.Unlock()
	pr.run.Set(own)
	return nil
}

// load reads the stored probes.
func (pr *probeRunner) load(ctx context.Context) error {
	return pr.s.st.View(ctx, func(tx store.ReadTx) error {
		st, err := store.Get[store.Setting](tx, settingProbes)
		if errors.Is(err, store.ErrNotFound) {
			return pr.install(&probesSetting{})
		}
		if err != nil {
			return err
		}
		var set probesSetting
		if err := json.Unmarshal(st.Value, &set); err != nil {
			return fmt.Errorf("server: stored probes: %w", err)
		}
		if err := pr.install(&set); err != nil {
			pr.s.log.Warn("stored probes no longer valid; none loaded", "err", err)
		}
		return nil
	})
}

// apply stores and installs probes (checked already).
func (pr *probeRunner) apply(ctx context.Context, file string, specs []probe.Spec) error {
	set := &probesSetting{File: file, Specs: specs, AppliedAt: pr.s.now()}
	data, err := json.Marshal(set)
	if err != nil {
		return err
	}
	err = pr.s.st.Update(ctx, func(tx store.WriteTx) error {
		if err := store.Put(tx, &store.Setting{Name: settingProbes, Value: data}, store.Any); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: set.AppliedAt, Type: store.EventProbesApplied, Object: store.ProbesObject,
			Message: fmt.Sprintf("%d probe(s) applied", len(specs))})
	})
	if err != nil {
		return err
	}
	return pr.install(set)
}

// record takes one attempt (node: the agent that ran it, "" for the
// server) into the policy windows and the probe's own.
func (pr *probeRunner) record(r probe.Result, node string) {
	secs, ok := r.Latency.Seconds(), 0.0
	if r.OK {
		ok = 1
	}
	pol := pr.s.policies
	pol.mu.Lock()
	for _, t := range []policy.Target{r.Target, policy.Cluster} {
		pol.windows.ObserveMetric(policy.MetricP95Latency, t, r.At, secs)
		pol.windows.ObserveMetric(policy.MetricSuccessRatio, t, r.At, ok)
	}
	pol.mu.Unlock()
	self := policy.Target{Kind: policy.TargetService, Name: r.Probe}
	pr.mu.Lock()
	pr.stats.ObserveMetric(policy.MetricP95Latency, self, r.At, secs)
	pr.stats.ObserveMetric(policy.MetricSuccessRatio, self, r.At, ok)
	pr.last[r.Probe] = api.ProbeAttempt{At: r.At, Latency: api.Duration(r.Latency), OK: r.OK, Status: r.Status, Error: r.Err, Node: node}
	pr.mu.Unlock()
	pr.metrics.observe(r.Probe, r.Latency, r.OK)
}

// targets are the probes' targets (services and classes policies may
// name), by probe name.
func (pr *probeRunner) targets() []policy.Target {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	out := make([]policy.Target, 0, len(pr.probes))
	for _, name := range sortedKeys(pr.probes) {
		out = append(out, pr.probes[name].Target)
	}
	return out
}

// tasksFor lists the probes the agent of node (in region) runs.
func (pr *probeRunner) tasksFor(node fleet.NodeID, region string) []api.ProbeTask {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []api.ProbeTask
	for _, name := range sortedKeys(pr.probes) {
		p := pr.probes[name]
		if !p.From.Runs(string(node), region) {
			continue
		}
		out = append(out, api.ProbeTask{Name: p.Name, URL: p.URL, Method: p.Method, Body: p.Body, HeadersFile: p.HeadersFile,
			Interval: api.Duration(p.Interval), Timeout: api.Duration(p.Timeout), ExpectStatus: p.ExpectStatus})
	}
	return out
}

// fromAgent takes the attempts an agent reports: only of probes its node
// runs, with latencies within the probe's timeout, stamped no later than
// now and no earlier than a window ago (an agent's clock is its own).
func (pr *probeRunner) fromAgent(node fleet.NodeID, region string, rs []api.ProbeResult) error {
	if len(rs) > maxProbeResults {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "probe_results", "at most %d probe results, got %d", maxProbeResults, len(rs))
	}
	now := pr.s.now()
	in := make([]probe.Result, 0, len(rs))
	pr.mu.Lock()
	for i, x := range rs {
		p, ok := pr.probes[x.Probe]
		if !ok || !p.From.Runs(string(node), region) {
			// A probe removed since the agent's last reply: drop it quietly.
			continue
		}
		lat := time.Duration(x.Latency)
		if lat < 0 || lat > p.Timeout {
			pr.mu.Unlock()
			return apiErr(http.StatusBadRequest, api.CodeInvalid, fmt.Sprintf("probe_results[%d].latency", i),
				"want a latency between 0 and the probe's timeout (%v), got %v", p.Timeout, lat)
		}
		if !x.OK {
			lat = p.Timeout
		}
		at := x.At
		if at.After(now) || at.IsZero() {
			at = now
		}
		if at.Before(now.Add(-policyWindow)) {
			continue
		}
		in = append(in, probe.Result{Probe: p.Name, Target: p.Target, At: at, Latency: lat, OK: x.OK, Status: x.Status, Err: clip(x.Error, 200)})
	}
	pr.mu.Unlock()
	for _, r := range in {
		pr.record(r, string(node))
	}
	return nil
}

// out is GET /v1/probes.
func (pr *probeRunner) out() api.Probes {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	o := api.Probes{Items: []api.Probe{}}
	if pr.set != nil && !pr.set.AppliedAt.IsZero() {
		t := pr.set.AppliedAt
		o.File, o.AppliedAt = pr.set.File, &t
	}
	pr.stats.Advance(pr.s.now())
	for _, name := range sortedKeys(pr.probes) {
		p := pr.probes[name]
		x := api.Probe{Name: p.Name, URL: p.URL, Method: p.Method, HeadersFile: p.HeadersFile, Interval: api.Duration(p.Interval),
			Timeout: api.Duration(p.Timeout), ExpectStatus: p.ExpectStatus, From: p.From.String(), Target: p.Target.String()}
		self := policy.Target{Kind: policy.TargetService, Name: p.Name}
		if w := pr.stats.Window("latency", self); w != nil {
			x.Samples = w.Len()
		}
		for _, q := range []struct {
			m   policy.Metric
			out **api.Duration
		}{{policy.MetricP50Latency, &x.P50}, {policy.MetricP95Latency, &x.P95}, {policy.MetricP99Latency, &x.P99}} {
			if v, ok := pr.stats.Value(policy.Query{Metric: q.m, Target: self}); ok {
				d := api.Duration(time.Duration(v * float64(time.Second)))
				*q.out = &d
			}
		}
		if v, ok := pr.stats.Value(policy.Query{Metric: policy.MetricSuccessRatio, Target: self}); ok {
			x.SuccessRatio = &v
		}
		if l, ok := pr.last[name]; ok {
			x.Last = &l
		}
		o.Items = append(o.Items, x)
	}
	return o
}

// probeLoop runs the server's probes until ctx ends.
func (s *Server) probeLoop(ctx context.Context) { s.probes.run.Run(ctx, probeTick) }

// ProbeNow starts the server's probes that are due at the server's clock
// and waits for them (tests and tools; the leader's loop does this on its
// own). It returns how many ran.
func (s *Server) ProbeNow(ctx context.Context) int {
	n := s.probes.run.RunDue(ctx)
	s.probes.run.Wait()
	return n
}

// ---- handlers ----

func (s *Server) listProbes(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.probes.out())
	return nil
}

func (s *Server) applyProbes(w http.ResponseWriter, r *http.Request) error {
	var in api.ProbesApply
	if err := s.decode(w, r, &in); err != nil {
		return err
	}
	if len(in.File) > 255 || strings.ContainsAny(in.File, "\n\r") {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "file", "file is a name of at most 255 characters on one line")
	}
	specs, _, err := compileProbes(in.File, in.Source)
	if err != nil {
		return err
	}
	if err := s.probes.apply(r.Context(), in.File, specs); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.probes.out())
	return nil
}
