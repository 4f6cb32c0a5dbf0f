package policy

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// values is a Metrics backed by a map; missing keys have no data.
type values map[Query]float64

func (v values) Value(q Query) (float64, bool) {
	x, ok := v[q]
	return x, ok
}

var t0 = time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)

func mustLoad(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Load("test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return p
}

func mustEngine(t testing.TB, src string) *Engine {
	t.Helper()
	e, err := NewEngine(mustLoad(t, src))
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	return e
}

// run evaluates the engine every minute for the given minutes, with the
// metric values that at returns for minute i, and returns all firings and
// the last step.
func run(e *Engine, minutes int, at func(i int) values) ([]Firing, Step) {
	var log []Firing
	var st Step
	for i := 0; i < minutes; i++ {
		st = e.Evaluate(t0.Add(time.Duration(i)*time.Minute), at(i))
		log = append(log, st.Firings...)
	}
	return log, st
}

// events summarises firings as "minute:rule:event".
func events(log []Firing) []string {
	var out []string
	for _, f := range log {
		out = append(out, fmt.Sprintf("%d:%s:%s", int(f.Time.Sub(t0)/time.Minute), f.Rule, f.Event))
	}
	return out
}

var (
	clusterUtil = Query{Metric: MetricUtilization, Target: Cluster}
	clusterP95  = Query{Metric: MetricP95Latency, Target: Cluster}
)

const utilRule = `
policies:
  - name: hot
    when: {metric: utilization, above: 85%%}
    then: [{type: drain, target: pool:a}]
    cooldown: %s
`

func TestOscillationFiresAtMostOncePerCooldown(t *testing.T) {
	for _, tc := range []struct {
		cooldown string
		period   int // minutes per half-wave of the oscillation
	}{
		{"10m", 1}, {"10m", 3}, {"10m", 7}, {"10m", 15}, {"5m", 2}, {"30m", 11},
	} {
		t.Run(fmt.Sprintf("cooldown=%s/period=%d", tc.cooldown, tc.period), func(t *testing.T) {
			e := mustEngine(t, fmt.Sprintf(utilRule, tc.cooldown))
			cd, _ := time.ParseDuration(tc.cooldown)
			log, _ := run(e, 600, func(i int) values {
				v := 0.80
				if (i/tc.period)%2 == 0 {
					v = 0.90
				}
				return values{clusterUtil: v}
			})
			if len(log) == 0 {
				t.Fatal("no firing at all")
			}
			var fired []time.Time
			var last time.Time
			for i, f := range log {
				if i > 0 && f.Time.Sub(last) < cd {
					t.Errorf("state changed %s after the previous change (cooldown %s): %v", f.Time.Sub(last), cd, events(log))
				}
				last = f.Time
				if f.Event == EventFired {
					fired = append(fired, f.Time)
				}
			}
			for i := 1; i < len(fired); i++ {
				if fired[i].Sub(fired[i-1]) < cd {
					t.Errorf("fired twice within %s: %v", cd, events(log))
				}
			}
			if 2*tc.period <= int(cd/time.Minute) && len(fired) != 1 {
				t.Errorf("oscillation faster than the cooldown fired %d times, want 1: %v", len(fired), events(log))
			}
		})
	}
}

func TestDurationMustHoldWithoutBreak(t *testing.T) {
	src := `
scheduling_policies:
  - name: sla
    conditions:
      - metric: p95_latency
        threshold: 150ms
        duration: 5m
    actions:
      - type: reallocate
        resources: [inference_gpus]
        priority: high
`
	for _, tc := range []struct {
		name  string
		p95   []float64 // seconds, one per minute
		wants []string
	}{
		{"held 5m fires at minute 5", []float64{.2, .2, .2, .2, .2, .2, .2}, []string{"5:sla:fired"}},
		{"held 4m does not fire", []float64{.2, .2, .2, .2, .2, .1, .1, .1}, nil},
		{"a break restarts the clock", []float64{.2, .2, .2, .2, .1, .2, .2, .2, .2, .2, .2}, []string{"10:sla:fired"}},
		{"equal to threshold is not above", []float64{.15, .15, .15, .15, .15, .15, .15}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, src)
			log, _ := run(e, len(tc.p95), func(i int) values { return values{clusterP95: tc.p95[i]} })
			if diff := cmp.Diff(tc.wants, events(log)); diff != "" {
				t.Errorf("firings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRevertAfterCooldown(t *testing.T) {
	e := mustEngine(t, fmt.Sprintf(utilRule, "10m"))
	// Hot for minutes 0-19, cool afterwards: fires at 0, condition clears at
	// 20, reverts at 30.
	log, st := run(e, 45, func(i int) values {
		if i < 20 {
			return values{clusterUtil: 0.9}
		}
		return values{clusterUtil: 0.5}
	})
	if diff := cmp.Diff([]string{"0:hot:fired", "30:hot:reverted"}, events(log)); diff != "" {
		t.Errorf("firings (-want +got):\n%s", diff)
	}
	if len(st.Active) != 0 {
		t.Errorf("after revert, active = %v", st.Active)
	}
}

func TestActiveSetWhileHolding(t *testing.T) {
	e := mustEngine(t, `
scheduling_policies:
  - name: ai_training_priority
    conditions:
      - resource_type: gpu_cluster
        utilization_threshold: 85%
    actions:
      - type: scale_down
        target: developer_instances
        min_capacity: 30%
      - type: migrate
        target: batch_jobs
        destination: low_priority_pool
`)
	st := e.Evaluate(t0, values{clusterUtil: 0.80})
	if len(st.Active) != 0 || len(st.Firings) != 0 {
		t.Fatalf("below threshold: %+v", st)
	}
	st = e.Evaluate(t0.Add(time.Minute), values{clusterUtil: 0.91})
	if len(st.Firings) != 1 {
		t.Fatalf("firings = %v", st.Firings)
	}
	f := st.Firings[0]
	if got, want := f.String(), "2026-01-05T12:01:00Z ai_training_priority fired: utilization of cluster = 91% > 85% -> scale_down developer_instances to 30%; migrate batch_jobs to low_priority_pool"; got != want {
		t.Errorf("firing:\n got %s\nwant %s", got, want)
	}
	st = e.Evaluate(t0.Add(2*time.Minute), values{clusterUtil: 0.92})
	type act struct {
		Rule  string
		Index int
		Type  ActionType
		Since time.Time
	}
	var got []act
	for _, a := range st.Active {
		got = append(got, act{a.Rule, a.Index, a.Action.Type, a.Since})
	}
	want := []act{
		{"ai_training_priority", 0, ActionScaleDown, t0.Add(time.Minute)},
		{"ai_training_priority", 1, ActionMigrate, t0.Add(time.Minute)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("active (-want +got):\n%s", diff)
	}
	if st.Active[0].Action.MinCapacity.Value != 0.30 || st.Active[1].Action.Destination.Name != "low_priority_pool" {
		t.Errorf("action parameters lost: %+v", st.Active)
	}
}

func TestHysteresis(t *testing.T) {
	src := `
policies:
  - name: hot
    when: {metric: utilization, above: 85%, hysteresis: 10%}
    then: [{type: drain, target: pool:a}]
    cooldown: 0s
`
	// With cooldown 0, only hysteresis stops flapping: 84% does not clear,
	// 75% does.
	util := []float64{.90, .84, .80, .76, .74, .86, .74}
	e := mustEngine(t, src)
	log, _ := run(e, len(util), func(i int) values { return values{clusterUtil: util[i]} })
	if diff := cmp.Diff([]string{"0:hot:fired", "4:hot:reverted", "5:hot:fired", "6:hot:reverted"}, events(log)); diff != "" {
		t.Errorf("firings (-want +got):\n%s", diff)
	}

	below := `
policies:
  - name: cheap
    when: {metric: spot_price, of: region:eastus, below: $1.00, hysteresis: $0.20}
    then: [{type: notify, message: cheap}]
    cooldown: 0s
`
	q := Query{Metric: MetricSpotPrice, Target: Target{Kind: TargetRegion, Name: "eastus"}}
	price := []float64{1.10, 0.90, 1.10, 1.19, 1.21}
	e = mustEngine(t, below)
	log, _ = run(e, len(price), func(i int) values { return values{q: price[i]} })
	if diff := cmp.Diff([]string{"1:cheap:fired", "4:cheap:reverted"}, events(log)); diff != "" {
		t.Errorf("below: firings (-want +got):\n%s", diff)
	}
}

func TestMaxDurationDryRunDisabled(t *testing.T) {
	src := `
policies:
  - name: capped
    when: {metric: utilization, above: 85%}
    then: [{type: drain, target: pool:a}]
    cooldown: 5m
    max_duration: 30m
  - name: rehearsal
    when: {metric: utilization, above: 85%}
    then: [{type: drain, target: pool:b}]
    dry_run: true
  - name: off
    when: {metric: utilization, above: 85%}
    then: [{type: drain, target: pool:c}]
    enabled: false
`
	e := mustEngine(t, src)
	// Hot for 60 minutes, then cool for 10, then hot again.
	var activeAt20 []string
	log, _ := run(e, 80, func(i int) values {
		if i < 60 || i >= 70 {
			return values{clusterUtil: 0.9}
		}
		return values{clusterUtil: 0.5}
	})
	e2 := mustEngine(t, src)
	_, st := run(e2, 21, func(int) values { return values{clusterUtil: 0.9} })
	for _, a := range st.Active {
		activeAt20 = append(activeAt20, a.Rule)
	}
	want := []string{"0:capped:fired", "0:rehearsal:fired", "30:capped:expired", "65:rehearsal:reverted", "70:capped:fired", "70:rehearsal:fired"}
	if diff := cmp.Diff(want, events(log)); diff != "" {
		t.Errorf("firings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"capped"}, activeAt20); diff != "" {
		t.Errorf("active at minute 20 (-want +got): dry-run and disabled rules must not apply\n%s", diff)
	}
	for _, f := range log {
		if f.Rule == "rehearsal" && !f.DryRun {
			t.Errorf("dry-run firing not marked: %v", f)
		}
	}
}

func TestAllAny(t *testing.T) {
	src := `
policies:
  - name: both
    when:
      all:
        - {metric: utilization, above: 85%}
        - {metric: p95_latency, above: 150ms}
    then: [{type: notify, message: both}]
    cooldown: 0s
  - name: either
    when:
      any:
        - {metric: utilization, above: 85%}
        - {metric: p95_latency, above: 150ms}
    then: [{type: notify, message: either}]
    cooldown: 0s
`
	for _, tc := range []struct {
		util, p95 float64
		want      []string
	}{
		{0.9, 0.2, []string{"both", "either"}},
		{0.9, 0.1, []string{"either"}},
		{0.5, 0.2, []string{"either"}},
		{0.5, 0.1, nil},
	} {
		e := mustEngine(t, src)
		st := e.Evaluate(t0, values{clusterUtil: tc.util, clusterP95: tc.p95})
		var got []string
		for _, a := range st.Active {
			got = append(got, a.Rule)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("util=%v p95=%v (-want +got):\n%s", tc.util, tc.p95, diff)
		}
		// The firing of "either" names only the leaves that were true.
		for _, f := range st.Firings {
			if f.Rule != "either" {
				continue
			}
			for _, o := range f.Values {
				if (o.Metric == MetricUtilization && tc.util < 0.85) || (o.Metric == MetricP95Latency && tc.p95 < 0.15) {
					t.Errorf("any: firing cites a false leaf: %v", o)
				}
			}
		}
	}
}

func TestCELCondition(t *testing.T) {
	src := `
policies:
  - name: expr
    when:
      expr: "utilization() > 0.85 && p95_latency('service:chat') > duration('150ms') && now.getHours() >= 12"
      for: 2m
    then: [{type: notify, message: x}]
    cooldown: 0s
`
	chat := Query{Metric: MetricP95Latency, Target: Target{Kind: TargetService, Name: "chat"}}
	e := mustEngine(t, src)
	lat := []float64{0.2, 0.2, 0.2, 0.1, 0.2}
	log, _ := run(e, len(lat), func(i int) values { return values{clusterUtil: 0.9, chat: lat[i]} })
	if diff := cmp.Diff([]string{"2:expr:fired", "3:expr:reverted"}, events(log)); diff != "" {
		t.Errorf("firings (-want +got):\n%s", diff)
	}
	if len(log) > 0 {
		got := fmt.Sprint(log[0].Values)
		if !strings.Contains(got, "p95_latency of service:chat = 200ms") || !strings.Contains(got, "utilization of cluster = 90%") {
			t.Errorf("firing values = %s", got)
		}
	}
	// Missing data makes the expression false and is reported.
	e = mustEngine(t, src)
	st := e.Evaluate(t0, values{clusterUtil: 0.9})
	if len(st.Active) != 0 || len(st.Errors) != 1 || !errors.Is(st.Errors[0], ErrExpr) {
		t.Errorf("missing metric in expr: active %v errors %v", st.Active, st.Errors)
	}
}

func TestMissingMetricAndTimeBackwards(t *testing.T) {
	e := mustEngine(t, fmt.Sprintf(utilRule, "5m"))
	st := e.Evaluate(t0, values{})
	if len(st.Errors) != 1 || !errors.Is(st.Errors[0], ErrNoMetric) {
		t.Errorf("errors = %v, want one ErrNoMetric", st.Errors)
	}
	st = e.Evaluate(t0.Add(-time.Minute), values{clusterUtil: 0.9})
	if len(st.Errors) != 1 || !errors.Is(st.Errors[0], ErrTimeBackwards) {
		t.Errorf("errors = %v, want ErrTimeBackwards", st.Errors)
	}
	if len(st.Firings) != 1 || !st.Firings[0].Time.Equal(t0) {
		t.Errorf("firing should be at the previous time: %v", st.Firings)
	}
}

// TestDeterministic runs the same random metric sequence through two
// engines and compares the logs.
func TestDeterministic(t *testing.T) {
	src := mustReadFile(t, "../../examples/policies/native.yaml")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	series := func(seed uint64) func(int) values {
		x := seed
		next := func() float64 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			return float64(x%1000) / 1000
		}
		return func(int) values {
			return values{
				clusterUtil: next(),
				{Metric: MetricP95Latency, Target: Target{Kind: TargetService, Name: "coding-assistant"}}: next() * 0.3,
				{Metric: MetricP99Latency, Target: Target{Kind: TargetService, Name: "coding-assistant"}}: next() * 0.5,
				{Metric: MetricCapacityFailureRate, Target: Target{Kind: TargetRegion, Name: "eastus"}}:   next() * 0.05,
				{Metric: MetricPendingGPUs, Target: Target{Kind: TargetRegion, Name: "eastus"}}:           math.Floor(next() * 512),
				{Metric: MetricQueueWait, Target: Target{Kind: TargetTenant, Name: "research"}}:           next() * 3600,
			}
		}
	}
	a, _ := run(mustEngine(t, src), 2000, series(seed|1))
	b, _ := run(mustEngine(t, src), 2000, series(seed|1))
	if len(a) == 0 {
		t.Fatal("no firings at all")
	}
	if diff := cmp.Diff(fmt.Sprint(a), fmt.Sprint(b)); diff != "" {
		t.Errorf("two runs differ (seed %d):\n%s", seed, diff)
	}
}

// TestOperatorsRulesOverWindows drives the ARCHITECTURE.md rules from raw
// samples: per-second latencies and utilization into Windows, a policy tick
// every minute.
func TestOperatorsRulesOverWindows(t *testing.T) {
	p := mustLoad(t, mustReadFile(t, "../../examples/policies/operators.yaml"))
	if err := p.Resolve(known); err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(p)
	if err != nil {
		t.Fatal(err)
	}
	ws := NewWindows(5 * time.Minute)
	var log []Firing
	var last Step
	for m := 0; m < 40; m++ {
		for s := 0; s < 60; s++ {
			at := t0.Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
			lat := 0.080 // healthy until minute 10, then 20% of requests take 300ms
			if m >= 10 && m < 25 && s%5 == 0 {
				lat = 0.300
			}
			ws.Observe("latency", Cluster, at, lat)
			util := 0.70
			if m >= 20 {
				util = 0.90
			}
			ws.Observe("utilization", Cluster, at, util)
		}
		now := t0.Add(time.Duration(m+1) * time.Minute)
		ws.Advance(now)
		last = e.Evaluate(now, ws)
		log = append(log, last.Firings...)
	}
	// Ticks are at the end of each minute. At 11 the window (6m, 11m] holds
	// 12 slow samples of 300 (4%): p95 is still 80ms; at 12 it holds 8% and
	// p95 is 300ms. Held 5m: fired at 17. The last slow samples are in
	// minute 24; at 29 they are 4% again, so the condition clears at 29 and
	// the rule reverts a cooldown later, at 34. Utilization's 5m mean passes
	// 85% at 24 (four minutes at 90%, one at 70%: 86%).
	want := []string{"17:customer_sla_protection:fired", "24:ai_training_priority:fired", "34:customer_sla_protection:reverted"}
	if diff := cmp.Diff(want, events(log)); diff != "" {
		t.Errorf("firings (-want +got):\n%s", diff)
	}
	if len(log) > 0 {
		o := log[0].Values[0]
		if o.Metric != MetricP95Latency || o.Value != 0.300 || o.Held != 5*time.Minute {
			t.Errorf("firing values = %v", log[0].Values)
		}
	}
	if len(last.Active) != 2 || last.Active[0].Action.Type != ActionScaleDown || last.Active[1].Action.Target != (Target{TargetClass, "batch_jobs"}) {
		t.Errorf("active at the end = %+v", last.Active)
	}
}
