package policy

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

func mustReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// known is the fleet the examples refer to.
var known = Targets{
	Tenants:  []string{"research", "acme"},
	Classes:  []string{"developer_instances", "batch_jobs", "inference"},
	Pools:    []string{"low_priority_pool", "inference_gpus"},
	Services: []string{"coding-assistant"},
	Flavors:  []string{"H100-80G"},
	Regions:  []string{"eastus", "westeurope"},
}

var ignorePos = cmp.Options{
	cmpopts.IgnoreUnexported(Condition{}, Action{}),
	cmpopts.IgnoreFields(Rule{}, "Pos"), cmpopts.IgnoreFields(Condition{}, "Pos"), cmpopts.IgnoreFields(Action{}, "Pos"),
}

func TestLoadOperatorsExampleVerbatim(t *testing.T) {
	const path = "../../examples/policies/operators.yaml"
	src := mustReadFile(t, path)
	// The example file is the ARCHITECTURE.md example, verbatim.
	if arch, err := os.ReadFile("../../../shared/design/ARCHITECTURE.md"); err == nil {
		if !strings.Contains(string(arch), src) {
			t.Errorf("%s is not verbatim from ARCHITECTURE.md", path)
		}
	}
	p, err := Load(path, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Enabled: true, Cooldown: DefaultCooldown}
	want := &Policy{File: path, Format: FormatOperators, Rules: []Rule{
		{
			Path: "scheduling_policies[0]", Name: "ai_training_priority", Options: opts,
			When: Condition{Path: "scheduling_policies[0].conditions[0]", Kind: CondMetric, Metric: MetricUtilization,
				Target: Cluster, Op: OpAbove, Threshold: Quantity{0.85, DimFraction, "85%"}},
			Actions: []Action{
				{Path: "scheduling_policies[0].actions[0]", Type: ActionScaleDown, Target: Target{Name: "developer_instances"},
					MinCapacity: Quantity{0.30, DimFraction, "30%"}},
				{Path: "scheduling_policies[0].actions[1]", Type: ActionMigrate, Target: Target{Name: "batch_jobs"},
					Destination: Target{Name: "low_priority_pool"}},
			},
		},
		{
			Path: "scheduling_policies[1]", Name: "customer_sla_protection", Options: opts,
			When: Condition{Path: "scheduling_policies[1].conditions[0]", Kind: CondMetric, Metric: MetricP95Latency,
				Target: Cluster, Op: OpAbove, Threshold: Quantity{0.150, DimDuration, "150ms"}, For: 5 * time.Minute},
			Actions: []Action{
				{Path: "scheduling_policies[1].actions[0]", Type: ActionReallocate, Resources: []Target{{Name: "inference_gpus"}},
					Priority: PriorityHigh},
			},
		},
	}}
	if diff := cmp.Diff(want, p, ignorePos); diff != "" {
		t.Errorf("loaded policy (-want +got):\n%s", diff)
	}
	if p.Rules[1].Actions[0].Pos != (Pos{File: path, Line: 19, Col: 9}) {
		t.Errorf("action position = %v", p.Rules[1].Actions[0].Pos)
	}

	if err := p.Resolve(known); err != nil {
		t.Fatal(err)
	}
	got := []Target{p.Rules[0].Actions[0].Target, p.Rules[0].Actions[1].Target, p.Rules[0].Actions[1].Destination, p.Rules[1].Actions[0].Resources[0]}
	wantT := []Target{{TargetClass, "developer_instances"}, {TargetClass, "batch_jobs"}, {TargetPool, "low_priority_pool"}, {TargetPool, "inference_gpus"}}
	if diff := cmp.Diff(wantT, got); diff != "" {
		t.Errorf("resolved targets (-want +got):\n%s", diff)
	}
}

func TestLoadNativeExample(t *testing.T) {
	const path = "../../examples/policies/native.yaml"
	p, err := Load(path, []byte(mustReadFile(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(known); err != nil {
		t.Fatal(err)
	}
	if p.Format != FormatNative || len(p.Rules) != 4 {
		t.Fatalf("format %v, %d rules", p.Format, len(p.Rules))
	}
	sla := p.Rules[1]
	if sla.When.Hysteresis.Value != 0.020 || sla.When.For != 5*time.Minute || sla.Options.MaxDuration != 4*time.Hour {
		t.Errorf("customer_sla_protection = %+v", sla)
	}
	if a := sla.Actions[0]; a.Guarantee.Value != 64 || a.Priority != PriorityHigh || a.Resources[0] != (Target{TargetPool, "inference_gpus"}) {
		t.Errorf("reallocate = %+v", a)
	}
	spot := p.Rules[2].When
	if spot.Kind != CondAll || spot.Children[1].Kind != CondAny || spot.Children[1].Children[1].Threshold.Value != 1800 {
		t.Errorf("spot_surge condition = %+v", spot)
	}
	if p.Rules[2].Actions[0].Price.Value != 3.20 {
		t.Errorf("price = %v", p.Rules[2].Actions[0].Price)
	}
	if !p.Rules[3].Options.DryRun || p.Rules[3].When.Kind != CondExpr {
		t.Errorf("night rule = %+v", p.Rules[3])
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string // each must appear in the error, in this order
	}{
		{"unknown action type", `
scheduling_policies:
  - name: r
    conditions: [{resource_type: gpu_cluster, utilization_threshold: 85%}]
    actions:
      - type: shrink
        target: x
`, []string{`f.yaml:6:15: scheduling_policies[0].actions[0].type: unknown action type "shrink": write one of scale_down, migrate, reallocate, set_priority, set_limit, set_spot_price, drain, notify`}},
		{"threshold without unit", `
scheduling_policies:
  - name: r
    conditions:
      - metric: p95_latency
        threshold: 150
      - resource_type: gpu_cluster
        utilization_threshold: 0.85
    actions: [{type: drain, target: p}]
`, []string{
			`f.yaml:6:20: scheduling_policies[0].conditions[0].threshold: threshold "150" has no unit: write 150ms, 150s or 150m`,
			`f.yaml:8:32: scheduling_policies[0].conditions[1].utilization_threshold: threshold "0.85" has no unit: write 85%`,
		}},
		{"duration in words", `
scheduling_policies:
  - name: r
    conditions: [{metric: p95_latency, threshold: 150ms, duration: 5 minutes}]
    actions: [{type: drain, target: p}]
`, []string{`f.yaml:4:68: scheduling_policies[0].conditions[0].duration: duration "5 minutes" is not understood: write 5m`}},
		{"wrong unit", `
policies:
  - name: r
    when: {metric: p95_latency, above: 85%}
    then: [{type: scale_down, target: t, min_capacity: 150ms}]
`, []string{
			`f.yaml:4:40: policies[0].when.above: threshold "85%" is a fraction, but it needs a time with a unit such as 150ms, 30s or 5m`,
			`f.yaml:5:56: policies[0].then[0].min_capacity: min_capacity "150ms" is a duration, but it needs a percentage such as 85%`,
		}},
		{"missing fields and wrong fields", `
scheduling_policies:
  - conditions: []
    actions:
      - type: migrate
        target: batch_jobs
        min_capacity: 30%
`, []string{
			`f.yaml:3:5: scheduling_policies[0].conditions: missing: add at least one condition`,
			`f.yaml:3:5: scheduling_policies[0].name: missing`,
			`f.yaml:5:9: scheduling_policies[0].actions[0].destination: missing: migrate needs destination`,
			`f.yaml:5:9: scheduling_policies[0].actions[0].min_capacity: migrate does not take min_capacity (it takes target, destination)`,
		}},
		{"unknown field", `
scheduling_policies:
  - name: r
    conditions: [{metric: p95_latency, treshold: 150ms}]
    actions: [{type: notify, message: hi}]
`, []string{`treshold: unknown field (did you mean "threshold"?)`}},
		{"bad target kind", `
policies:
  - name: r
    when: {metric: p95_latency, of: pool:x, above: 1s}
    then: [{type: migrate, target: class:b, destination: tenant:t}]
`, []string{
			`f.yaml:4:37: policies[0].when.of: p95_latency is not measured on a pool: use a cluster, class, service or selector`,
			`f.yaml:5:58: policies[0].then[0].destination: destination of migrate must be a pool or region, not a tenant`,
		}},
		{"bad CEL", `
policies:
  - name: r
    when: {expr: "utilization() > "}
    then: [{type: notify, message: hi}]
  - name: s
    when: {expr: "utilization()"}
    then: [{type: notify, message: hi}]
`, []string{`policies[0].when.expr: invalid CEL expression`, `policies[1].when.expr: expression gives a double, want true or false`}},
		{"duplicate names, two forms", `
policies:
  - name: r
    when: {metric: utilization, above: 50%, all: []}
    then: [{type: notify, message: hi}]
  - name: r
    when: {metric: utilization, above: 50%}
    then: [{type: notify, message: hi}]
`, []string{`f.yaml:4:11: policies[0].when: write exactly one of`, `f.yaml:6:5: policies[1].name: rule "r" is already defined at f.yaml:3:5`}},
		{"both formats", "scheduling_policies: []\npolicies: []\n", []string{"a file holds one format"}},
		{"no rules", "policies: []\n", []string{"f.yaml:1:1: the policies list is empty"}},
		{"empty", "# nothing\n", []string{"no rules: write a scheduling_policies: list"}},
		{"hysteresis of wrong unit", `
policies:
  - name: r
    when: {metric: utilization, above: 80%}
    then: [{type: notify, message: hi}]
    hysteresis: 20ms
`, []string{`f.yaml:6:17: policies[0].hysteresis: hysteresis 20ms fits no condition of this rule`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("f.yaml", []byte(tc.src))
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			var list yamlfile.Errors
			if !errors.As(err, &list) || len(list) == 0 {
				t.Errorf("error does not carry yamlfile.Errors: %v", err)
			}
			msg := err.Error()
			at := 0
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Errorf("error lacks (in order) %q; got:\n%s", w, msg)
					continue
				}
				at += i + len(w)
			}
		})
	}
}

func TestValidateTargets(t *testing.T) {
	src := `
scheduling_policies:
  - name: r
    conditions:
      - metric: p95_latency
        target: coding-asistant
        threshold: 150ms
    actions:
      - type: scale_down
        target: developer_instance
        min_capacity: 30%
      - type: migrate
        target: batch_jobs
        destination: eastus
      - type: migrate
        target: batch_jobs
        destination: coding-assistant
      - type: reallocate
        resources: [inference_gpus, tenant:nobody]
        priority: high
`
	p := mustLoad(t, src)
	err := p.Validate(known)
	if err == nil {
		t.Fatal("Validate succeeded")
	}
	for _, w := range []string{
		`test.yaml:6:17: scheduling_policies[0].conditions[0].target: target "coding-asistant" does not exist (did you mean "coding-assistant"?)`,
		`test.yaml:10:17: scheduling_policies[0].actions[0].target: target "developer_instance" does not exist (did you mean "developer_instances"?); write one of the known names (tenants: research, acme; classes: developer_instances, batch_jobs, inference)`,
		`test.yaml:17:22: scheduling_policies[0].actions[2].destination: "coding-assistant" is a service, but destination of migrate needs a pool or region`,
		`test.yaml:19:37: scheduling_policies[0].actions[3].resources[1]: tenant "nobody" does not exist`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q; got:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "eastus") {
		t.Errorf("eastus is a region and a valid destination: %v", err)
	}
	// Validate does not change the policy.
	if p.Rules[0].Actions[1].Destination.Kind != TargetUnresolved {
		t.Error("Validate resolved a target")
	}

	amb := mustLoad(t, `
scheduling_policies:
  - name: r
    conditions: [{resource_type: gpu_cluster, utilization_threshold: 85%}]
    actions: [{type: scale_down, target: shared, min_capacity: 50%}]
`)
	err = amb.Validate(Targets{Tenants: []string{"shared"}, Classes: []string{"shared"}})
	if err == nil || !strings.Contains(err.Error(), `"shared" is ambiguous: write tenant:shared or class:shared`) {
		t.Errorf("ambiguous target: %v", err)
	}

	cel := mustLoad(t, `
policies:
  - name: r
    when: {expr: "p95_latency('service:nope') > duration('1s')"}
    then: [{type: notify, message: hi}]
`)
	if err := cel.Validate(known); err == nil || !strings.Contains(err.Error(), `service "nope" does not exist`) {
		t.Errorf("CEL target: %v", err)
	}

	// Open kinds accept any name written with its kind; a bare name still
	// has to exist, and other kinds stay closed.
	open := known
	open.Open = []TargetKind{TargetClass}
	newClass := mustLoad(t, `
policies:
  - name: r
    when: {metric: utilization, of: cluster, above: 50%}
    then: [{type: set_limit, target: class:not_seen_yet, limit: 0}, {type: set_limit, target: tenant:nobody, limit: 0}]
`)
	err = newClass.Validate(open)
	if err == nil || strings.Contains(err.Error(), "not_seen_yet") || !strings.Contains(err.Error(), `tenant "nobody" does not exist`) {
		t.Errorf("open class kind: %v", err)
	}
}
