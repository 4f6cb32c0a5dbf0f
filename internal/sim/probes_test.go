package sim

import (
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
)

// probeRun runs a day of the contention scenario with one probe of the
// coding assistant (timeout as given) and a notify rule on its
// success_ratio, returning the run, the windowed success ratio of each
// step after the first 10 minutes, and the steps whose service's median
// TTFT passed 10 s.
func probeRun(t *testing.T, timeout string) (*Sim, []float64, []time.Time) {
	t.Helper()
	data := string(ContentionYAML()) + `
probes:
  - name: coding-assistant
    url: https://assist.example.com/healthz
    interval: 10s
    timeout: ` + timeout + `
`
	sc, err := ParseScenario("contention+probe.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{
		"s/p.yaml": {Data: []byte("name: p\npolicies: p-policy.yaml\n")},
		"s/p-policy.yaml": {Data: []byte(`policies:
  - name: assistant_failing
    when: {metric: success_ratio, of: service:coding-assistant, below: 50%, for: 2m}
    then: [{type: notify, message: the coding assistant's probe fails}]
`)},
	}
	st, err := LoadStrategy(fsys, "s/p")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sc, st, Options{Seed: 3, Duration: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var ratios []float64
	var overloaded []time.Time
	s.afterStep = func() {
		if s.now.Sub(s.sc.Start) < 10*time.Minute {
			return
		}
		svc := policy.Target{Kind: policy.TargetService, Name: "coding-assistant"}
		w := s.pol.windows.Window("latency", svc)
		// 5 minutes of attempts every 10 s: 30 in the window.
		if w == nil || w.Len() != 30 {
			t.Fatalf("%v: %v latency samples of the probe in the window, want 30", s.now, w)
		}
		if s.services[0].ttft[0] > 10*time.Second {
			overloaded = append(overloaded, s.now)
		}
		r, ok := s.pol.windows.Value(policy.Query{Metric: policy.MetricSuccessRatio, Target: svc})
		if !ok {
			t.Fatalf("%v: no success ratio", s.now)
		}
		ratios = append(ratios, r)
	}
	s.Run()
	if len(ratios) == 0 {
		t.Fatal("no step checked")
	}
	return s, ratios, overloaded
}

// TestSimProbes: a probe in a scenario makes attempts every interval whose
// latency is the service's TTFT as its users see it. With a generous
// timeout they succeed but in the minutes the model's service is
// overloaded (the scenario's morning burst leaves requests unanswered for
// a few minutes, and the rule fires then); with a timeout below any TTFT
// every attempt fails and the rule fires. The same seed gives the same
// firings.
func TestSimProbes(t *testing.T) {
	ok, ratios, overloaded := probeRun(t, "10s")
	full := 0
	for _, r := range ratios {
		if r == 1 {
			full++
		}
	}
	if share := float64(full) / float64(len(ratios)); share < 0.9 {
		t.Errorf("with a 10s timeout only %.0f%% of steps had every attempt in the window succeed", 100*share)
	}
	for _, f := range ok.Firings() {
		if f.Event != policy.EventFired {
			continue
		}
		// Below 50% for 2 minutes of a 5-minute window: the model's own
		// median TTFT passed the timeout within those minutes.
		near := false
		for _, at := range overloaded {
			near = near || (!at.After(f.Time) && f.Time.Sub(at) <= 7*time.Minute)
		}
		if !near {
			t.Errorf("%v: fired with the service's median TTFT under the timeout for 7 minutes", f.Time)
		}
	}
	svc := policy.Target{Kind: policy.TargetService, Name: "coding-assistant"}
	v, has := ok.pol.windows.Value(policy.Query{Metric: policy.MetricP95Latency, Target: svc})
	model := ok.pol.values.svcLatency["coding-assistant"][1]
	if !has || v <= 0 || v > 10 {
		t.Errorf("probe p95 %v (%v), model p95 %v", v, has, model)
	}
	bad, badRatios, _ := probeRun(t, "10ms")
	for _, r := range badRatios {
		if r != 0 {
			t.Fatalf("success ratio %v with a 10ms timeout", r)
		}
	}
	fs := bad.Firings()
	if len(fs) == 0 || fs[0].Rule != "assistant_failing" || fs[0].Event != policy.EventFired {
		t.Fatalf("with a 10ms timeout: firings %v", fs)
	}
	again, _, _ := probeRun(t, "10ms")
	if !reflect.DeepEqual(firingTimes(fs), firingTimes(again.Firings())) {
		t.Error("the same seed gave other firings")
	}
}

func firingTimes(fs []Firing) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Time.String()+" "+f.Rule+" "+f.Event.String())
	}
	return out
}

// TestSimProbeTargets: in a scenario a probe must measure one of its
// services.
func TestSimProbeTargets(t *testing.T) {
	data := string(ContentionYAML()) + `
probes:
  - name: nothing-here
    url: https://x.example.com/
`
	_, err := ParseScenario("c.yaml", []byte(data))
	if err == nil || !strings.Contains(err.Error(), "probes[0].target") {
		t.Fatalf("err = %v", err)
	}
}
