package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimTune runs `arbiter sim tune` end to end on a few simulated hours:
// it prints every setting tried and the held-out comparison, and writes a
// tuned strategy (with its own policy file) that `arbiter sim` loads.
func TestSimTune(t *testing.T) {
	dir := t.TempDir()
	knobs := filepath.Join(dir, "knobs.yaml")
	if err := os.WriteFile(knobs, []byte(`strategy: dynamic
objective:
  - {metric: gpu_utilization}
knobs:
  - name: threshold
    path: policies:scheduling_policies[name=ai_training_priority].conditions[0].utilization_threshold
    values: ["80%", "90%"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "tuned", "dyn.yaml")
	stdout, errOut, code := run(t, "sim", "tune", "--strategy", "dynamic", "--knobs", knobs, "--seeds", "1-2", "--eval-seeds", "3", "--days", "0.05", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"threshold", "SCORE", "as written", "best on seeds 1,2", "held-out seeds 3", "AS WRITTEN", "TUNED"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(errOut, "setting 3: 90%") {
		t.Errorf("progress lacks the settings tried (85%% as written, 80%%, 90%%):\n%s", errOut)
	}
	pol, err := os.ReadFile(filepath.Join(dir, "tuned", "dyn.policies.yaml"))
	if err != nil || !strings.Contains(string(pol), "ai_training_priority") {
		t.Fatalf("tuned policies: %v\n%s", err, pol)
	}
	// The report's paragraph is the description: it says what was tuned.
	st, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(st), "Tuned on seeds 1,2: threshold = ") || !strings.Contains(string(st), "before tuning") {
		t.Errorf("tuned strategy's description does not say what tuning changed: %v\n%s", err, st)
	}
	if _, errOut, code := run(t, "sim", "--strategies", out, "--days", "0.02", "--out", filepath.Join(dir, "sim")); code != 0 {
		t.Fatalf("the tuned strategy does not run: %s", errOut)
	}
}

func TestSimTuneErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("strategy: hybrid\nobjective: [{metric: gpu_utilization}]\nknobs:\n  - {path: \"tenants[name=training].quota[0].guaranteed\", values: [256]}\n"), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("strategy: hybrid\nobjective:\n  - {metric: nope}\nknobs:\n  - {path: a, values: [1]}\n"), 0o644)
	missing := filepath.Join(dir, "missing.yaml")
	os.WriteFile(missing, []byte("strategy: hybrid\nobjective: [{metric: gpu_utilization}]\nknobs:\n  - {path: \"tenants[name=nobody].quota[0].guaranteed\", values: [1]}\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--strategy", "hybrid"}, "pass --strategy NAME and --knobs FILE"},
		{[]string{"--strategy", "static", "--knobs", good}, `the knobs are for "hybrid", --strategy is "static"`},
		{[]string{"--strategy", "hybrid", "--knobs", bad}, "bad.yaml:3:5: objective[0].metric: unknown metric"},
		{[]string{"--strategy", "hybrid", "--knobs", good, "--seeds", "1-3", "--eval-seeds", "3-4"}, "seed 3 is in both"},
		{[]string{"--strategy", "hybrid", "--knobs", good, "--eval-seeds", "x"}, `--eval-seeds: "x": "x" is not a seed`},
		{[]string{"--strategy", "hybrid", "--knobs", missing, "--days", "0.01"}, "no item matches"},
	} {
		_, errOut, code := run(t, append([]string{"sim", "tune"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want an error with %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestTunedExamplesRun: the tuned strategies in examples/tuned load and
// run (the dynamic one with its own copy of the policies), and each
// description says what tuning changed.
func TestTunedExamplesRun(t *testing.T) {
	var files []string
	for _, n := range []string{"tuned-static", "tuned-dynamic", "tuned-hybrid"} {
		f := filepath.Join("..", "..", "examples", "tuned", n+".yaml")
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "before tuning).") {
			t.Errorf("%s: the description does not say what tuning changed", f)
		}
		files = append(files, f)
	}
	if _, errOut, code := run(t, "sim", "--strategies", strings.Join(files, ","), "--days", "0.02", "--out", t.TempDir()); code != 0 {
		t.Fatalf("the tuned strategies do not run: %s", errOut)
	}
}
