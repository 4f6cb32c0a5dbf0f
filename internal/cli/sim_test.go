package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimCommand runs `arbiter sim` as a user would (one simulated day to
// stay fast), twice, and checks the outputs exist, carry the documented
// fields and are byte-identical for the same seed.
func TestSimCommand(t *testing.T) {
	var outs [2]string
	for i := range outs {
		outs[i] = t.TempDir()
		out, errOut, code := run(t, "sim", "--days", "1", "--seed", "3", "--out", outs[i])
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, want := range []string{"STATIC", "DYNAMIC", "HYBRID", "customer capacity failures", "inference SLO attainment", "report.html"} {
			if !strings.Contains(out, want) {
				t.Errorf("table lacks %q:\n%s", want, out)
			}
		}
	}
	files := []string{"results.json", "static.csv", "dynamic.csv", "hybrid.csv", "report.html", "cost.csv"}
	for _, f := range files {
		a, err := os.ReadFile(filepath.Join(outs[0], f))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(outs[1], f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs with the same seed", f)
		}
	}
	data, _ := os.ReadFile(filepath.Join(outs[0], "results.json"))
	var res struct {
		Scenario   string           `json:"scenario"`
		Seed       uint64           `json:"seed"`
		Strategies []map[string]any `json:"strategies"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if res.Scenario != "contention" || res.Seed != 3 || len(res.Strategies) != 3 {
		t.Fatalf("results.json header: %+v", res)
	}
	for _, field := range []string{"strategy", "gpu_utilization", "customer_capacity_failure_rate", "customer_time_to_capacity_p95_s",
		"reservation_honour_rate", "inference_slo_attainment", "inference_p99_ms", "training_gpu_hours", "training_jct_p50_h",
		"work_lost_to_preemption_gpu_hours", "preemptions", "spot_evictions", "fragmentation", "cost_usd", "revenue_usd", "classes"} {
		if _, ok := res.Strategies[0][field]; !ok {
			t.Errorf("results.json lacks %s", field)
		}
	}
	// The scenario a user edits must load back.
	scen, _, code := run(t, "sim", "--print-scenario")
	path := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(path, []byte(strings.Replace(scen, "duration: 30d", "duration: 2h", 1)), 0o644)
	if _, errOut, code2 := run(t, "sim", "--scenario", path, "--strategies", "hybrid", "--out", t.TempDir()); code != 0 || code2 != 0 {
		t.Fatalf("edited scenario: %s", errOut)
	}
	if _, errOut, code := run(t, "sim", "--strategies", "bogus", "--out", t.TempDir()); code == 0 || !strings.Contains(errOut, "unknown strategy") {
		t.Errorf("bogus strategy: %d %s", code, errOut)
	}
}

// TestSimAllClasses: the table shows the classes with a promise; the rest
// are one flag away.
func TestSimAllClasses(t *testing.T) {
	out, errOut, code := run(t, "sim", "--days", "1", "--strategies", "hybrid", "--out", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"enterprise SLA VMs: capacity failures", "reservations: time to capacity p95", "inference (coding assistant): GPU-hours"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "dev/test:") || strings.Contains(out, "spot: preemptions") {
		t.Errorf("table shows classes without a promise:\n%s", out)
	}
	if !strings.Contains(out, "classes without a promise, not shown (--all-classes shows them): internal training, customer T4 inference VMs, dev/test, batch, spot") {
		t.Errorf("table does not say which classes it leaves out:\n%s", out)
	}
	all, errOut, code := run(t, "sim", "--days", "1", "--strategies", "hybrid", "--all-classes", "--out", t.TempDir())
	if code != 0 {
		t.Fatalf("--all-classes: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"dev/test: capacity failures", "spot: preemptions", "batch: GPU-hours", "internal training: time to capacity p50"} {
		if !strings.Contains(all, want) {
			t.Errorf("--all-classes table lacks %q:\n%s", want, all)
		}
	}
}

// TestSimNoTrace checks that a scenario whose trace is not there fails once,
// before any run, naming --trace-dir, trace.dir and the script that
// downloads the traces.
func TestSimNoTrace(t *testing.T) {
	const scenario = "../../examples/scenarios/openb.yaml"
	missing := filepath.Join(t.TempDir(), "none")
	for _, args := range [][]string{
		{"sim", "--scenario", scenario, "--trace-dir", missing},
		{"sim", "--scenario", scenario, "--trace-dir", tinyTrace(t, false)}, // no pod list "default"
		{"sim", "tune", "--scenario", scenario, "--strategy", "hybrid", "--knobs", "../../examples/knobs/hybrid.yaml", "--trace-dir", missing},
		{"policy", "test", "-f", "../../examples/policies/operators.yaml", "--scenario", scenario, "--trace-dir", missing},
	} {
		_, errOut, code := run(t, args...)
		if code == 0 {
			t.Errorf("%v: exit 0, want a failure", args)
			continue
		}
		for _, w := range []string{"sim: scenario openb: ", "no such file", "pass --trace-dir or set trace.dir", "scripts/fetch-traces.sh DIR", "DIR/alibaba-gpu-v2023"} {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr lacks %q: %s", args, w, errOut)
			}
		}
		if n := strings.Count(errOut, "no such file"); n != 1 {
			t.Errorf("%v: the error is told %d times, want once: %s", args, n, errOut)
		}
	}
	if _, errOut, code := run(t, "sim", "--trace-dir", missing); code == 0 || !strings.Contains(errOut, "scenario contention replays no trace") {
		t.Errorf("--trace-dir without a trace scenario: exit %d, stderr %q", code, errOut)
	}
}
