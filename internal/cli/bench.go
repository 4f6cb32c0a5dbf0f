package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/openb"
	"github.com/arbiterhq/arbiter/internal/sched/score"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run reproducible benchmarks against published results",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newBenchOpenBCmd(), newBenchSuiteCmd())
	return cmd
}

// DefaultOpenBTraceDir is where `arbiter bench openb` looks for the trace by
// default, relative to the working directory: beside the checkout, where
// `scripts/fetch-traces.sh ../shared/traces` puts it.
const DefaultOpenBTraceDir = "../shared/traces/alibaba-gpu-v2023"

type benchOpenBFlags struct {
	traceDir    string
	expectedDir string
	workload    string
	policy      string
	seeds       string
	output      string
	jobs        int
}

func newBenchOpenBCmd() *cobra.Command {
	var f benchOpenBFlags
	cmd := &cobra.Command{
		Use:   "openb",
		Short: "Replay the Alibaba openb GPU trace as the FGD paper (ATC'23) did and compare with its results",
		Long: `Replay the Alibaba cluster-trace-gpu-v2023 ("openb") pod lists in the FGD paper's
paper-compatible mode: per seed, the shuffled trace followed by pods drawn with
replacement until the requested GPUs reach 1.3x the cluster's GPU capacity, placed
one at a time, nothing departs, a pod that fits nowhere fails. The GPU allocation
ratio is recorded at each 1% of arrived demand.

The table shows, per workload and policy, the mean over the seeds of the
allocation at 100% and 130% arrived demand and the unallocated GPUs at 130%,
ours beside the published mean (when the expected-results folder is present),
and the largest deviation from the published row of the same seed over all
columns 0..130.`,
		Example: `  arbiter bench openb
  arbiter bench openb --workload default --policy fgd,arbiter --seeds 42-51
  arbiter bench openb --workload all --policy all -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchOpenB(cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.traceDir, "trace-dir", DefaultOpenBTraceDir, "folder with openb_node_list_gpu_node.csv and openb_pod_list_*.csv")
	fl.StringVar(&f.expectedDir, "expected-dir", "", "folder with the published analysis_allo_discrete.csv (default: fgd-expected-results beside the trace folder)")
	fl.StringVar(&f.workload, "workload", "all", "workload name (default, cpu050, ...), comma-separated names, or all")
	fl.StringVar(&f.policy, "policy", "all", "policy ("+strings.Join(score.Names(), ", ")+"), comma-separated names, or all")
	fl.StringVar(&f.seeds, "seeds", "42-51", "seeds: N, N-M, or a comma-separated list of both")
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	fl.IntVarP(&f.jobs, "jobs", "j", runtime.GOMAXPROCS(0), "runs in parallel")
	return cmd
}

// benchRow is one run in JSON output.
type benchRow struct {
	Workload             string   `json:"workload"`
	Policy               string   `json:"policy"`
	Seed                 int64    `json:"seed"`
	AllocPctAt100        *float64 `json:"alloc_pct_at_100"`
	AllocPctAt130        *float64 `json:"alloc_pct_at_130"`
	UnallocatedGPUsAt130 *float64 `json:"unallocated_gpus_at_130"`
}

type benchJob struct {
	workload *openb.Workload
	policy   string
	seed     int64
}

func runBenchOpenB(stdout, stderr io.Writer, f benchOpenBFlags) error {
	if f.output != "table" && f.output != "json" {
		return fmt.Errorf("unknown output format %q (want table or json)", f.output)
	}
	seeds, err := parseSeeds(f.seeds)
	if err != nil {
		return err
	}
	policies, err := parsePolicies(f.policy)
	if err != nil {
		return err
	}
	cluster, err := openb.LoadCluster(f.traceDir)
	if err != nil {
		return fmt.Errorf("bench openb: %w", noTrace(err, "pass --trace-dir with "+openbFolder))
	}
	names, err := parseWorkloads(f.traceDir, f.workload)
	if err != nil {
		return err
	}
	workloads := make([]*openb.Workload, len(names))
	for i, n := range names {
		if workloads[i], err = openb.LoadWorkload(f.traceDir, n); err != nil {
			return fmt.Errorf("bench openb: %w", err)
		}
	}
	expectedDir := f.expectedDir
	if expectedDir == "" {
		expectedDir = openb.ExpectedDir(f.traceDir)
	}
	published, err := openb.ReadPublished(expectedDir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) || f.expectedDir != "" {
			return fmt.Errorf("bench openb: published results: %w", noTrace(err, "pass --expected-dir with "+expectedFolder))
		}
		published = openb.PublishedSet{}
	}

	var jobs []benchJob
	for _, w := range workloads {
		for _, p := range policies {
			for _, s := range seeds {
				jobs = append(jobs, benchJob{w, p, s})
			}
		}
	}
	start := time.Now()
	results, err := runBenchJobs(cluster, jobs, max(f.jobs, 1), newProgress(stderr, len(jobs)))
	if err != nil {
		return err
	}
	elapsed := time.Since(start)

	if f.output == "json" {
		rows := make([]benchRow, len(jobs))
		for i, j := range jobs {
			c := results[i].Curve
			rows[i] = benchRow{Workload: j.workload.Name, Policy: j.policy, Seed: j.seed,
				AllocPctAt100: num(c[100]), AllocPctAt130: num(c[130]),
				UnallocatedGPUsAt130: num(round2(openb.UnallocatedGPUs(c[130], cluster.GPUs)))}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	writeBenchTable(stdout, cluster, jobs, results, published)
	fmt.Fprintf(stdout, "\n%d runs (%d workloads x %d policies x %d seeds) in %.1fs on %d workers\n",
		len(jobs), len(workloads), len(policies), len(seeds), elapsed.Seconds(), max(f.jobs, 1))
	return nil
}

// runBenchJobs runs the replays on a pool of workers; each replay is itself
// sequential and deterministic, so the results do not depend on the pool.
func runBenchJobs(c *openb.Cluster, jobs []benchJob, workers int, prog *progress) ([]*openb.Result, error) {
	results := make([]*openb.Result, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				results[i], errs[i] = openb.Run(c, j.workload, j.policy, j.seed)
				prog.step()
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	prog.done()
	return results, errors.Join(errs...)
}

func writeBenchTable(w io.Writer, c *openb.Cluster, jobs []benchJob, results []*openb.Result, pub openb.PublishedSet) {
	type agg struct {
		ours100, ours130, pub100, pub130 []float64
		dev                              float64
		devOK                            bool
	}
	type key struct{ workload, policy string }
	var order []key
	aggs := map[key]*agg{}
	for i, j := range jobs {
		k := key{j.workload.Name, j.policy}
		a, ok := aggs[k]
		if !ok {
			a = &agg{}
			aggs[k] = a
			order = append(order, k)
		}
		curve := results[i].Curve
		a.ours100 = append(a.ours100, curve[100])
		a.ours130 = append(a.ours130, curve[130])
		if p := pub[openb.PublishedKey{Workload: j.workload.Name, Policy: j.policy, Seed: j.seed}]; p != nil {
			a.pub100 = append(a.pub100, p.Curve[100])
			a.pub130 = append(a.pub130, p.Curve[130])
			d, _ := openb.MaxAbsDev(curve, p.Curve)
			a.dev = math.Max(a.dev, d)
			a.devOK = true
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tPOLICY\tSEEDS\tALLOC@100%\tPUBLISHED\tALLOC@130%\tPUBLISHED\tIDLE GPUS@130%\tPUBLISHED\tMAX |DEV| 0..130\t")
	last := ""
	for _, k := range order {
		a := aggs[k]
		wl := k.workload
		if wl == last {
			wl = ""
		}
		last = k.workload
		pubIdle := "-"
		if len(a.pub130) > 0 {
			pubIdle = fmt.Sprintf("%.0f", openb.UnallocatedGPUs(mean(a.pub130), c.GPUs))
		}
		dev := "-"
		if a.devOK {
			dev = fmt.Sprintf("%.2f", a.dev)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t\n", wl, k.policy, len(a.ours130),
			pct(mean(a.ours100)), pctOrDash(a.pub100), pct(mean(a.ours130)), pctOrDash(a.pub130),
			openb.UnallocatedGPUs(mean(a.ours130), c.GPUs), pubIdle, dev)
	}
	tw.Flush()
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func pctOrDash(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return pct(mean(v))
}

func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// parseSeeds reads "42-51", "42" or "42,45,50-51".
func parseSeeds(s string) ([]int64, error) {
	var out []int64
	seen := map[int64]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad --seeds %q: %q is not a seed or range", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(strings.TrimSpace(hi), 10, 64); err != nil || b < a || b-a > 100000 {
				return nil, fmt.Errorf("bad --seeds %q: %q is not a range N-M with N <= M", s, part)
			}
		}
		for x := a; x <= b; x++ {
			if !seen[x] {
				seen[x] = true
				out = append(out, x)
			}
		}
	}
	return out, nil
}

func parsePolicies(s string) ([]string, error) {
	if strings.TrimSpace(strings.ToLower(s)) == "all" {
		return score.Names(), nil
	}
	known := map[string]bool{}
	for _, n := range score.Names() {
		known[n] = true
	}
	var out []string
	for _, part := range strings.Split(s, ",") {
		n := score.Canonical(part)
		if !known[n] {
			return nil, fmt.Errorf("unknown policy %q (known: %s, all)", part, strings.Join(score.Names(), ", "))
		}
		out = append(out, n)
	}
	return out, nil
}

func parseWorkloads(dir, s string) ([]string, error) {
	all, err := openb.Workloads(dir)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("bench openb: no %s*.csv in %s: pass --trace-dir with %s", openb.PodFilePrefix, dir, openbFolder)
	}
	if strings.TrimSpace(strings.ToLower(s)) == "all" {
		return all, nil
	}
	var out []string
	for _, part := range strings.Split(s, ",") {
		n := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(part), openb.PodFilePrefix), ".csv")
		i := sort.SearchStrings(all, n)
		if i == len(all) || all[i] != n {
			return nil, fmt.Errorf("unknown workload %q in %s (known: %s, all)", part, dir, strings.Join(all, ", "))
		}
		out = append(out, n)
	}
	return out, nil
}

// progress draws a bar on stderr when stderr is a terminal.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	total int
	n     int
	start time.Time
}

func newProgress(stderr io.Writer, total int) *progress {
	f, ok := stderr.(*os.File)
	if !ok {
		return nil
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	p := &progress{w: stderr, total: total, start: time.Now()}
	p.draw()
	return p
}

func (p *progress) step() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	p.draw()
}

func (p *progress) draw() {
	const width = 30
	fill := 0
	if p.total > 0 {
		fill = p.n * width / p.total
	}
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d runs %.0fs", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
		p.n, p.total, time.Since(p.start).Seconds())
}

func (p *progress) done() {
	if p == nil {
		return
	}
	fmt.Fprint(p.w, "\r\033[K")
}
