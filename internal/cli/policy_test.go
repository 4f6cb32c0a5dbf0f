package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runPolicyCLI(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = Main(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestPolicyExplainOperatorsExample(t *testing.T) {
	out, errOut, code := runPolicyCLI("policy", "explain", "-f", "../../examples/policies/operators.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"2 rules (operators format)",
		"ai_training_priority:\n  When GPU utilization of the whole cluster is above 85%,",
		"shrink developer_instances to 30% of its limit, evicting preemptible excess gracefully;",
		"and move batch_jobs to low_priority_pool, requeued from their last checkpoint.",
		"customer_sla_protection:\n  When p95 latency of the whole cluster is above 150ms for 5m without a break,",
		"give inference_gpus high priority.",
		"end once it has been clear for 5m; the rule changes state at most once every 5m.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q; got:\n%s", want, out)
		}
	}
}

func TestPolicyExplainNativeExample(t *testing.T) {
	out, errOut, code := runPolicyCLI("policy", "explain", "-f", "../../examples/policies/native.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"4 rules (native format)",
		"(once true, it stays true until the value is back to 80%)",
		"give pool inference_gpus, tenant acme, flavor H100-80G high priority and a temporary guarantee of 64 GPUs",
		"They end after 4h at most",
		"Dry run: firings are logged, nothing is changed.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q; got:\n%s", want, out)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`scheduling_policies:
  - name: r
    conditions:
      - metric: p95_latency
        threshold: 150
        duration: 5 minutes
    actions:
      - type: evict
        target: batch_jobs
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		out, err []string
	}{
		{"ok without targets", []string{"-f", "../../examples/policies/operators.yaml"}, 0,
			[]string{"2 rules (operators format): ok", "targets not checked"}, nil},
		{"ok with targets", []string{"-f", "../../examples/policies/operators.yaml",
			"--class", "developer_instances,batch_jobs", "--pool", "low_priority_pool,inference_gpus"}, 0,
			[]string{"2 rules (operators format): ok"}, nil},
		{"missing target", []string{"-f", "../../examples/policies/operators.yaml", "--class", "developer_instances,batch_jobs", "--pool", "low_priority_pool"}, 1,
			nil, []string{`operators.yaml:20:21: scheduling_policies[1].actions[0].resources[0]: target "inference_gpus" does not exist`}},
		{"bad file", []string{"-f", bad}, 1, nil, []string{
			`bad.yaml:5:20: scheduling_policies[0].conditions[0].threshold: threshold "150" has no unit: write 150ms`,
			`bad.yaml:6:19: scheduling_policies[0].conditions[0].duration: duration "5 minutes" is not understood: write 5m`,
			`bad.yaml:8:15: scheduling_policies[0].actions[0].type: unknown action type "evict": write one of scale_down, migrate,`,
		}},
		{"no file", nil, 1, nil, []string{"-f FILE is required"}},
		{"file not found", []string{"-f", filepath.Join(dir, "nope.yaml")}, 1, nil, []string{"no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runPolicyCLI(append([]string{"policy", "validate"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.out {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q; got:\n%s", w, out)
				}
			}
			for _, w := range tc.err {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q; got:\n%s", w, errOut)
				}
			}
		})
	}
}

func TestPolicyTest(t *testing.T) {
	// Two simulated days of the contention scenario under the dynamic
	// strategy with the operators' rules.
	out, errOut, code := runPolicyCLI("policy", "test", "-f", "../../examples/policies/operators.yaml", "--days", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "firings over 2 days of contention under dynamic") {
		t.Errorf("no summary line:\n%s", out)
	}
	_, errOut, code = runPolicyCLI("policy", "test", "-f", "nope.yaml")
	if code == 0 || !strings.Contains(errOut, "nope.yaml") {
		t.Errorf("missing file: %d %s", code, errOut)
	}
}
