package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/examples"
	"github.com/arbiterhq/arbiter/internal/policy"
)

// The coding assistant's latency in serving terms, over its requests: time
// to first token near the mission's 50 ms when uncontended (its median
// step), below end-to-end time; TPOT in single-digit to tens of ms; and the
// policies' p95_latency reads this step's TTFT p95.
func TestInferenceLatency(t *testing.T) {
	r := runShort(t, "hybrid", 1, 1)
	l, ok := r.Inference["coding-assistant"]
	if !ok {
		t.Fatalf("no inference entry: %+v", r.Inference)
	}
	t.Logf("%+v", l)
	if l.TTFTMs.P50 < 25 || l.TTFTMs.P50 > 60 || l.TTFTMs.P95 < l.TTFTMs.P50 || l.TTFTMs.P99 < l.TTFTMs.P95 {
		t.Errorf("TTFT %+v: want a median of 25-60 ms, ordered percentiles", l.TTFTMs)
	}
	if l.E2EMs.P50 <= l.TTFTMs.P50 || l.E2EMs.P99 < l.TTFTMs.P99 {
		t.Errorf("end-to-end %+v not above TTFT %+v", l.E2EMs, l.TTFTMs)
	}
	if l.TPOTMs.P50 < 5 || l.TPOTMs.P99 > 18.1 {
		t.Errorf("TPOT %+v: want between one stream's and a full batch's H100 decode step", l.TPOTMs)
	}
	if l.SLOTTFTP99Ms != 200 || l.Requests <= 0 {
		t.Errorf("SLO %v ms, %v requests", l.SLOTTFTP99Ms, l.Requests)
	}
}

func TestPolicyLatencyIsTTFT(t *testing.T) {
	sc, err := LoadScenario("")
	if err != nil {
		t.Fatal(err)
	}
	sc.Generators = nil
	s := newSimFor(t, sc, "hybrid", 3*time.Hour)
	checked, down := 0, 0
	s.afterStep = func() {
		var m metricValues
		s.measure(&m)
		st := s.services[0]
		q := policy.Query{Metric: policy.MetricP95Latency, Target: policy.Target{Kind: policy.TargetService, Name: st.spec.Name}}
		v, ok := m.Value(q)
		if want := min(st.ttft[1], maxLatency).Seconds(); !ok || v != want {
			t.Fatalf("p95_latency %v, TTFT p95 %v", v, want)
		}
		if st.ttft[1] > 0 && st.ttft[1] < time.Second {
			checked++
		}
		// With no replica serving, users get no first token: the step's
		// p99 is unbounded (read as maxLatency), not 0.
		if st.running[0]+st.running[1] == 0 && st.arrivals > 0 {
			down++
			if v < maxLatency.Seconds() || st.withinSLO != 0 {
				t.Errorf("%v: no replica, yet p95_latency %v s and %v within the SLO", s.now, v, st.withinSLO)
			}
		}
	}
	s.Run()
	if checked == 0 || down == 0 {
		t.Fatalf("%d steps with a TTFT p95 under a second, %d with no replica: want both", checked, down)
	}
}

func TestServiceSLOErrors(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{"slo_ttft_p99: 200ms", "slo_p99: 8s", "services[0].slo_p99: slo_p99 (end-to-end) is no longer read: the SLO bounds the time to first token, write slo_ttft_p99"},
		{"slo_ttft_p99: 200ms", "slo_ttft_p99: 0s", "services[0].slo_ttft_p99: a service needs a time-to-first-token p99 SLO"},
		{"context_cache_hit: 0.95", "context_cache_hit: 1", "services[0].context_cache_hit: context_cache_hit is a share in [0, 1)"},
	} {
		y := strings.Replace(string(ContentionYAML()), c.from, c.to, 1)
		_, err := ParseScenario("s.yaml", []byte(y))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.to, err, c.want)
		}
	}
}

func newSimFor(t *testing.T, sc *Scenario, strategy string, d time.Duration) *Sim {
	t.Helper()
	st, err := LoadStrategy(examples.FS, "strategies/"+strategy)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sc, st, Options{Seed: 1, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
