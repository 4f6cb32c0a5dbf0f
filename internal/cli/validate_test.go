package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestValidateEveryExample: every example file is told apart by its
// keys, checked as its kind, and valid.
func TestValidateEveryExample(t *testing.T) {
	want := map[string]string{
		"alerts.yaml": "alert", "probes.yaml": "probes", "backfill.yaml": "config", "elastic.yaml": "config", "future-reservation.yaml": "config",
		"schedule.yaml": "config", "mig.yaml": "config", "tree.yaml": "config", "agent/config.yaml": "config", "agent/job.yaml": "workload",
		"knobs/dynamic.yaml": "knobs", "knobs/hybrid.yaml": "knobs", "knobs/static.yaml": "knobs",
		"policies/native.yaml": "policy", "policies/operators.yaml": "policy", "scenarios/openb.yaml": "scenario", "scenarios/elastic-serving.yaml": "scenario",
		"strategies/default.yaml": "strategy", "strategies/dynamic.yaml": "strategy", "strategies/fgd.yaml": "strategy",
		"strategies/hybrid.yaml": "strategy", "strategies/static.yaml": "strategy",
		"tuned/static-second-pass.knobs.yaml": "knobs", "tuned/tuned-dynamic.policies.yaml": "policy",
		"tuned/tuned-dynamic.yaml": "strategy", "tuned/tuned-hybrid.yaml": "strategy", "tuned/tuned-static.yaml": "strategy",
	}
	files, _ := filepath.Glob("../../examples/*.yaml")
	more, _ := filepath.Glob("../../examples/*/*.yaml")
	files = append(files, more...)
	if len(files) != len(want) {
		t.Errorf("%d example files, the test knows %d: add the new ones", len(files), len(want))
	}
	args := append([]string{"validate"}, files...)
	args = append(args, "../../internal/sim/contention.yaml")
	out, errOut, code := run(t, args...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	for name, kind := range want {
		if line := "../../examples/" + name + ": " + kind + ": ok\n"; !strings.Contains(out, line) {
			t.Errorf("output lacks %q", line)
		}
	}
	if !strings.Contains(out, "contention.yaml: scenario: ok\n") {
		t.Errorf("the embedded scenario: %s", out)
	}
}

// TestValidateEveryProblemInOneRun (issue 22, point 3): five problems
// planted in two files of two kinds, of every sort (values that do not
// decode, misspelt keys, problems of the world a scenario builds, of a
// rule), are all reported in one run, each with file:line:col and field,
// then counted.
func TestValidateEveryProblemInOneRun(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"small.yaml": `name: small
duration: 2 days
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 4}]
tenants:
  - name: research
    quota: [{flavor: H100-80G, guaranteed: 16, limit: 8}]
generators:
  - name: jobs
    tenant: research
    sizes: [{gpus: 8, replicas: 1, weight: 1}]
    rate_per_hour: 2
    runtime_min: 1h
    runtime_max: 2h
    flavors: [H100-80G]
    regions: [eastus]
    daily_amplitud: 0.5
`,
		"rules.yaml": `scheduling_policies:
  - name: shrink
    conditions:
      - resource_type: gpu
        utilization_threshold: 85
    actions:
      - type: scale_down
        target: developer_instances
        min_capacity: 30%
  - name: protect
    conditions:
      - metric: p95_latency
        threshold: 150ms
        duration: 5m
    actions:
      - type: reallocate
        resources: [inference_gpus]
        priority: urgent
`,
	})
	sc, pol := filepath.Join(dir, "small.yaml"), filepath.Join(dir, "rules.yaml")
	out, errOut, code := run(t, "validate", sc, pol)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want := []string{
		sc + `:2:11: duration: invalid duration "2 days": write a number with a unit, such as 30s, 5m, 2h or 7d`,
		sc + `:13:13: tenants[0].quota[0].limit: limit 8 is below guaranteed 16`,
		sc + `:23:5: generators[0].daily_amplitud: unknown field (did you mean "daily_amplitude"?)`,
		pol + `:5:32: scheduling_policies[0].conditions[0].utilization_threshold: threshold "85" has no unit: write 85%`,
		pol + `:18:19: scheduling_policies[1].actions[0].priority: unknown priority "urgent"`,
		"arbiter: 5 problems in 2 files\n",
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != len(want) {
		t.Errorf("%d lines on stderr, want %d:\n%s", len(lines), len(want), errOut)
	}
	for i, w := range want {
		if i < len(lines) && !strings.HasPrefix(lines[i]+"\n", w) {
			t.Errorf("line %d = %q, want it to start with %q", i+1, lines[i], w)
		}
	}
	for _, w := range []string{sc + ": scenario: 3 problems\n", pol + ": policy: 2 problems\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
}

// TestValidateKinds: how a file's kind is told, and what is said when it
// cannot be.
func TestValidateKinds(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		args      []string
		out, err  string // substrings
		code      int
	}{
		{"config by its sections", "fleet: {regions: []}\nworkloads: []\n", nil, "config: ok", "", 0},
		{"tenants alone are a config", "tenants: [{name: a}]\n", nil, "config: ok", "", 0},
		{"a misspelt key still tells", "fleeet: {}\ntenants: []\n", nil, "config: 1 problem",
			`f.yaml:1:1: fleeet: unknown field (did you mean "fleet"?)`, 1},
		{"scenario", "name: s\nduration: 1h\n", nil, "scenario: ok", "", 0},
		{"strategy: policies names a file", "name: s\npolicies: nope.yaml\n", nil, "strategy: 1 problem",
			"f.yaml:2:11: policies: cannot read the policy file", 1},
		{"policy: policies lists rules", "policies: []\n", nil, "policy: 1 problem", "the policies list is empty", 1},
		{"alert", "rules: []\n", nil, "alert: ok", "", 0},
		{"workload", "name: w\ngpus: 0\nflavors: [H100-80G]\nregions: [eastus]\n", nil, "workload: 1 problem",
			"f.yaml:2:7: gpus: ask for at least 1 milli-GPU", 1},
		{"knobs", "strategy: s\nobjective: [{metric: gpu_utilization}]\nknobs: [{path: a, values: [1]}]\n", nil, "knobs: ok", "", 0},
		{"unknown keys", "foo: 1\nbar: 2\n", nil, "unknown kind: 1 problem",
			"f.yaml:1:1: cannot tell what kind of file this is: its keys (foo, bar) are not those of a probes, config, scenario, strategy, policy, alert, workload or knobs file; pass --kind probes|config|scenario|strategy|policy|alert|workload|knobs", 1},
		{"a tie", "description: d\n", nil, "unknown kind", "its keys (description) fit a scenario or strategy file equally; pass --kind", 1},
		{"a list", "- a\n", nil, "unknown kind", "f.yaml:1:1: not a mapping of keys", 1},
		{"empty", "", nil, "unknown kind", "f.yaml:1:1: empty file", 1},
		{"syntax", "a: [\n", nil, "unknown kind", "f.yaml:1:1: invalid YAML", 1},
		{"--kind", "description: d\n", []string{"--kind", "strategy"}, "strategy: 1 problem", "f.yaml:1:1: name: a strategy needs a name", 1},
		{"--kind unknown", "a: 1\n", []string{"--kind", "cfg"}, "", `validate: unknown kind "cfg": use one of probes, config, scenario, strategy, policy, alert, workload, knobs`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"f.yaml": tc.src})
			args := append(append([]string{"validate"}, tc.args...), filepath.Join(dir, "f.yaml"))
			out, errOut, code := run(t, args...)
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.err) {
				t.Errorf("exit %d (want %d)\nstdout:\n%s(want %q)\nstderr:\n%s(want %q)", code, tc.code, out, tc.out, errOut, tc.err)
			}
		})
	}
}

// TestValidateStrategyPolicies: a strategy's policy file is checked with
// it, once however many strategies name it, and its problems count as its
// own file's.
func TestValidateStrategyPolicies(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"st/a.yaml":  "name: a\npolicies: ../pol/p.yaml\n",
		"st/b.yaml":  "name: b\npolicies: ../pol/p.yaml\n",
		"pol/p.yaml": "policies:\n  - name: r\n    when: {metric: utilization, above: 2 percent}\n    then: [{type: notify, channel: ops, message: hi}]\n",
		"st/c.yaml":  "name: c\noptions: {scorer: tetris}\npolicies: 3\n",
	})
	st := filepath.Join(dir, "st")
	out, errOut, code := run(t, "validate", filepath.Join(st, "a.yaml"), filepath.Join(st, "b.yaml"))
	p := filepath.Join(dir, "pol", "p.yaml")
	if code != 1 || strings.Count(errOut, p+":3:") != 1 || !strings.Contains(errOut, "1 problem in 1 file") ||
		!strings.Contains(out, "a.yaml: strategy: ok") || !strings.Contains(out, p+": policy: 1 problem") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	c := filepath.Join(st, "c.yaml")
	_, errOut, _ = run(t, "validate", c)
	for _, w := range []string{c + `:2:19: options.scorer: unknown scorer "tetris"`, c + ":3:11: policies: cannot read the policy file", "2 problems in 1 file"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
}

// TestValidateWorkloadSpec: a workload spec's problems point at their
// values, as the server would refuse them.
func TestValidateWorkloadSpec(t *testing.T) {
	dir := writeFiles(t, map[string]string{"job.yaml": `name: bad name
gpus: 1.5
flavors: [H100-80G]
regions: [eastus]
priority: urgent
command:
  argv: []
`})
	f := filepath.Join(dir, "job.yaml")
	_, errOut, code := run(t, "validate", f)
	for _, w := range []string{
		f + `:1:7: name: name "bad name" may not contain spaces or slashes`,
		f + `:2:7: gpus: 1.5 GPUs: more than one GPU must be a whole number`,
		f + `:5:11: priority: unknown priority class "urgent"`,
		f + `:7:9: command.argv: a command needs argv, its program first`,
	} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	if code != 1 {
		t.Errorf("exit %d", code)
	}
}

// FuzzValidate: telling the kind and checking never panic, whatever the
// bytes, and every problem names the file; a file of no kind has a
// problem that says so.
func FuzzValidate(f *testing.F) {
	for _, p := range []string{"schedule.yaml", "alerts.yaml", "agent/job.yaml", "knobs/dynamic.yaml", "policies/native.yaml",
		"strategies/static.yaml", "scenarios/openb.yaml"} {
		data, err := os.ReadFile("../../examples/" + p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint8(0))
	}
	f.Add([]byte("policies: x\n"), uint8(0))
	f.Add([]byte("policies: [{name: r}]\nname: s\n"), uint8(3))
	f.Add([]byte("- 1\n"), uint8(1))
	f.Add([]byte("name: w\ngpus: [1]\ncommand: {argv: [a], env: {ARBITER_X: 1}}\n"), uint8(6))
	f.Add([]byte("{a: *b}"), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, k uint8) {
		kind := ""
		if n := int(k) % (len(fileKinds) + 1); n > 0 {
			kind = fileKinds[n-1].name
		}
		got, probs, _ := validateData("fuzz.yaml", data, kind)
		if got == nil && len(probs) == 0 {
			t.Fatal("no kind and no problem")
		}
		if kind != "" && (got == nil || got.name != kind) {
			t.Fatalf("checked as %v, asked for %s", got, kind)
		}
		for _, p := range probs {
			if s := problemString(p); !strings.HasPrefix(s, "fuzz.yaml") {
				t.Fatalf("problem without the file name: %s", s)
			}
		}
	})
}

// TestValidateMetering: `arbiter validate` checks a config's metering
// section (docs/cost.md, "Prices"), each problem with file:line:col and
// its field.
func TestValidateMetering(t *testing.T) {
	dir := writeFiles(t, map[string]string{"serve.yaml": `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 1}]
tenants:
  - name: org
metering:
  retention: 400d
  prices:
    - {sku: Standard_ND96isr_H100_v5, region: westeurope, on_demand: 90}
  plans:
    - {tenant: org, discount: 150%}
`})
	out, errOut, code := run(t, "validate", filepath.Join(dir, "serve.yaml"))
	if code == 0 {
		t.Fatalf("exit 0: %s", out)
	}
	all := out + errOut
	for _, w := range []string{
		`serve.yaml:14:7: metering.prices[0].region: region "westeurope" is not in the fleet`,
		`serve.yaml:16:7: metering.plans[0].discount: "150%" is not a percentage`,
	} {
		if !strings.Contains(all, w) {
			t.Errorf("output lacks %q:\n%s", w, all)
		}
	}
}
