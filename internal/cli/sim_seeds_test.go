package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimSeeds: --seeds runs each strategy on each seed, results.json
// carries each metric's mean, ci95 and n per strategy and the per-seed
// runs, and each seed's own outputs are byte-identical to a --seed run.
func TestSimSeeds(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := run(t, "sim", "--days", "0.25", "--strategies", "static,hybrid", "--seeds", "1-2,5", "-j", "2", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"3 seeds (1,2,5): mean ± 95% CI", "BEST", "GPU utilization", " ± ", "Welch"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Seeds      []uint64 `json:"seeds"`
		Strategies []struct {
			Strategy string `json:"strategy"`
			Metrics  map[string]struct {
				Mean *float64 `json:"mean"`
				CI95 *float64 `json:"ci95"`
				N    int      `json:"n"`
			} `json:"metrics"`
			Runs []map[string]any `json:"runs"`
		} `json:"strategies"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Seeds) != 3 || len(res.Strategies) != 2 {
		t.Fatalf("results.json: seeds %v, %d strategies", res.Seeds, len(res.Strategies))
	}
	for _, s := range res.Strategies {
		m, ok := s.Metrics["gpu_utilization"]
		if !ok || m.Mean == nil || m.CI95 == nil || m.N != 3 {
			t.Errorf("%s: gpu_utilization %+v, want mean, ci95, n 3", s.Strategy, m)
		}
		if len(s.Runs) != 3 {
			t.Errorf("%s: %d runs, want 3", s.Strategy, len(s.Runs))
		}
	}
	// The seeds report: the comparison, and a bar with its CI whisker
	// per strategy for each headline metric with a direction.
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mean ± 95% confidence interval", `id="intervals"`, "GPU utilization", "(higher is better)", `stroke="#222"`, `id="glossary"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("seeds report lacks %q", want)
		}
	}
	// Seed 5 inside a --seeds run is the same run as --seed 5.
	single := t.TempDir()
	if _, errOut, code := run(t, "sim", "--days", "0.25", "--strategies", "static,hybrid", "--seed", "5", "--out", single); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, f := range []string{"results.json", "static.csv", "hybrid.csv"} {
		a, _ := os.ReadFile(filepath.Join(single, f))
		b, err := os.ReadFile(filepath.Join(dir, "seed-5", f))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("seed-5/%s differs from the --seed 5 run (%v)", f, err)
		}
	}
}

func TestSimSeedsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "1-3", "--seed", "2"}, "--seed and --seeds are exclusive"},
		{[]string{"--seeds", "1-500"}, "more than 100 seeds"},
		{[]string{"--seeds", "x"}, `"x" is not a seed`},
		{[]string{"--seeds", "2,2"}, "seed 2 given twice"},
	} {
		args := append([]string{"sim", "--days", "0.01", "--out", t.TempDir()}, tc.args...)
		_, errOut, code := run(t, args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want an error with %q", tc.args, code, errOut, tc.want)
		}
	}
}
