package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const benchTraceDir = "../../../shared/traces/alibaba-gpu-v2023"

func needTrace(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(benchTraceDir, "openb_node_list_gpu_node.csv")); err != nil {
		t.Skipf("trace folder not present: %v", err)
	}
}

func TestBenchOpenBJSON(t *testing.T) {
	needTrace(t)
	var out, errb bytes.Buffer
	code := Main([]string{"bench", "openb", "--trace-dir", benchTraceDir, "--workload", "default",
		"--policy", "FGD,02-DotProd", "--seeds", "42", "-o", "json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if errb.Len() != 0 {
		t.Errorf("stderr is not a terminal, yet got %q", errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2: %s", len(rows), out.String())
	}
	// Published checkpoints of the default trace, seed 42, column 130.
	want := map[string]float64{"fgd": 95.29, "dotprod": 90.54}
	for _, r := range rows {
		keys := []string{"workload", "policy", "seed", "alloc_pct_at_100", "alloc_pct_at_130", "unallocated_gpus_at_130"}
		for _, k := range keys {
			if _, ok := r[k]; !ok {
				t.Errorf("row %v lacks %q", r, k)
			}
		}
		if len(r) != len(keys) {
			t.Errorf("row has fields %v, want exactly %v", r, keys)
		}
		p := r["policy"].(string)
		if r["workload"] != "default" || r["seed"] != 42.0 || r["alloc_pct_at_130"] != want[p] {
			t.Errorf("row %v: want default, seed 42, alloc_pct_at_130 %.2f", r, want[p])
		}
		idle := 6212 * (100 - want[p]) / 100
		if got := r["unallocated_gpus_at_130"].(float64); got < idle-0.01 || got > idle+0.01 {
			t.Errorf("%s unallocated GPUs %.2f, want %.2f", p, got, idle)
		}
	}
}

func TestBenchOpenBTable(t *testing.T) {
	needTrace(t)
	var out, errb bytes.Buffer
	code := Main([]string{"bench", "openb", "--trace-dir", benchTraceDir, "--workload", "default",
		"--policy", "bestfit,arbiter", "--seeds", "42-43"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{"WORKLOAD", "PUBLISHED", "default", "bestfit", "arbiter", "4 runs"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	// BestFit, seeds 42-43: published means 93.14 (100 %) is not needed; the
	// deviation column must show an exact match and arbiter has no published row.
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[len(f)-1] != "-" && strings.Contains(line, "bestfit"):
			if f[len(f)-1] != "0.00" && f[len(f)-1] != "0.01" {
				t.Errorf("bestfit deviates: %q", line)
			}
		case strings.Contains(line, "arbiter"):
			if f[len(f)-1] != "-" {
				t.Errorf("arbiter has a published deviation: %q", line)
			}
		}
	}
}

// TestBenchOpenBOtherFolder runs on a folder laid out like the trace but
// holding a tiny cluster and pod list, without published results.
// tinyTrace writes an openb trace folder of two nodes and the pod list
// "tiny" (omitted when pods is false) and returns its path.
func tinyTrace(t *testing.T, pods bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mytrace")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"openb_node_list_gpu_node.csv": "sn,cpu_milli,memory_mib,gpu,model\n" +
		"n0,32000,131072,2,T4\nn1,64000,262144,4,V100\n"}
	if pods {
		files["openb_pod_list_tiny.csv"] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" +
			"p0,4000,8192,1,500\np1,8000,8192,1,1000\np2,2000,4096,0,0\np3,4000,8192,2,1000\n"
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBenchOpenBOtherFolder(t *testing.T) {
	dir := tinyTrace(t, true)
	var out, errb bytes.Buffer
	code := Main([]string{"bench", "openb", "--trace-dir", dir, "--seeds", "1,2", "-o", "json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 7*2 {
		t.Errorf("%d rows, want 14 (7 policies x 2 seeds)", len(rows))
	}
	for _, r := range rows {
		if r["workload"] != "tiny" {
			t.Errorf("row %v", r)
		}
	}
}

func TestBenchOpenBErrors(t *testing.T) {
	needTrace(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "nope"}, `unknown policy "nope"`},
		{[]string{"--workload", "nope"}, `unknown workload "nope"`},
		{[]string{"--seeds", "51-42"}, "bad --seeds"},
		{[]string{"-o", "yaml"}, "unknown output format"},
		{[]string{"--trace-dir", "/nonexistent"}, "no such file"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		args := append([]string{"bench", "openb", "--trace-dir", benchTraceDir}, tt.args...)
		if code := Main(args, &out, &errb); code == 0 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want failure with %q", tt.args, code, errb.String(), tt.want)
		}
	}
}

// TestBenchOpenBNoTrace checks that a missing trace folder, pod list or
// results folder is named with the flag that sets it and the script that
// downloads the traces.
func TestBenchOpenBNoTrace(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no folder", []string{"--trace-dir", filepath.Join(t.TempDir(), "none")},
			[]string{"openb_node_list_gpu_node.csv: no such file", "pass --trace-dir", "scripts/fetch-traces.sh DIR", "DIR/alibaba-gpu-v2023"}},
		{"no pod list", []string{"--trace-dir", tinyTrace(t, false)},
			[]string{"no openb_pod_list_*.csv in", "pass --trace-dir", "scripts/fetch-traces.sh DIR"}},
		{"no results", []string{"--trace-dir", tinyTrace(t, true), "--seeds", "1", "--expected-dir", filepath.Join(t.TempDir(), "none")},
			[]string{"analysis_allo_discrete.csv: no such file", "pass --expected-dir", "scripts/fetch-traces.sh DIR", "DIR/fgd-expected-results"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := run(t, append([]string{"bench", "openb"}, tt.args...)...)
			if code == 0 {
				t.Fatalf("exit 0, want a failure: %s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q: %s", w, errOut)
				}
			}
		})
	}
}

func TestParseSeeds(t *testing.T) {
	got, err := parseSeeds("42-44,50,43")
	if err != nil || len(got) != 4 || got[0] != 42 || got[2] != 44 || got[3] != 50 {
		t.Errorf("parseSeeds = %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "5-", "9-1"} {
		if _, err := parseSeeds(bad); err == nil {
			t.Errorf("parseSeeds(%q) accepted", bad)
		}
	}
}
