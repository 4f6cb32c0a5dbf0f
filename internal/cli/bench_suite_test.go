package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/sched/schedbench"
)

const suiteCase1 = "sched/nodes=1000/gang-256-preempt"

func suiteJSON(t *testing.T, args ...string) (SuiteReport, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(append([]string{"bench", "suite", "-o", "json"}, args...), &out, &errb)
	var rep SuiteReport
	if code == 0 || strings.Contains(errb.String(), "regression flagged") {
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%v in %q (stderr %s)", err, out.String(), errb.String())
		}
	}
	return rep, errb.String(), code
}

// One case, two samples: the document carries the samples, their median
// and spread, and the environment; --out writes the same document.
func TestBenchSuiteJSON(t *testing.T) {
	file := filepath.Join(t.TempDir(), "b.json")
	rep, errs, code := suiteJSON(t, "--case", suiteCase1, "--count", "2", "--out", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if len(rep.Results) != 1 || rep.Results[0].Name != suiteCase1 || len(rep.Results[0].Samples) != 2 {
		t.Fatalf("results %+v", rep.Results)
	}
	r := rep.Results[0]
	if r.Median <= 0 || r.Min > r.Median || r.Max < r.Median || r.Unit != "ms" || r.What == "" {
		t.Errorf("summary %+v", r)
	}
	if rep.Go == "" || rep.CPUs < 1 || rep.Commit == "" || rep.Started.IsZero() || rep.Compared != nil {
		t.Errorf("environment %+v", rep)
	}
	stored, err := readSuite(file)
	if err != nil || len(stored.Results) != 1 || stored.Results[0].Median != r.Median {
		t.Fatalf("--out: %v %+v", err, stored)
	}
}

// Against a stored baseline, a case slower than it by more than the
// threshold is flagged and the exit code says so; one faster is not.
func TestBenchSuiteBaseline(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		median  float64
		flagged bool
	}{{0.001, true}, {1e9, false}} {
		base := SuiteReport{Results: []SuiteResult{{Name: suiteCase1, Median: c.median}, {Name: "sched/not-run", Median: 1}}}
		b, _ := json.Marshal(base)
		file := filepath.Join(dir, "base.json")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		rep, errs, code := suiteJSON(t, "--case", suiteCase1, "--count", "1", "--baseline", file)
		if (code != 0) != c.flagged || rep.Compared == nil || len(rep.Compared.Ratios) != 1 || rep.Compared.Ratios[0].Flagged != c.flagged {
			t.Fatalf("baseline median %g: exit %d, %+v (%s)", c.median, code, rep.Compared, errs)
		}
		if c.flagged && !strings.Contains(errs, "regression flagged") {
			t.Errorf("stderr %q does not say why", errs)
		}
	}
}

// Bad flags and bad baselines are refused, naming what is wrong.
func TestBenchSuiteRejects(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"results":[{"name":"x","median":0}]}`), 0o644)
	unknown := filepath.Join(dir, "unknown.json")
	os.WriteFile(unknown, []byte(`{"resultz":[]}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--count", "0"}, "--count 0"},
		{[]string{"--count", "51"}, "--count 51"},
		{[]string{"--case", "nope"}, `unknown case "nope"`},
		{[]string{"--threshold", "0"}, "--threshold"},
		{[]string{"-o", "xml"}, `"xml"`},
		{[]string{"--baseline", bad, "--against", "HEAD"}, "exclusive"},
		{[]string{"--case", suiteCase1, "--baseline", bad}, "results[0]: a name and a median above 0"},
		{[]string{"--case", suiteCase1, "--baseline", unknown}, `unknown field "resultz"`},
		{[]string{"--case", suiteCase1, "--baseline", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"--case", suiteCase1, "--against", "--upload-pack=x"}, "not a revision"},
	} {
		var out, errb bytes.Buffer
		if code := Main(append([]string{"bench", "suite"}, c.args...), &out, &errb); code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want it to say %q", c.args, code, errb.String(), c.want)
		}
	}
}

// Side by side with the checkout's own HEAD, built in a temporary
// worktree: each pair's ratio is reported, and the same code is not
// flagged at a threshold wider than this machine's noise.
func TestBenchSuiteAgainstHEAD(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a revision")
	}
	for _, tool := range []string{"git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	if err := exec.Command("git", "rev-parse", "--verify", "HEAD").Run(); err != nil {
		t.Skipf("not in a git checkout with a HEAD: %v", err)
	}
	rep, errs, code := suiteJSON(t, "--case", suiteCase1, "--count", "3", "--against", "HEAD", "--threshold", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	c := rep.Compared
	if c == nil || c.Against != "HEAD" || len(c.Ratios) != 1 || c.Flagged != 0 {
		t.Fatalf("compared %+v", c)
	}
	if x := c.Ratios[0]; x.Median <= 0 || x.Min > x.Median || x.Max < x.Median {
		t.Errorf("ratio %+v", x)
	}
	if len(rep.Results) != 1 || len(rep.Results[0].Samples) != 3 {
		t.Errorf("results %+v", rep.Results)
	}
	out, _ := exec.Command("git", "worktree", "list").Output()
	if strings.Contains(string(out), "arbiter-bench-") {
		t.Errorf("temporary worktree left behind:\n%s", out)
	}
}

func FuzzReadSuite(f *testing.F) {
	f.Add([]byte(`{"results":[{"name":"a","median":1}]}`))
	f.Add([]byte(`{"results":[{"name":"","median":-1}]}`))
	f.Add([]byte(`{"commit":"x","results":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		file := filepath.Join(t.TempDir(), "b.json")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := readSuite(file)
		if err != nil {
			if !strings.Contains(err.Error(), file) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, r := range rep.Results {
			if r.Name == "" || r.Median <= 0 {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}

// The openb replay case runs from the repository root, where the trace
// is (beside ../shared); from a folder without it the case is skipped,
// saying why, and the suite goes on.
func TestBenchSuiteOpenB(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, DefaultOpenBTraceDir)); err != nil {
		t.Skipf("no openb trace beside the checkout: %v", err)
	}
	t.Chdir(root)
	rep, errs, code := suiteJSON(t, "--case", "openb/default/fgd,"+suiteCase1, "--count", "1")
	if code != 0 || len(rep.Results) != 2 || rep.Results[0].Name != "openb/default/fgd" || rep.Results[0].Median <= 0 {
		t.Fatalf("exit %d, %+v (%s)", code, rep.Results, errs)
	}
	t.Chdir(t.TempDir())
	rep, errs, code = suiteJSON(t, "--case", "openb/default/fgd,"+suiteCase1, "--count", "1")
	if code != 0 || len(rep.Results) != 1 || rep.Results[0].Name != suiteCase1 || !strings.Contains(errs, "openb/default/fgd: skipped: no openb trace") {
		t.Fatalf("without the trace: exit %d, %+v (%s)", code, rep.Results, errs)
	}
}

// TestBenchSuiteServer runs the server case as the suite does (a real
// server, submissions over HTTP, one cycle), once: it places work or
// fails, and a submission the server refuses fails the run.
func TestBenchSuiteServer(t *testing.T) {
	rep, errs, code := suiteJSON(t, "--case", "server/nodes=1000/submit-mixed-1000", "--count", "1")
	if code != 0 || len(rep.Results) != 1 || rep.Results[0].Median <= 0 {
		t.Fatalf("exit %d, %+v (%s)", code, rep.Results, errs)
	}
	op, err := serverSubmit(100, 20)()
	if err != nil {
		t.Fatal(err)
	}
	if err := op(); err != nil {
		t.Fatal(err)
	}
	// A submission the API refuses (a GPU model the fleet lacks) is the
	// run's error, not a sample.
	m, err := schedbench.NewMixed(100, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("mixed.yaml", []byte(m.Config()))
	if err != nil {
		t.Fatal(err)
	}
	ws := m.Draw(3)
	specs := []api.WorkloadSpec{schedbench.Submission(ws[0]), schedbench.Submission(ws[1]), schedbench.Submission(ws[2])}
	specs[1].Flavors = []string{"no-such-gpu"}
	if err := serveOnce(cfg, ws, specs); err == nil || !strings.Contains(err.Error(), string(ws[1].Name)) {
		t.Errorf("a refused submission: %v", err)
	}
}
