package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/openb"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/sched/schedbench"
	"github.com/arbiterhq/arbiter/internal/sim"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// A suiteCase is one benchmark of `arbiter bench suite`: setup builds its
// input outside the timer and returns the operation timed, in ms per run.
type suiteCase struct {
	Name  string
	Short bool // in --short
	What  string
	setup func() (func() error, error)
}

func suiteCases() []suiteCase {
	cycle := func(nodes int, build func(n int) (sched.Input, error)) func() (func() error, error) {
		return func() (func() error, error) {
			in, err := build(nodes)
			if err != nil {
				return nil, err
			}
			in.Cache = nil // a cycle from scratch, as the Go benchmarks time it
			return func() error { sched.Schedule(in); return nil }, nil
		}
	}
	singleGPU := func(n int) (sched.Input, error) {
		f, tree, err := schedbench.Fleet(n)
		return sched.Input{Now: schedbench.T0, Fleet: f, Tenants: tree,
			Workloads: schedbench.Workloads(min(100_000, n*8), "s", "ai", 1, 1, workload.PriorityNormal, workload.TopologyAny)}, err
	}
	preempt := func(n int) (sched.Input, error) {
		f, tree, err := schedbench.Fleet(n)
		if err != nil {
			return sched.Input{}, err
		}
		ws := append(schedbench.FullOfBatch(f), schedbench.Workloads(1, "G", "ai", 8, 32, workload.PriorityHigh, workload.TopologySameBlock)...)
		return sched.Input{Now: schedbench.T0, Fleet: f, Tenants: tree, Workloads: ws}, nil
	}
	backfill := func(n int) (sched.Input, error) {
		f, tree, err := schedbench.Fleet(n)
		if err != nil {
			return sched.Input{}, err
		}
		in := sched.Input{Now: schedbench.T0, Fleet: f, Tenants: tree, Workloads: schedbench.Backfill(f)}
		in.Options.Planning = sched.DefaultPlanning()
		in.Options.Planning.Depth = 20
		in.Options.TerseReasons = true
		return in, nil
	}
	simRun := func(strategy string, days float64) func() (func() error, error) {
		return func() (func() error, error) {
			sc, err := sim.LoadScenario("")
			if err != nil {
				return nil, err
			}
			st, err := loadStrategy(strategy)
			if err != nil {
				return nil, err
			}
			return func() error {
				s, err := sim.New(sc, st, sim.Options{Seed: 1, Duration: time.Duration(days * 24 * float64(time.Hour))})
				if err != nil {
					return err
				}
				s.Run()
				return nil
			}, nil
		}
	}
	mixed := func() (func() error, error) {
		m, err := schedbench.NewMixed(10000, 200_000, 1)
		if err != nil {
			return nil, err
		}
		in := sched.Input{Now: schedbench.T0, Fleet: m.Fleet, Tenants: m.Tenants, Workloads: append(slices.Clip(m.Running), m.Pending...)}
		in.Options.Planning = sched.DefaultPlanning()
		in.Options.TerseReasons = true
		return func() error { sched.Schedule(in); return nil }, nil
	}
	replay := func() (func() error, error) {
		c, err := openb.LoadCluster(DefaultOpenBTraceDir)
		if errors.Is(err, os.ErrNotExist) {
			return nil, skipCase(fmt.Sprintf("no openb trace at %s (run from the repository root, beside ../shared)", DefaultOpenBTraceDir), err)
		}
		if err != nil {
			return nil, err // a trace that is there but does not read is an error, not a skip
		}
		w, err := openb.LoadWorkload(DefaultOpenBTraceDir, "default")
		if err != nil {
			return nil, err
		}
		return func() error { _, err := openb.Run(c, w, "fgd", 42); return err }, nil
	}
	return []suiteCase{
		{Name: "sched/nodes=1000/single-gpu", Short: true, What: "cycle placing 8,000 one-GPU workloads on 1,000 empty nodes", setup: cycle(1000, singleGPU)},
		{Name: "sched/nodes=1000/gang-256-preempt", Short: true, What: "cycle placing a 32 × 8-GPU gang by preemption on 1,000 full nodes", setup: cycle(1000, preempt)},
		{Name: "sched/nodes=10000/single-gpu", What: "cycle placing 80,000 one-GPU workloads on 10,000 empty nodes", setup: cycle(10000, singleGPU)},
		{Name: "sched/nodes=10000/gang-256-preempt", What: "cycle placing a 32 × 8-GPU gang by preemption on 10,000 full nodes", setup: cycle(10000, preempt)},
		{Name: "sched/nodes=10000/backfill", What: "cycle planning 20 gangs over 100,000 pending (BenchmarkSchedule's backfill)", setup: cycle(10000, backfill)},
		{Name: "sched/nodes=10000/mixed-200k", What: "cycle from scratch over BenchmarkScheduleMixed's 200,000 mixed pending workloads on 10,000 nodes", setup: mixed},
		{Name: "sim/hybrid/1d", Short: true, What: "arbiter sim --strategies hybrid --days 1 (embedded scenario, seed 1)", setup: simRun("hybrid", 1)},
		{Name: "sim/dynamic/3d", What: "arbiter sim --strategies dynamic --days 3 (embedded scenario, seed 1)", setup: simRun("dynamic", 3)},
		{Name: "server/nodes=1000/submit-mixed-1000", Short: true, What: "a server on bbolt and loopback HTTP: 1,000 of the mixed queue's workloads submitted by 16 clients, then the cycle that places them (start to shutdown)", setup: serverSubmit(1000, 1000)},
		{Name: "openb/default/fgd", Short: true, What: "arbiter bench openb --workload default --policy fgd --seeds 42 (one replay of the Alibaba openb trace)", setup: replay},
	}
}

// errSkip marks a case that cannot run here (its data is missing): the
// suite says so and goes on without it.
type errSkip struct {
	why string
	err error
}

func (e *errSkip) Error() string { return e.why + ": " + e.err.Error() }
func (e *errSkip) Unwrap() error { return e.err }

func skipCase(why string, err error) error { return &errSkip{why: why, err: err} }

// skipped reports (on stderr) whether err says case c cannot run here.
func skipped(stderr io.Writer, c suiteCase, err error) bool {
	var skip *errSkip
	if errors.As(err, &skip) {
		fmt.Fprintf(stderr, "%s: skipped: %s\n", c.Name, skip.why)
		return true
	}
	return false
}

// SuiteResult is one case's measurement: each sample is the wall time of
// one run in milliseconds.
type SuiteResult struct {
	Name    string    `json:"name"`
	What    string    `json:"what"`
	Unit    string    `json:"unit"`
	Samples []float64 `json:"samples"`
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
}

// SuiteReport is what `arbiter bench suite -o json` writes.
type SuiteReport struct {
	Commit  string        `json:"commit"`
	Go      string        `json:"go"`
	OS      string        `json:"os"`
	Arch    string        `json:"arch"`
	CPUs    int           `json:"cpus"`
	Started time.Time     `json:"started"`
	Results []SuiteResult `json:"results"`
	// Compared is set with --baseline or --against.
	Compared *SuiteComparison `json:"compared,omitempty"`
}

// SuiteComparison is each case's ratio to the baseline (above 1: slower).
type SuiteComparison struct {
	Against   string       `json:"against"` // the baseline file or revision
	Threshold float64      `json:"threshold"`
	Ratios    []SuiteRatio `json:"ratios"`
	Flagged   int          `json:"flagged"`
}

// SuiteRatio compares one case. Side by side (--against), each sample of
// this build is divided by the other build's sample run next to it: Min
// and Max are the spread of those ratios and a case is flagged only when
// the median passes the threshold and every ratio is above 1 (slower in
// every pair, not by the noise). Against a stored baseline, Median is the
// ratio of medians.
type SuiteRatio struct {
	Name    string  `json:"name"`
	Median  float64 `json:"median"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Flagged bool    `json:"flagged"`
}

type suiteFlags struct {
	short     bool
	cases     string
	count     int
	output    string
	out       string
	baseline  string
	against   string
	threshold float64
}

// errRegression makes the exit code say a case was flagged.
var errRegression = errors.New("bench suite: regression flagged")

func newBenchSuiteCmd() *cobra.Command {
	var f suiteFlags
	cmd := &cobra.Command{
		Use:   "suite",
		Short: "Run the project's benchmark set; compare with a baseline or another revision",
		Long: `Runs the benchmark set (scheduling cycles of the core on the Go benchmarks'
worlds, simulator runs on the embedded scenario, a server taking submissions
over HTTP, and a replay of the openb trace), each --count times after a warm-up
run, and prints each case's median, min and max wall time per run in ms. -o json writes
one JSON document with the results, the environment and the commit.

--baseline FILE compares with a stored document (ratios of medians).
--against REV builds REV in a temporary git worktree and runs both builds
interleaved, one sample of each in turn (alternating which goes first; REV's
in a process of its own per sample, which needs REV to have this command):
each ratio is this build's sample over REV's next to it, reported as the
median and spread of the ratios. A case whose median ratio is above
1 + --threshold (and, side by side, whose every ratio is above 1) is
flagged, and the command exits with status 1.

bench/baseline.json in the repository was written by
  arbiter bench suite --count 5 -o json --out bench/baseline.json
and docs/perf.md explains the output.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSuite(cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	cmd.Flags().BoolVar(&f.short, "short", false, "run the short cases only (about a minute)")
	cmd.Flags().StringVar(&f.cases, "case", "", "comma-separated case names to run (default: all, or the short ones)")
	cmd.Flags().IntVar(&f.count, "count", 3, "samples per case (1–50)")
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	cmd.Flags().StringVar(&f.out, "out", "", "also write the JSON document to this file")
	cmd.Flags().StringVar(&f.baseline, "baseline", "", "compare with this stored JSON document")
	cmd.Flags().StringVar(&f.against, "against", "", "build this git revision and compare side by side")
	cmd.Flags().Float64Var(&f.threshold, "threshold", 0.2, "flag a case more than this fraction slower")
	return cmd
}

func runSuite(stdout, stderr io.Writer, f suiteFlags) error {
	if f.count < 1 || f.count > 50 {
		return fmt.Errorf("bench suite: --count %d: between 1 and 50", f.count)
	}
	if f.output != "table" && f.output != "json" {
		return fmt.Errorf("bench suite: unknown output format %q: use table or json", f.output)
	}
	if f.threshold <= 0 || f.threshold > 10 {
		return fmt.Errorf("bench suite: --threshold %g: above 0, at most 10", f.threshold)
	}
	if f.baseline != "" && f.against != "" {
		return errors.New("bench suite: --baseline and --against are exclusive: pass one")
	}
	cases, err := selectCases(f)
	if err != nil {
		return err
	}
	defer simGC()()
	rep := SuiteReport{Commit: buildCommit(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Started: time.Now().UTC()}
	switch {
	case f.against != "":
		other, cleanup, err := buildRevision(stderr, f.against)
		if err != nil {
			return err
		}
		defer cleanup()
		rep.Results, rep.Compared, err = sideBySide(stderr, cases, f, other)
		if err != nil {
			return err
		}
	default:
		for _, c := range cases {
			r, err := measure(stderr, c, f.count)
			if skipped(stderr, c, err) {
				continue
			}
			if err != nil {
				return err
			}
			rep.Results = append(rep.Results, r)
		}
		if f.baseline != "" {
			base, err := readSuite(f.baseline)
			if err != nil {
				return err
			}
			rep.Compared = compareBaseline(rep.Results, base, f)
		}
	}
	if f.out != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(f.out, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("bench suite: --out: %w", err)
		}
	}
	if f.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		writeSuiteTable(stdout, rep)
	}
	if rep.Compared != nil && rep.Compared.Flagged > 0 {
		return errRegression
	}
	return nil
}

func selectCases(f suiteFlags) ([]suiteCase, error) {
	all := suiteCases()
	if f.cases == "" {
		if !f.short {
			return all, nil
		}
		return slices.DeleteFunc(all, func(c suiteCase) bool { return !c.Short }), nil
	}
	var out []suiteCase
	for _, name := range strings.Split(f.cases, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(c suiteCase) bool { return c.Name == name })
		if i < 0 {
			names := make([]string, len(all))
			for k, c := range all {
				names[k] = c.Name
			}
			return nil, fmt.Errorf("bench suite: --case: unknown case %q (cases: %s)", name, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// measure runs c count times after one warm-up run and summarises the
// wall times.
func measure(stderr io.Writer, c suiteCase, count int) (SuiteResult, error) {
	op, err := c.setup()
	if err != nil {
		return SuiteResult{}, fmt.Errorf("bench suite: %s: %w", c.Name, err) // errSkip stays visible to errors.As
	}
	if err := op(); err != nil { // warm-up
		return SuiteResult{}, fmt.Errorf("bench suite: %s: %w", c.Name, err)
	}
	r := SuiteResult{Name: c.Name, What: c.What, Unit: "ms"}
	for i := 0; i < count; i++ {
		runtime.GC()
		start := time.Now()
		if err := op(); err != nil {
			return SuiteResult{}, fmt.Errorf("bench suite: %s: %w", c.Name, err)
		}
		r.Samples = append(r.Samples, float64(time.Since(start).Microseconds())/1000)
	}
	summarise(&r)
	fmt.Fprintf(stderr, "%s: %.1f ms\n", c.Name, r.Median)
	return r, nil
}

func summarise(r *SuiteResult) {
	r.Median, r.Min, r.Max = medianOf(r.Samples), slices.Min(r.Samples), slices.Max(r.Samples)
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func readSuite(file string) (*SuiteReport, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("bench suite: --baseline: %w", err)
	}
	var rep SuiteReport
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("bench suite: --baseline %s: %w", file, err)
	}
	for i, r := range rep.Results {
		if r.Name == "" || r.Median <= 0 {
			return nil, fmt.Errorf("bench suite: --baseline %s: results[%d]: a name and a median above 0 are required", file, i)
		}
	}
	return &rep, nil
}

func compareBaseline(cur []SuiteResult, base *SuiteReport, f suiteFlags) *SuiteComparison {
	cmp := &SuiteComparison{Against: f.baseline, Threshold: f.threshold}
	for _, r := range cur {
		i := slices.IndexFunc(base.Results, func(b SuiteResult) bool { return b.Name == r.Name })
		if i < 0 {
			continue // a case the baseline did not run
		}
		ratio := r.Median / base.Results[i].Median
		x := SuiteRatio{Name: r.Name, Median: ratio, Min: ratio, Max: ratio, Flagged: ratio > 1+f.threshold}
		if x.Flagged {
			cmp.Flagged++
		}
		cmp.Ratios = append(cmp.Ratios, x)
	}
	return cmp
}

// buildRevision builds the arbiter binary of git revision rev in a
// temporary worktree of the repository the working directory is in.
func buildRevision(stderr io.Writer, rev string) (string, func(), error) {
	if strings.HasPrefix(rev, "-") {
		return "", nil, fmt.Errorf("bench suite: --against %q: not a revision", rev)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", nil, fmt.Errorf("bench suite: --against needs a git checkout: %w", err)
	}
	root := strings.TrimSpace(string(top))
	dir, err := os.MkdirTemp("", "arbiter-bench-")
	if err != nil {
		return "", nil, err
	}
	tree := filepath.Join(dir, "tree")
	cleanup := func() {
		exec.Command("git", "-C", root, "worktree", "remove", "--force", tree).Run()
		os.RemoveAll(dir)
	}
	if out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", tree, rev).CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("bench suite: --against %s: git worktree add: %v: %s", rev, err, bytes.TrimSpace(out))
	}
	bin := filepath.Join(dir, "arbiter")
	fmt.Fprintf(stderr, "building %s …\n", rev)
	build := exec.Command("go", "build", "-o", bin, "./cmd/arbiter")
	build.Dir = tree
	if out, err := build.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("bench suite: --against %s: go build: %v: %s", rev, err, bytes.TrimSpace(out))
	}
	return bin, cleanup, nil
}

// sideBySide runs each case count times in this build (in this process)
// and in the other binary (a process per sample), one sample each in
// turn, the order alternating, and compares them pair by pair.
func sideBySide(stderr io.Writer, cases []suiteCase, f suiteFlags, other string) ([]SuiteResult, *SuiteComparison, error) {
	cmp := &SuiteComparison{Against: f.against, Threshold: f.threshold}
	var results []SuiteResult
	for _, c := range cases {
		op, err := c.setup()
		if skipped(stderr, c, err) {
			continue
		}
		if err == nil {
			err = op() // warm-up, as the other build's process does
		}
		if err != nil {
			return nil, nil, fmt.Errorf("bench suite: %s: %w", c.Name, err)
		}
		mine := SuiteResult{Name: c.Name, What: c.What, Unit: "ms"}
		var ratios []float64
		for i := 0; i < f.count; i++ {
			var a, b float64
			for k := 0; k < 2; k++ {
				if (k == 0) == (i%2 == 0) {
					runtime.GC()
					start := time.Now()
					if err := op(); err != nil {
						return nil, nil, fmt.Errorf("bench suite: %s: %w", c.Name, err)
					}
					a = float64(time.Since(start).Microseconds()) / 1000
				} else if b, err = oneSample(other, c.Name); err != nil {
					return nil, nil, err
				}
			}
			if b < 0 {
				break // the other build has no such case
			}
			mine.Samples = append(mine.Samples, a)
			ratios = append(ratios, a/b)
		}
		if len(ratios) == 0 {
			fmt.Fprintf(stderr, "%s: not compared: %s has no such case\n", c.Name, f.against)
			continue
		}
		summarise(&mine)
		results = append(results, mine)
		x := SuiteRatio{Name: c.Name, Median: medianOf(ratios), Min: slices.Min(ratios), Max: slices.Max(ratios)}
		x.Flagged = x.Median > 1+f.threshold && x.Min > 1
		if x.Flagged {
			cmp.Flagged++
		}
		cmp.Ratios = append(cmp.Ratios, x)
		fmt.Fprintf(stderr, "%s: ×%.2f (%.2f–%.2f)\n", c.Name, x.Median, x.Min, x.Max)
	}
	return results, cmp, nil
}

// oneSample runs one sample of a case in bin (a process of its own, so
// that neither build's heap or caches favour the other), or returns -1
// when bin has no such case.
func oneSample(bin, name string) (float64, error) {
	var out, errb bytes.Buffer
	c := exec.Command(bin, "bench", "suite", "--case", name, "--count", "1", "-o", "json")
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		if msg := errb.String(); strings.Contains(msg, "unknown case") || strings.Contains(msg, "unknown command") || strings.Contains(msg, "unknown flag") {
			return -1, nil // a revision from before the case or the command
		}
		return 0, fmt.Errorf("bench suite: %s --case %s: %v: %s", bin, name, err, bytes.TrimSpace(errb.Bytes()))
	}
	var rep SuiteReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Results) != 1 || len(rep.Results[0].Samples) != 1 {
		return 0, fmt.Errorf("bench suite: %s --case %s: unexpected output (a revision without this case or this command?)", bin, name)
	}
	return rep.Results[0].Samples[0], nil
}

// buildCommit is the VCS revision the binary was built from, with
// "+dirty" for a modified tree, or "unknown".
func buildCommit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty, from := "", false, ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		// Built without VCS stamping (-buildvcs=false): the working
		// directory's checkout, if any, says so.
		out, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			return "unknown"
		}
		rev, from = strings.TrimSpace(string(out)), " (working directory)"
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			dirty = true
		}
	}
	if dirty {
		rev += "+dirty"
	}
	return rev + from
}

func writeSuiteTable(w io.Writer, rep SuiteReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "case\tmedian ms\tmin\tmax\tn\t"
	if rep.Compared != nil {
		header += "ratio\tspread\t\t"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rep.Results {
		line := fmt.Sprintf("%s\t%.1f\t%.1f\t%.1f\t%d\t", r.Name, r.Median, r.Min, r.Max, len(r.Samples))
		if rep.Compared != nil {
			if i := slices.IndexFunc(rep.Compared.Ratios, func(x SuiteRatio) bool { return x.Name == r.Name }); i >= 0 {
				x := rep.Compared.Ratios[i]
				flag := ""
				if x.Flagged {
					flag = "REGRESSION"
				}
				line += fmt.Sprintf("×%.2f\t%.2f–%.2f\t%s\t", x.Median, x.Min, x.Max, flag)
			} else {
				line += "n/a\t\t\t"
			}
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	fmt.Fprintf(w, "\ncommit %s, %s %s/%s, %d CPUs\n", rep.Commit, rep.Go, rep.OS, rep.Arch, rep.CPUs)
	if c := rep.Compared; c != nil && len(c.Ratios) == 0 {
		fmt.Fprintf(w, "against %s: no case compared\n", c.Against)
	} else if c != nil {
		fmt.Fprintf(w, "against %s: ratio = this build's time over the other's (above 1: slower); flagged above ×%.2f", c.Against, 1+c.Threshold)
		if c.Flagged > 0 {
			fmt.Fprintf(w, "; %d flagged", c.Flagged)
		}
		fmt.Fprintln(w)
	}
}
