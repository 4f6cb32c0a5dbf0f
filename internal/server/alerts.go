package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/arbiterhq/arbiter/internal/alert"
	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// settingAlerts is the setting that holds the applied alert rules file;
// settingAlertState the fired alerts (alert.Saved by rule), written with
// every change so that a restart neither fires them again nor forgets to
// resolve them.
const (
	settingAlerts     = "alerts"
	settingAlertState = "alert-state"
)

type alertsSetting struct {
	File      string    `json:"file"`
	Source    string    `json:"source"`
	AppliedAt time.Time `json:"applied_at"`
}

// alertRunner samples the server's metrics, evaluates the alert rules on
// them and POSTs fired and resolved alerts to their webhooks. The clock is
// the server's: the evaluator itself takes Now as input.
type alertRunner struct {
	s    *Server
	hc   *http.Client
	mu   sync.Mutex
	eval *alert.Evaluator
	set  *alertsSetting
	// counters at the previous sample, to publish rates.
	prevPreempt  map[string]float64
	prevConflict float64
	prevCycleSum float64
	prevCycleN   uint64
	// zeroed are the count-like series seen before: a gauge the server
	// resets and does not set again (no pending work left) reads 0.
	zeroed map[string]alert.Sample
}

func newAlertRunner(s *Server) *alertRunner {
	return &alertRunner{s: s, hc: &http.Client{Timeout: 10 * time.Second}, eval: alert.NewEvaluator(nil), prevPreempt: map[string]float64{},
		zeroed: map[string]alert.Sample{}}
}

// compileAlerts validates a rules file; problems are 400s naming
// source.<field>.
func compileAlerts(file, source string) (*alert.File, error) {
	if file == "" {
		file = "alerts.yaml"
	}
	f, err := alert.Load(file, []byte(source))
	if err != nil {
		field := "source"
		var ye yamlfile.Errors
		if errors.As(err, &ye) && len(ye) > 0 && ye[0].Field != "" {
			field = "source." + ye[0].Field
		}
		return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, field, "%s", err.Error())
	}
	return f, nil
}

// load reads the stored rules.
func (ar *alertRunner) load(ctx context.Context) error {
	return ar.s.st.View(ctx, func(tx store.ReadTx) error {
		st, err := store.Get[store.Setting](tx, settingAlerts)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var set alertsSetting
		if err := json.Unmarshal(st.Value, &set); err != nil {
			return fmt.Errorf("server: stored alert rules: %w", err)
		}
		f, err := compileAlerts(set.File, set.Source)
		if err != nil {
			ar.s.log.Warn("stored alert rules no longer valid; none loaded", "err", err)
			return nil
		}
		ar.mu.Lock()
		defer ar.mu.Unlock()
		ar.eval.SetRules(f)
		ar.set = &set
		if st, err := store.Get[store.Setting](tx, settingAlertState); err == nil {
			var saved map[string]alert.Saved
			if json.Unmarshal(st.Value, &saved) == nil {
				ar.eval.Restore(saved)
			}
		}
		return nil
	})
}

// apply validates, stores and installs a rules file.
func (ar *alertRunner) apply(ctx context.Context, file, source string) error {
	f, err := compileAlerts(file, source)
	if err != nil {
		return err
	}
	set := &alertsSetting{File: file, Source: source, AppliedAt: ar.s.now()}
	data, err := json.Marshal(set)
	if err != nil {
		return err
	}
	err = ar.s.st.Update(ctx, func(tx store.WriteTx) error {
		if err := store.Put(tx, &store.Setting{Name: settingAlerts, Value: data}, store.Any); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: set.AppliedAt, Type: store.EventAlertRulesApplied, Object: store.AlertsObject,
			Message: fmt.Sprintf("%d alert rule(s) applied", len(f.Rules))})
	})
	if err != nil {
		return err
	}
	ar.mu.Lock()
	ar.eval.SetRules(f)
	ar.set = set
	ar.mu.Unlock()
	ar.s.notify(false)
	return nil
}

// sample returns the alert samples: the policy metrics as the policy
// runtime has them (tableSamples), and the server metrics.
func (ar *alertRunner) sample() []alert.Sample {
	out := append(ar.s.policies.tableSamples(), ar.serverSamples()...)
	for _, q := range ar.eval.PromQueries() {
		out = append(out, ar.s.policies.promSamples(q, ar.s.now())...)
	}
	return out
}

// promQueries returns the Prometheus queries the alert rules read.
func (ar *alertRunner) promQueries() []policy.PromQuery {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	return ar.eval.PromQueries()
}

// serverSamples derives the server metrics (alert.ServerMetrics) from the
// server's Prometheus registry.
func (ar *alertRunner) serverSamples() []alert.Sample {
	fams, err := ar.s.metrics.reg.Gather()
	if err != nil {
		ar.s.log.Warn("alerts: gathering metrics", "err", err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	each := func(name string, fn func(m *dto.Metric, v float64)) {
		f := byName[name]
		if f == nil {
			return
		}
		for _, m := range f.GetMetric() {
			switch {
			case m.Gauge != nil:
				fn(m, m.GetGauge().GetValue())
			case m.Counter != nil:
				fn(m, m.GetCounter().GetValue())
			default:
				fn(m, 0)
			}
		}
	}
	var out []alert.Sample
	add := func(metric string, v float64, kv ...string) {
		l := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		out = append(out, alert.Sample{Metric: metric, Labels: l, Value: v})
	}
	type fr struct{ f, r string }
	alloc, capy := map[fr]float64{}, map[fr]float64{}
	allocT := map[string]float64{}
	each("arbiter_allocated_gpus", func(m *dto.Metric, v float64) {
		f, r := label(m, "flavor"), label(m, "region")
		for _, k := range []fr{{f, r}, {f, ""}, {"", r}, {"", ""}} {
			alloc[k] += v
		}
		allocT[label(m, "tenant")] += v
	})
	each("arbiter_capacity_gpus", func(m *dto.Metric, v float64) {
		f, r := label(m, "flavor"), label(m, "region")
		for _, k := range []fr{{f, r}, {f, ""}, {"", r}, {"", ""}} {
			capy[k] += v
		}
	})
	dims := func(k fr) []string {
		var kv []string
		if k.f != "" {
			kv = append(kv, "flavor", k.f)
		}
		if k.r != "" {
			kv = append(kv, "region", k.r)
		}
		return kv
	}
	ks := make([]fr, 0, len(capy))
	for k := range capy {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].f < ks[j].f || ks[i].f == ks[j].f && ks[i].r < ks[j].r })
	for _, k := range ks {
		add("gpus_capacity", capy[k], dims(k)...)
		add("gpus_allocated", alloc[k], dims(k)...)
	}
	for _, t := range sortedKeys(allocT) {
		add("gpus_allocated", allocT[t], "tenant", t)
	}
	pendW := map[string]float64{}
	var pendWAll float64
	each("arbiter_pending_workloads", func(m *dto.Metric, v float64) {
		pendW[label(m, "tenant")] += v
		pendWAll += v
	})
	for _, t := range sortedKeys(pendW) {
		add("pending_workloads", pendW[t], "tenant", t)
	}
	add("pending_workloads", pendWAll)
	var preAll float64
	seen := map[string]bool{}
	each("arbiter_preemptions_total", func(m *dto.Metric, v float64) {
		t := label(m, "tenant")
		seen[t] = true
		d := max(0, v-ar.prevPreempt[t])
		ar.prevPreempt[t] = v
		add("preemptions", d, "tenant", t)
		preAll += d
	})
	add("preemptions", preAll)
	res := map[[2]string]map[string]float64{}
	for _, name := range []string{"arbiter_reservation_capacity_gpus", "arbiter_reservation_allocated_gpus"} {
		each(name, func(m *dto.Metric, v float64) {
			k := [2]string{label(m, "tenant"), label(m, "reservation")}
			if res[k] == nil {
				res[k] = map[string]float64{}
			}
			res[k][name] = v
		})
	}
	for k, v := range res {
		if c := v["arbiter_reservation_capacity_gpus"]; c > 0 {
			add("reservation_utilization", v["arbiter_reservation_allocated_gpus"]/c, "tenant", k[0], "reservation", k[1])
		}
	}
	each("arbiter_plan_conflicts_total", func(m *dto.Metric, v float64) {
		add("plan_conflicts", max(0, v-ar.prevConflict))
		ar.prevConflict = v
	})
	if f := byName["arbiter_schedule_cycle_duration_seconds"]; f != nil && len(f.GetMetric()) == 1 {
		h := f.GetMetric()[0].GetHistogram()
		if n := h.GetSampleCount(); n > ar.prevCycleN {
			add("schedule_cycle_seconds", (h.GetSampleSum()-ar.prevCycleSum)/float64(n-ar.prevCycleN))
		}
		ar.prevCycleN, ar.prevCycleSum = h.GetSampleCount(), h.GetSampleSum()
	}
	have := map[string]bool{}
	for _, x := range out {
		if x.Metric == "pending_workloads" || x.Metric == "gpus_allocated" {
			k := fmt.Sprint(x.Metric, x.Labels)
			have[k] = true
			ar.zeroed[k] = alert.Sample{Metric: x.Metric, Labels: x.Labels}
		}
	}
	for _, k := range sortedKeys(ar.zeroed) {
		if !have[k] {
			out = append(out, ar.zeroed[k])
		}
	}
	return out
}

// tick samples the metrics at the server's now, evaluates the rules that
// are due and delivers their notifications; it returns how many were
// delivered.
func (ar *alertRunner) tick(ctx context.Context) int {
	now := ar.s.now()
	ar.mu.Lock()
	ar.eval.Observe(now, ar.sample())
	notes := ar.eval.Evaluate(now)
	saved, jerr := json.Marshal(ar.eval.Save())
	ar.mu.Unlock()
	if len(notes) == 0 {
		return 0
	}
	err := ar.s.st.Update(ctx, func(tx store.WriteTx) error {
		if jerr == nil {
			if err := store.Put(tx, &store.Setting{Name: settingAlertState, Value: saved}, store.Any); err != nil {
				return err
			}
		}
		for _, n := range notes {
			e := n.Payload.Data.Essentials
			c := n.Payload.Data.AlertContext.Condition.AllOf[0]
			if err := store.AppendEvent(tx, &store.Event{Time: now, Type: store.AlertEvent(e.MonitorCondition), Object: store.AlertObject(e.AlertRule),
				Message: fmt.Sprintf("%s %s: %s %s of %s = %g (%s %s)", e.Severity, e.MonitorCondition, e.AlertRule, c.TimeAggregation, c.MetricName, c.MetricValue, c.Operator, c.Threshold)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		ar.s.log.Error("alerts: recording", "err", err)
	} else {
		ar.s.notify(false)
	}
	sent := 0
	for _, n := range notes {
		e := n.Payload.Data.Essentials
		ar.s.log.Info("alert", "rule", e.AlertRule, "condition", e.MonitorCondition, "severity", e.Severity)
		if n.Webhook == "" {
			continue
		}
		if err := postJSON(ctx, ar.hc, n.Webhook, n.Payload); err != nil {
			// The URL may hold a secret: log the rule, not the URL.
			ar.s.log.Warn("alerts: webhook delivery failed", "rule", e.AlertRule, "condition", e.MonitorCondition, "err", redact(err, n.Webhook))
			continue
		}
		sent++
	}
	return sent
}

func redact(err error, url string) string {
	return strings.ReplaceAll(err.Error(), url, "<webhook>")
}

// alertLoop ticks the alert rules every AlertInterval until ctx ends.
func (s *Server) alertLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.AlertInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.alerts.tick(ctx)
		}
	}
}

// TickAlerts samples the metrics and evaluates the alert rules once now
// (tests and tools); it returns how many notifications were delivered.
func (s *Server) TickAlerts(ctx context.Context) int { return s.alerts.tick(ctx) }

// ---- handlers ----

func (ar *alertRunner) out() api.Alerts {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	o := api.Alerts{Items: []api.AlertRule{}}
	if ar.set != nil {
		t := ar.set.AppliedAt
		o.File, o.AppliedAt = ar.set.File, &t
	}
	for _, st := range ar.eval.States() {
		r := st.Rule
		a := api.AlertRule{Name: r.Name, Description: r.Description, Metric: r.Metric, Labels: r.Labels, Aggregation: r.Aggregation,
			Of: ofString(r), Source: r.Source, Server: r.Server, Query: r.Query, TargetLabel: r.TargetLabel,
			Window: api.Duration(r.Window), Frequency: api.Duration(r.Frequency), Operator: r.Operator, Threshold: r.Threshold,
			Severity: r.Sev(), AutoMitigate: r.Mitigates(), Enabled: r.On(), State: "NotEvaluated", Split: r.Split}
		for _, in := range st.Instances {
			ai := api.AlertInstance{Labels: in.Labels, State: "NoData"}
			if in.HasValue {
				v := in.LastValue
				ai.State, ai.LastValue = "OK", &v
			}
			if in.Fired {
				t := in.FiredAt
				ai.State, ai.FiredAt = alert.Fired, &t
			}
			a.Instances = append(a.Instances, ai)
		}
		if !st.LastEvaluated.IsZero() {
			t := st.LastEvaluated
			a.LastEvaluated, a.State = &t, "OK"
			if st.HasValue {
				v := st.LastValue
				a.LastValue = &v
			}
		}
		if st.Fired {
			t := st.FiredAt
			a.State, a.FiredAt = alert.Fired, &t
		}
		o.Items = append(o.Items, a)
	}
	return o
}

func (s *Server) listAlerts(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.alerts.out())
	return nil
}

func (s *Server) applyAlerts(w http.ResponseWriter, r *http.Request) error {
	var in api.AlertsApply
	if err := s.decode(w, r, &in); err != nil {
		return err
	}
	if len(in.File) > 255 || strings.ContainsAny(in.File, "\n\r") {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "file", "file is a name of at most 255 characters on one line")
	}
	if err := s.alerts.apply(r.Context(), in.File, in.Source); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.alerts.out())
	return nil
}
