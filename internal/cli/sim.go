package cli

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/examples"
	"github.com/arbiterhq/arbiter/internal/sim"
)

func newSimCmd() *cobra.Command {
	var (
		scenario, strategies, out, output string
		seedList, cpuProfile, traceDir    string
		days, scale                       float64
		seed                              uint64
		printScenario, allClasses         bool
		jobs                              int
	)
	cmd := &cobra.Command{
		Use:   "sim [--scenario FILE] [--strategies static,dynamic,hybrid] [--days N] [--seed S | --seeds 1-10] [--out DIR] [-o table|json] [--all-classes]",
		Short: "Simulate strategies over a scenario and compare them",
		Long: `Replays a scenario (by default the embedded "contention" scenario: ~9,400 GPUs
in three regions shared by internal AI work and cloud customers) under each
strategy and prints the comparison. Writes DIR/results.json, DIR/<strategy>.csv
time series and DIR/report.html.

Strategies are names of the built-in files (static, dynamic, hybrid; see
examples/strategies/) or paths to your own strategy files.

The table shows the headline metrics and, per class of the scenario's
classes section, those an operator promises something to (sla,
reservation, slo); --all-classes shows every class. docs/metrics.md
defines every metric.

With --seeds, every strategy runs on each seed (-j at a time) and the table
gives each metric's mean ± 95% confidence interval, marking the best only
where Welch's t-test finds it significantly better than every other
strategy; DIR/results.json then carries each metric's mean, ci95 and n per
strategy and the per-seed runs, and DIR/seed-N/ each seed's own outputs.
"arbiter sim tune" searches a strategy's knobs (docs/sim-seeds.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printScenario {
				_, err := cmd.OutOrStdout().Write(sim.ContentionYAML())
				return err
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			defer simGC()()
			sc, err := loadScenario(scenario, traceDir)
			if err != nil {
				return err
			}
			if scale > 0 && scale != 1 {
				sc = sc.Scale(scale)
			}
			names := sc.Strategies
			if strategies != "" {
				names = strings.Split(strategies, ",")
			}
			if len(names) == 0 {
				return errors.New("sim: no strategies: pass --strategies")
			}
			var sts []*sim.Strategy
			for _, n := range names {
				st, err := loadStrategy(strings.TrimSpace(n))
				if err != nil {
					return err
				}
				sts = append(sts, st)
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("unknown output format %q: use table or json", output)
			}
			duration := sc.Duration
			if days > 0 {
				duration = time.Duration(days * 24 * float64(time.Hour))
			}
			if seedList != "" {
				if cmd.Flags().Changed("seed") {
					return errors.New("sim: --seed and --seeds are exclusive: pass one")
				}
				seeds, err := sim.ParseSeeds(seedList)
				if err != nil {
					return err
				}
				return runSeeds(cmd, sc, sts, seeds, duration, jobs, out, output)
			}
			hours := int(duration.Hours())
			bar := newProgress(cmd.ErrOrStderr(), hours*len(sts))
			res := &sim.Results{Scenario: sc.Name, Seed: seed, Days: duration.Hours() / 24, Strategies: make([]*sim.StrategyResult, len(sts))}
			errs := make([]error, len(sts))
			var wg sync.WaitGroup
			if jobs <= 0 {
				jobs = len(sts)
			}
			sem := make(chan struct{}, jobs)
			for i, st := range sts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sem <- struct{}{}
					defer func() { <-sem }()
					s, err := sim.New(sc, st, sim.Options{Seed: seed, Duration: duration, Progress: func(time.Duration, time.Duration) { bar.step() }})
					if err != nil {
						errs[i] = err
						return
					}
					res.Strategies[i] = s.Run()
					if i == 0 {
						res.GPUs = s.GPUs()
					}
				}()
			}
			wg.Wait()
			bar.done()
			if err := errors.Join(errs...); err != nil {
				return err
			}
			if err := writeSimOutputs(out, res); err != nil {
				return err
			}
			if output == "json" {
				return res.WriteJSON(cmd.OutOrStdout())
			}
			writeSimTable(cmd.OutOrStdout(), res, allClasses)
			fmt.Fprintf(cmd.OutOrStdout(), "\nwrote %s\n", strings.Join(simFiles(out, res), ", "))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenario, "scenario", "", "scenario file (default: the embedded contention scenario)")
	f.StringVar(&traceDir, "trace-dir", "", traceDirUsage)
	f.StringVar(&strategies, "strategies", "", "comma-separated strategy names or files (default: the scenario's list)")
	f.Float64Var(&days, "days", 0, "simulated days (default: the scenario's duration)")
	f.Uint64Var(&seed, "seed", 1, "random seed")
	f.StringVar(&seedList, "seeds", "", `run every strategy on each seed ("1-10", "1,3,5", "1-3,7") and report mean and 95% CI per metric`)
	f.StringVarP(&out, "out", "", "arbiter-out", "output directory")
	f.StringVarP(&output, "output", "o", "table", "output format: table or json")
	f.BoolVar(&printScenario, "print-scenario", false, "print the embedded scenario and exit")
	f.BoolVar(&allClasses, "all-classes", false, "show every class of the scenario in the table (default: the classes with a promise)")
	f.IntVarP(&jobs, "jobs", "j", 0, "runs simulated in parallel (0: all strategies; with --seeds, GOMAXPROCS)")
	f.Float64Var(&scale, "scale", 1, "multiply the scenario's machines and load by this factor")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	cmd.AddCommand(newSimTuneCmd())
	return cmd
}

// loadStrategy reads a built-in strategy by name, or a strategy file.
func loadStrategy(name string) (*sim.Strategy, error) {
	if strings.HasSuffix(name, ".yaml") || strings.ContainsRune(name, os.PathSeparator) {
		return sim.LoadStrategyFile(name)
	}
	st, err := sim.LoadStrategy(examples.FS, "strategies/"+name)
	if err != nil {
		return nil, fmt.Errorf("sim: unknown strategy %q: use static, dynamic, hybrid or a file.yaml", name)
	}
	return st, nil
}

func simFiles(dir string, res *sim.Results) []string {
	files := []string{filepath.Join(dir, "report.html"), filepath.Join(dir, "results.json"), filepath.Join(dir, "cost.csv")}
	for _, s := range res.Strategies {
		files = append(files, filepath.Join(dir, s.Strategy+".csv"))
	}
	return files
}

func writeSimOutputs(dir string, res *sim.Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(name string, fn func(io.Writer) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := write("results.json", res.WriteJSON); err != nil {
		return err
	}
	for _, s := range res.Strategies {
		if err := write(s.Strategy+".csv", s.WriteCSV); err != nil {
			return err
		}
	}
	if err := write("cost.csv", func(w io.Writer) error { return writeSimCost(w, res) }); err != nil {
		return err
	}
	return write("report.html", res.WriteHTML)
}

// writeSimTable prints the comparison (sim.Results.Rows): the headline
// metrics, then the classes with a promise (every class with all).
func writeSimTable(w io.Writer, res *sim.Results, all bool) {
	fmt.Fprintf(w, "scenario %s, %.0f days, %d GPUs, seed %d\n\n", res.Scenario, res.Days, res.GPUs, res.Seed)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "METRIC")
	for _, s := range res.Strategies {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(s.Strategy))
	}
	fmt.Fprintln(tw)
	for _, row := range res.Rows(all) {
		fmt.Fprint(tw, row.Label)
		for _, c := range row.Cells {
			fmt.Fprintf(tw, "\t%s", c)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if all {
		return
	}
	var hidden []string
	for _, c := range res.ClassOrder() {
		if !c.Promise.Promised() {
			hidden = append(hidden, c.Display)
		}
	}
	if len(hidden) > 0 {
		fmt.Fprintf(w, "\nclasses without a promise, not shown (--all-classes shows them): %s\n", strings.Join(hidden, ", "))
	}
}

// writeSimCost writes cost.csv: each strategy's cost report (GPU-hours
// and cost by tenant, kind, region and SKU, then its total), from the
// same metering code as arbiter cost report, a strategy column first.
func writeSimCost(w io.Writer, res *sim.Results) error {
	cw := csv.NewWriter(w)
	for i, s := range res.Strategies {
		for j, row := range s.Cost.CSVRows() {
			if j == 0 && i > 0 {
				continue // one header
			}
			v := s.Strategy
			if j == 0 {
				v = "strategy"
			}
			if err := cw.Write(append([]string{v}, row...)); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
