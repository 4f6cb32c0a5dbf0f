package sim

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// elasticServiceScenario: an elastic coding-assistant service (min 2, max
// 28 replicas of one H100) in eastus, with its users' peak at 02:00, on 4
// nodes (32 GPUs); a low-priority preemptible batch job of another tenant
// on one node the whole run; and at 2 h a job of prod claiming two nodes
// of its guarantee for an hour.
const elasticServiceScenario = `name: elastic-service
duration: 5h
cycle: 1m
fleet:
  regions:
    - name: eastus
      zones:
        - name: z1
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 4}]
tenants:
  - name: inference
    quota: [{flavor: H100-80G, region: eastus, guaranteed: 4, limit: 32}]
  - name: research
    quota: [{flavor: H100-80G, region: eastus, limit: 32}]
  - name: prod
    quota: [{flavor: H100-80G, region: eastus, guaranteed: 16, limit: 16}]
generators:
  - {name: batch, kind: batch, tenant: research, priority: low, preemptible: true, flavors: [H100-80G], regions: [eastus],
     count: 1, at: 0s, sizes: [{gpus: 8, replicas: 1, weight: 1}], runtime_min: 10h, runtime_max: 10h}
  - {name: claim, tenant: prod, flavors: [H100-80G], regions: [eastus], count: 1, at: 2h,
     sizes: [{gpus: 8, replicas: 2, weight: 1}], runtime_min: 1h, runtime_max: 1h}
services:
  - name: chat
    tenant: inference
    priority: normal
    flavor: H100-80G
    regions: [eastus]
    users: [{region: eastus, peak_hour: 2}]
    slo_ttft_p99: 200ms
    context_cache_hit: 0.95
    min_replicas: 2
    max_replicas: 28
    scale: SCALE
    elastic: true
`

// serviceStep is one step of an elastic service's region: the replicas
// its autoscaler wants (the workload's max) and those it runs, after the
// step's cycle.
type serviceStep struct {
	at         time.Duration
	want, size int
}

func runElasticService(t *testing.T, src string) (*StrategyResult, []serviceStep, *Sim) {
	t.Helper()
	s, _ := scenarioSim(t, "elastic-service.yaml", src)
	var steps []serviceStep
	s.afterStep = func() {
		if s.services[0].elastic == nil || s.services[0].elastic[0] == nil {
			return // not elastic, or before its first step
		}
		j := s.services[0].elastic[0]
		st := serviceStep{at: s.now.Sub(s.sc.Start), want: j.w.Elastic.Max}
		if j.w.Running != nil {
			st.size = len(j.w.Running.Replicas)
		}
		steps = append(steps, st)
	}
	return s.Run(), steps, s
}

// TestElasticService (issue 18 point 3): an elastic service's region is
// one elastic workload that (a) grows into idle capacity to what its
// autoscaler wants, (b) when prod reclaims its guarantee gives growth back
// toward its min while the borrowing batch job keeps running (nothing is
// preempted), and (c) the same seed gives the same results.
func TestElasticService(t *testing.T) {
	src := strings.Replace(elasticServiceScenario, "SCALE", "1", 1)
	r, steps, s := runElasticService(t, src)
	if len(steps) == 0 {
		t.Fatal("no elastic workload")
	}
	// (a) Before the claim it runs what its autoscaler wants, as far as
	// idle capacity allows (the 24 GPUs the batch job leaves), once a
	// cycle has grown it; mostly that is all it wants.
	before, fits := 0, 0
	for _, st := range steps {
		if st.at < 10*time.Minute || st.at >= 2*time.Hour {
			continue
		}
		if st.size != min(st.want, 24) {
			t.Errorf("at %v: %d replicas, its autoscaler wants %d (%d fit)", st.at, st.size, st.want, min(st.want, 24))
		}
		if st.want > 2 && st.want < 24 {
			fits++
		}
		before = max(before, st.size)
	}
	if fits < 60 {
		t.Fatalf("the autoscaler wanted more than min and less than is idle in %d steps: the test needs growth to what it wants", fits)
	}
	// (b) During the claim: prod's 16 GPUs, the batch job's 8, the rest
	// (at least min) the service's; nothing preempted.
	during := 0
	for _, st := range steps {
		if st.at >= 2*time.Hour+time.Minute && st.at < 3*time.Hour {
			if st.size < 2 || st.size > 8 {
				t.Errorf("at %v, during the claim: %d replicas, want 2 to 8", st.at, st.size)
			}
			during = max(during, st.size)
		}
	}
	t.Logf("before the claim up to %d replicas, during it up to %d", before, during)
	if before+8+16 <= 32 {
		t.Fatalf("up to %d replicas before the claim: the claim fits into idle capacity, the test needs a reclaim", before)
	}
	if r.Preemptions != 0 {
		t.Errorf("%d preemptions: the claim should have taken the service's growth back", r.Preemptions)
	}
	for _, j := range s.jobs {
		if j.class == "batch" && (j.preempts != 0 || j.w.Running == nil) {
			t.Errorf("the batch job: %d preemptions, running %v", j.preempts, j.w.Running != nil)
		}
	}
	// After the claim it grows back.
	if last := steps[len(steps)-1]; last.size != last.want {
		t.Errorf("at the end: %d replicas, its autoscaler wants %d", last.size, last.want)
	}
	// (c) The same seed, the same results.
	a, _ := json.Marshal(r)
	again, _, _ := runElasticService(t, src)
	if b, _ := json.Marshal(again); !bytes.Equal(a, b) {
		t.Errorf("same scenario and seed, different results")
	}
	// Without elastic the replicas are 1-replica workloads, and the
	// claim preempts some of them.
	fixed, _, _ := runElasticService(t, strings.Replace(src, "    elastic: true\n", "", 1))
	if fixed.Preemptions == 0 {
		t.Errorf("without elastic: no preemptions, want the claim to preempt replicas")
	}
}

// TestElasticServiceValidation: an elastic service needs max_replicas of
// at least max(1, min_replicas); the problem names the field and line.
func TestElasticServiceValidation(t *testing.T) {
	src := strings.Replace(elasticServiceScenario, "SCALE", "1", 1)
	for _, c := range []struct{ from, to, field string }{
		{"    max_replicas: 28\n", "", "services[0].max_replicas"},
		{"max_replicas: 28", "max_replicas: 1", "services[0].max_replicas"},
		{"min_replicas: 2", "min_replicas: -1", "services[0].min_replicas"},
	} {
		bad := strings.Replace(src, c.from, c.to, 1)
		_, err := ParseScenario("s.yaml", []byte(bad))
		if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), "s.yaml:") {
			t.Errorf("%q → %q: %v, want a problem naming %s and its line", c.from, c.to, err, c.field)
		}
	}
	if _, err := ParseScenario("s.yaml", []byte(src)); err != nil {
		t.Errorf("the valid scenario: %v", err)
	}
	// min_replicas 0 is min 1.
	if _, err := ParseScenario("s.yaml", []byte(strings.Replace(src, "min_replicas: 2", "min_replicas: 0", 1))); err != nil {
		t.Errorf("min_replicas 0: %v", err)
	}
}

// TestElasticServingExample: examples/scenarios/elastic-serving.yaml runs
// as its comment says: the service is one workload, never preempted (it
// shrinks instead), and has grown above its min.
func TestElasticServingExample(t *testing.T) {
	data, err := os.ReadFile("../../examples/scenarios/elastic-serving.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, steps, _ := runElasticService(t, string(data))
	chat := r.Classes.Get("chat")
	if chat == nil {
		t.Fatal("no chat class")
	}
	if chat.Requests != 1 || chat.Preemptions != 0 {
		t.Errorf("chat: %d workloads, %d preemptions; want 1 and 0", chat.Requests, chat.Preemptions)
	}
	most, shrunk := 0, false
	for i, st := range steps {
		most = max(most, st.size)
		if i > 0 && st.size < steps[i-1].size && st.size < st.want {
			shrunk = true // gave growth back that its autoscaler still wanted: a reclaim
		}
	}
	if most <= 2 || !shrunk {
		t.Errorf("chat grew to at most %d replicas, shrunk for a claim %v: want growth above min 2 and a reclaim", most, shrunk)
	}
}

// TestScaleServiceBounds: Scale multiplies a service's replica bounds with
// its load, the max never below the scaled min (a min scaled past an
// unscaled max made an elastic service's bounds invalid at --scale 10).
func TestScaleServiceBounds(t *testing.T) {
	data, err := os.ReadFile("../../examples/scenarios/elastic-serving.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ParseScenario("elastic-serving.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []float64{0.1, 1, 10} {
		c := sc.Scale(f)
		for i, sv := range c.Services {
			orig := sc.Services[i]
			if orig.MaxReplicas > 0 && (sv.MaxReplicas < sv.MinReplicas || sv.MaxReplicas != max(sv.MinReplicas, int(math.Round(float64(orig.MaxReplicas)*f)))) {
				t.Errorf("scale %g: %s: replicas %d..%d from %d..%d", f, sv.Name, sv.MinReplicas, sv.MaxReplicas, orig.MinReplicas, orig.MaxReplicas)
			}
		}
	}
}
