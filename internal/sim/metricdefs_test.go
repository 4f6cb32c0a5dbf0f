package sim

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var updateMetricsDoc = flag.Bool("update-metrics-doc", false, "rewrite docs/metrics.md from the metric table")

const metricsDocPath = "../../docs/metrics.md"

// TestMetricsDoc: docs/metrics.md is generated from the metric table and
// must be current (go generate ./internal/sim rewrites it).
func TestMetricsDoc(t *testing.T) {
	want := MetricsMarkdown()
	if *updateMetricsDoc {
		if err := os.WriteFile(metricsDocPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(metricsDocPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is stale: run go generate ./internal/sim", metricsDocPath)
	}
}

// keysOf returns the keys of a JSON object.
func keysOf(t *testing.T, data []byte) []string {
	t.Helper()
	kvs, err := objectFields(data)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range kvs {
		out = append(out, f.k)
	}
	return out
}

// TestEveryMetricDefined: every key of a strategy's and a class's object
// in results.json has exactly one definition, and every definition is a
// key: the table is the only place a metric is defined.
func TestEveryMetricDefined(t *testing.T) {
	r := runShort(t, "hybrid", 1, 1)
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var defs, classDefs []string
	for _, d := range Metrics {
		defs = append(defs, d.Key)
		if d.Definition == "" || d.Label == "" || d.Covers == "" {
			t.Errorf("%s: needs a label, a definition and what it covers", d.Key)
		}
		if d.Headline && d.Value == nil {
			t.Errorf("%s: a headline metric needs a Value", d.Key)
		}
	}
	for _, d := range ClassMetrics {
		classDefs = append(classDefs, d.Key)
		if d.Definition == "" || d.Label == "" {
			t.Errorf("class %s: needs a label and a definition", d.Key)
		}
	}
	check := func(what string, keys, defs []string) {
		t.Helper()
		for _, k := range keys {
			if n := count(defs, k); n != 1 {
				t.Errorf("%s key %q has %d definitions", what, k, n)
			}
		}
		for _, k := range defs {
			// A dotted key (inference.SERVICE.ttft_ms) defines a value
			// inside an object key that has its own definition.
			if top, _, dotted := strings.Cut(k, "."); dotted && slices.Contains(keys, top) {
				continue
			}
			if !slices.Contains(keys, k) {
				t.Errorf("%s definition %q is no results.json key", what, k)
			}
		}
	}
	check("strategy", jsonKeys(reflect.TypeFor[StrategyResult]()), defs)
	check("class", jsonKeys(reflect.TypeFor[ClassResult]()), classDefs)
	// What is written is what is defined.
	for _, k := range keysOf(t, data) {
		if !slices.Contains(defs, k) {
			t.Errorf("results.json writes %q, which has no definition", k)
		}
	}
	c := r.Classes.Get("enterprise_sla_vms")
	if c == nil {
		t.Fatalf("no class enterprise_sla_vms in %v", r.Classes)
	}
	cdata, _ := json.Marshal(c)
	for _, k := range keysOf(t, cdata) {
		if !slices.Contains(classDefs, k) {
			t.Errorf("a class in results.json has %q, which has no definition", k)
		}
	}
}

// jsonKeys returns the JSON keys of a struct's exported fields.
func jsonKeys(typ reflect.Type) []string {
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// TestClasses: results carry each class of the scenario's classes section
// with requests, capacity failures by reason, time to capacity, preemptions
// and GPU-hours, and the classes add up to the run's totals. Every capacity
// failure has a reason: the dynamic strategy's caps hold dev/test VMs back
// before the scheduler sees them, and those failures had an empty reason.
func TestClasses(t *testing.T) {
	r := runShort(t, "dynamic", 3, 1)
	data, _ := json.Marshal(r)
	var raw struct {
		Classes map[string]map[string]any `json:"classes"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"enterprise_sla_vms", "reservations", "inference", "internal_training", "dev_test", "batch", "spot", "customer_inference_vms"} {
		c, ok := raw.Classes[name]
		if !ok {
			t.Errorf("results.json classes lack %s: %v", name, raw.Classes)
			continue
		}
		for _, k := range []string{"requests", "capacity_failures", "capacity_failures_by_reason", "time_to_capacity_p50_s", "time_to_capacity_p95_s", "preemptions", "gpu_hours"} {
			if _, ok := c[k]; !ok {
				t.Errorf("class %s lacks %s", name, k)
			}
		}
	}
	var requests, failures, preemptions, customerFailures, customerRequests int
	var gpuH float64
	for _, c := range r.Classes {
		requests += c.Requests
		failures += c.CapacityFailures
		preemptions += c.Preemptions
		gpuH += c.GPUHours
		if slices.Contains([]string{"enterprise_sla_vms", "reservations", "customer_inference_vms", "dev_test"}, c.Name) {
			customerFailures += c.CapacityFailures
			customerRequests += c.Requests
		}
		byReason := 0
		for reason, n := range c.CapacityFailuresByReason {
			if reason == "" {
				t.Errorf("class %s: %d capacity failures without a reason", c.Name, n)
			}
			byReason += n
		}
		if byReason != c.CapacityFailures {
			t.Errorf("class %s: %d failures by reason, %d failures", c.Name, byReason, c.CapacityFailures)
		}
		if c.Placed > 0 && (c.TimeToCapacityP50S > c.TimeToCapacityP95S || c.TimeToCapacityP50S < 0) {
			t.Errorf("class %s: p50 %v s, p95 %v s", c.Name, c.TimeToCapacityP50S, c.TimeToCapacityP95S)
		}
	}
	if requests != r.JobsSubmitted || preemptions != r.Preemptions {
		t.Errorf("classes: %d requests, %d preemptions; run: %d submitted, %d preemptions", requests, preemptions, r.JobsSubmitted, r.Preemptions)
	}
	if customerRequests != r.CustomerRequests || customerFailures != r.CustomerCapacityFailures {
		t.Errorf("customer classes: %d/%d failures; run: %d/%d", customerFailures, customerRequests, r.CustomerCapacityFailures, r.CustomerRequests)
	}
	if math.Abs(gpuH-r.AllocatedGPUHours) > 1 {
		t.Errorf("classes hold %.1f GPU-h, the run allocated %.1f", gpuH, r.AllocatedGPUHours)
	}
	if dt := r.Classes.Get("dev_test"); dt == nil {
		t.Error("no class dev_test")
	} else if dt.CapacityFailuresByReason["PolicyHeld"] == 0 {
		t.Errorf("dynamic's caps hold dev/test back; failures by reason: %v", dt.CapacityFailuresByReason)
	}
	if failures == 0 {
		t.Error("no capacity failures: the test checks nothing")
	}
}

// noServices is a scenario without inference services, reservations or
// training: the metrics about them do not apply.
const noServices = `name: batch-only
duration: 6h
fleet:
  regions:
    - name: eastus
      zones:
        - name: z1
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 2}]
tenants:
  - name: batch
generators:
  - {name: jobs, kind: batch, tenant: batch, customer: true, priority: low, flavors: [A100-80G], regions: [eastus],
     rate_per_hour: 4, sizes: [{gpus: 8, replicas: 1, weight: 1}], runtime_min: 1h, runtime_max: 2h}
`

// TestNotApplicableIsNA: a scenario without services, reservations or
// training shows n/a for their metrics in the table, null in results.json
// and n/a in the report (it showed "SLO 100%").
func TestNotApplicableIsNA(t *testing.T) {
	s, sc := scenarioSim(t, "batch-only.yaml", noServices)
	res := &Results{Scenario: sc.Name, Seed: 1, Strategies: []*StrategyResult{s.Run(), nil}}
	res.Strategies[1] = res.Strategies[0]
	na := []string{"inference_slo_attainment", "inference_p99_ms", "reservation_honour_rate", "training_gpu_hours", "training_jct_p50_h",
		"training_jobs", "customer_capacity_failure_rate", "customer_time_to_capacity_p95_s"}
	cells := map[string]string{}
	for _, row := range res.Rows(true) {
		cells[row.Label] = row.Cells[0]
	}
	for _, d := range Metrics {
		if slices.Contains(na, d.Key) && d.Headline && cells[d.Label] != NA {
			t.Errorf("table: %s = %q, want n/a", d.Label, cells[d.Label])
		}
	}
	if got := cells["GPU utilization"]; got == NA {
		t.Error("GPU utilization applies to every run")
	}
	var j map[string]any
	data, _ := json.Marshal(res.Strategies[0])
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	for _, k := range na {
		if v, ok := j[k]; !ok || v != nil {
			t.Errorf("results.json %s = %v (present %v), want null", k, v, ok)
		}
	}
	if j["gpu_utilization"] == nil {
		t.Error("results.json gpu_utilization is null")
	}
	var b strings.Builder
	res.writeTable(&b)
	if !strings.Contains(b.String(), "<tr><td>inference SLO attainment (TTFT) <small title=\"higher is better\">↑</small></td><td>n/a</td>") {
		t.Errorf("report's SLO row is not n/a:\n%s", b.String())
	}
}

// TestCSVColumnsCarryData: the CSV has a GPU column only for tenants that
// own work (the tenant tree's parents hold no GPUs directly: their columns
// were always zero), and its header is SeriesColumns'.
func TestCSVColumnsCarryData(t *testing.T) {
	r := runShort(t, "static", 1, 1)
	var b bytes.Buffer
	if err := r.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := LoadScenario("")
	owners := sc.workOwners()
	for i, h := range rows[0] {
		if !defined(h) {
			t.Errorf("CSV column %q has no definition in SeriesColumns", h)
		}
		tenant, ok := strings.CutPrefix(h, "gpus_")
		if !ok {
			continue
		}
		if !owners[tenant] {
			t.Errorf("CSV column %s: tenant %s owns no work", h, tenant)
		}
		used := false
		for _, row := range rows[1:] {
			used = used || row[i] != "0"
		}
		if !used {
			t.Errorf("CSV column %s is always zero", h)
		}
	}
}

func defined(col string) bool {
	for _, d := range SeriesColumns {
		if d.Names == nil && d.Column == col || d.Names != nil && strings.HasPrefix(col, d.Column) {
			return true
		}
	}
	return false
}

// TestClassesSection: the scenario's classes section is checked, each
// problem naming its field.
func TestClassesSection(t *testing.T) {
	base := "name: x\nduration: 1h\ngenerators: [{name: g, class: web, sizes: [{gpus: 1, replicas: 1, weight: 1}], rate_per_hour: 1, runtime_min: 1m, runtime_max: 2m, flavors: [T4], regions: [eastus]}]\n"
	for _, c := range []struct{ classes, want string }{
		{"classes: [{name: a, promise: always, match: [web]}]", `classes[0].promise: unknown promise "always"`},
		{"classes: [{name: a, match: [web]}, {name: a, match: [x]}]", `classes[1].name: class "a" is defined twice`},
		{"classes: [{name: a, match: [web]}, {name: b, match: [web]}]", `classes[1].match: label "web" is already in class "a"`},
		{"classes: [{name: a}]", "classes[0].match: list the workload class labels"},
		{"classes: [{match: [web]}]", "classes[0].name: a class needs a name"},
		{"classes: [{name: \"A B\", match: [web]}]", "classes[0].name: \"A B\": use at most 64 lower-case"},
		{"classes: [{name: web, match: [other]}]", `workload class "web" matches no class but a class has its name`},
		{"classes: [{name: " + strings.Repeat("a", 65) + ", match: [web]}]", "classes[0].name:"},
		{"classes: [{name: a, display: \"a\\tb\", match: [web]}]", "classes[0].display: at most 128 characters, no control characters"},
		{"classes: [{name: a, match: [" + strings.Repeat("x,", 300) + "web]}]", "classes[0].match: 301 labels: at most 256"},
	} {
		_, err := ParseScenario("s.yaml", []byte(base+c.classes+"\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.classes, err, c.want)
		}
	}
	sc, err := ParseScenario("s.yaml", []byte(base+"classes: [{name: web_sla, display: Web, promise: sla, match: [web]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	b := newClassBook(sc)
	if c := b.of("web"); c.Name != "web_sla" || c.Display != "Web" || !c.Promise.Promised() {
		t.Errorf("web is in %+v", c)
	}
	if c := b.of("other"); c.Name != "other" || c.Promise.Promised() {
		t.Errorf("an unlisted label is its own class without a promise: %+v", c)
	}
	if c := b.of("web_sla"); c.Name != "web_sla_unlisted" {
		t.Errorf("an unlisted label named as a class gets its own: %+v", c)
	}
}

// TestClassResultsJSON: classes are an object keyed by name, in scenario
// order, and read back in that order.
func TestClassResultsJSON(t *testing.T) {
	cs := ClassResults{{Name: "z", Display: "Z", Promise: PromiseSLA, Requests: 2, Placed: 1, TimeToCapacityP95S: 60}, {Name: "a", Display: "A", Promise: PromiseNone}}
	data, err := json.Marshal(cs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), `{"z":{"display":"Z"`) || !strings.Contains(string(data), `"a":{`) {
		t.Errorf("classes JSON: %s", data)
	}
	if !strings.Contains(string(data), `"time_to_capacity_p95_s":60`) || !strings.Contains(string(data), `"a":{"display":"A","promise":"none","labels":null,"kinds":null,"requests":0,"requests_with_patience":0,"capacity_failures":null`) {
		t.Errorf("n/a values are not null, applicable ones not numbers: %s", data)
	}
	var back ClassResults
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0].Name != "z" || back[1].Name != "a" || back[0].Requests != 2 {
		t.Errorf("read back %+v", back)
	}
	if err := json.Unmarshal([]byte(`[1]`), &back); err == nil {
		t.Error("an array read as classes")
	}
}

func TestBestOf(t *testing.T) {
	for _, c := range []struct {
		vals   []float64
		oks    []bool
		better int
		want   []bool
	}{
		{[]float64{1, 2, 3}, []bool{true, true, true}, +1, []bool{false, false, true}},
		{[]float64{1, 2, 3}, []bool{true, true, true}, -1, []bool{true, false, false}},
		{[]float64{1, 2, 3}, []bool{true, true, true}, 0, []bool{false, false, false}},
		{[]float64{2, 2, 2}, []bool{true, true, true}, +1, []bool{false, false, false}},
		{[]float64{5, 2, 3}, []bool{false, true, true}, +1, []bool{false, false, true}}, // n/a is never best
		{[]float64{5, 2}, []bool{false, true}, +1, []bool{false, false}},                // one value: nothing to compare
		// Durations compare in seconds (the old cell parser read "18 min"
		// as 18 and "1.2 h" as 1.2, so 1.2 h looked best).
		{[]float64{1080, 4320}, []bool{true, true}, -1, []bool{true, false}},
	} {
		if got := bestOf(c.vals, c.oks, c.better); !slices.Equal(got, c.want) {
			t.Errorf("bestOf(%v, %v, %d) = %v, want %v", c.vals, c.oks, c.better, got, c.want)
		}
	}
}

// TestFailureReasonNoCycle: a request whose patience runs out before any
// scheduling cycle sees it fails with reason NoCycle, not an empty one.
func TestFailureReasonNoCycle(t *testing.T) {
	src := strings.Replace(noServices, "duration: 6h\n", "duration: 6h\ncycle: 2h\n", 1)
	src = strings.Replace(src, "{name: jobs, kind: batch,", "{name: jobs, kind: vm, patience: 10m,", 1)
	s, _ := scenarioSim(t, "slow-cycle.yaml", src)
	c := s.Run().Classes.Get("jobs")
	if c == nil || c.CapacityFailures == 0 {
		t.Fatalf("no capacity failures: %+v", c)
	}
	if got := c.CapacityFailuresByReason[reasonNoCycle]; got == 0 || c.CapacityFailuresByReason[""] != 0 {
		t.Errorf("failures by reason %v, want some %s and none empty", c.CapacityFailuresByReason, reasonNoCycle)
	}
}
