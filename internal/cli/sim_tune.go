package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/examples"
	"github.com/arbiterhq/arbiter/internal/sim"
)

// newSimTuneCmd is `arbiter sim tune`: search a strategy's declared knobs
// on tuning seeds, then evaluate the winner against the file as written
// on held-out seeds.
func newSimTuneCmd() *cobra.Command {
	var (
		scenario, strategy, knobs, seedList, evalList, out, traceDir string
		days, scale                                                  float64
		jobs                                                         int
	)
	cmd := &cobra.Command{
		Use:   "tune --strategy NAME --knobs FILE [--seeds 1-5] [--eval-seeds 6-10] [--out FILE]",
		Short: "Search a strategy's knobs on tuning seeds and evaluate the best on others",
		Long: `Searches the knobs a knobs file declares for a strategy (thresholds,
guarantees, caps: paths into the strategy file, or with "policies:" into its
policy file) on the tuning seeds, ranks each setting by the file's objective
among those that meet its constraints, prints every setting tried, then runs
the winner and the file as written on held-out seeds (default: the five after
the tuning seeds) and writes the tuned strategy to --out. See
examples/knobs/ and docs/sim-seeds.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			defer simGC()()
			if strategy == "" || knobs == "" {
				return errors.New("sim tune: pass --strategy NAME and --knobs FILE")
			}
			data, err := os.ReadFile(knobs)
			if err != nil {
				return fmt.Errorf("sim tune: --knobs: %w", err)
			}
			kf, err := sim.ParseKnobs(knobs, data)
			if err != nil {
				return err
			}
			src, err := strategySource(strategy)
			if err != nil {
				return err
			}
			base, err := sim.ParseStrategy(src.File, src.Data)
			if err != nil {
				return err
			}
			if kf.Strategy != base.Name {
				return fmt.Errorf("sim tune: %s: strategy: the knobs are for %q, --strategy is %q", knobs, kf.Strategy, base.Name)
			}
			seeds, err := sim.ParseSeeds(seedList)
			if err != nil {
				return err
			}
			evalSeeds := sim.DefaultEvalSeeds(seeds)
			if evalList != "" {
				if evalSeeds, err = sim.ParseSeedsFlag("--eval-seeds", evalList); err != nil {
					return err
				}
			}
			if s, ok := sim.Overlap(seeds, evalSeeds); ok {
				return fmt.Errorf("sim tune: seed %d is in both --seeds and --eval-seeds: held-out seeds must be others", s)
			}
			sc, err := loadScenario(scenario, traceDir)
			if err != nil {
				return err
			}
			if scale > 0 && scale != 1 {
				sc = sc.Scale(scale)
			}
			duration := sc.Duration
			if days > 0 {
				duration = time.Duration(days * 24 * float64(time.Hour))
			}
			if jobs <= 0 {
				jobs = runtime.GOMAXPROCS(0)
			}
			if out == "" {
				out = filepath.Join("arbiter-out", "tuned-"+base.Name+".yaml")
			}
			eval := func(st *sim.Strategy, seeds []uint64) ([]*sim.StrategyResult, error) {
				runs, _, err := sim.RunSeeds(sim.RunSpec{Scenario: sc, Strategies: []*sim.Strategy{st}, Seeds: seeds, Duration: duration, Jobs: jobs})
				if err != nil {
					return nil, err
				}
				return runs[0], nil
			}
			errw := cmd.ErrOrStderr()
			fmt.Fprintf(errw, "tuning %s on seeds %s (%s, %.3g days): %s search over %d knobs\n", base.Name, seedsString(seeds), sc.Name, duration.Hours()/24, kf.Search, len(kf.Knobs))
			n := 0
			tn := &sim.Tuner{Knobs: kf, Source: src, Eval: eval, OnTrial: func(t *sim.Trial) {
				n++
				fmt.Fprintf(errw, "  setting %d: %s: score %.6g%s\n", n, strings.Join(t.Setting, ", "), t.Score, brokenNote(t))
			}}
			res, err := tn.Run(seeds)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			writeTrials(w, kf, res)
			if res.Best == nil {
				return fmt.Errorf("sim tune: %w (not even the file as written): relax the constraints or widen the knobs", sim.ErrNoFeasible)
			}
			fmt.Fprintf(w, "\nbest on seeds %s: %s (score %.6g; the file as written: %.6g)\n", seedsString(seeds), describeSetting(kf, res.Best.Setting), res.Best.Score, res.Baseline.Score)
			// Held out: the winner and the file as written on other seeds.
			tuned, err := tn.Strategy(res.Best.Setting)
			if err != nil {
				return err
			}
			asWritten, err := tn.Strategy(res.Baseline.Setting)
			if err != nil {
				return err
			}
			runs, gpus, err := sim.RunSeeds(sim.RunSpec{Scenario: sc, Strategies: []*sim.Strategy{asWritten, tuned}, Seeds: evalSeeds, Duration: duration, Jobs: jobs})
			if err != nil {
				return err
			}
			held := sim.NewSeedResults(sc.Name, duration.Hours()/24, gpus, evalSeeds, []string{"as-written", "tuned"}, runs, sim.SeedMetrics)
			fmt.Fprintf(w, "\nheld-out seeds %s:\n", seedsString(evalSeeds))
			writeHeldOut(w, held)
			fmt.Fprintf(w, "held-out score: tuned %.6g, as written %.6g\n", kf.Score(held.Strategies[1].Metrics), kf.Score(held.Strategies[0].Metrics))
			return writeTuned(w, tn, res.Best.Setting, out, fmt.Sprintf("tuned by arbiter sim tune --strategy %s --knobs %s --seeds %s: %s",
				strategy, knobs, seedsString(seeds), describeSetting(kf, res.Best.Setting)),
				fmt.Sprintf("Tuned on seeds %s: %s (numbers above are the file's before tuning).", seedsString(seeds), describeSetting(kf, res.Best.Setting)))
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenario, "scenario", "", "scenario file (default: the embedded contention scenario)")
	f.StringVar(&traceDir, "trace-dir", "", traceDirUsage)
	f.StringVar(&strategy, "strategy", "", "strategy to tune: static, dynamic, hybrid or a file.yaml")
	f.StringVar(&knobs, "knobs", "", "knobs file (see examples/knobs/)")
	f.StringVar(&seedList, "seeds", "1-5", "tuning seeds")
	f.StringVar(&evalList, "eval-seeds", "", "held-out seeds the best setting is evaluated on (default: the 5 after the tuning seeds)")
	f.Float64Var(&days, "days", 0, "simulated days (default: the scenario's duration)")
	f.Float64Var(&scale, "scale", 1, "multiply the scenario's machines and load by this factor")
	f.IntVarP(&jobs, "jobs", "j", 0, "runs simulated in parallel (0: GOMAXPROCS)")
	f.StringVar(&out, "out", "", "tuned strategy file to write (default arbiter-out/tuned-NAME.yaml)")
	return cmd
}

// strategySource reads a built-in strategy by name, or a strategy file.
func strategySource(name string) (*sim.StrategySource, error) {
	if strings.HasSuffix(name, ".yaml") || strings.ContainsRune(name, os.PathSeparator) {
		return sim.StrategySourceFile(name)
	}
	src, err := sim.StrategySourceFS(examples.FS, "strategies/"+name)
	if err != nil {
		return nil, fmt.Errorf("sim: unknown strategy %q: use static, dynamic, hybrid or a file.yaml", name)
	}
	return src, nil
}

func brokenNote(t *sim.Trial) string {
	if t.Feasible() {
		return ""
	}
	return " (breaks " + strings.Join(t.Broken, "; ") + ")"
}

func describeSetting(kf *sim.KnobsFile, s sim.Setting) string {
	parts := make([]string, len(s))
	for i, v := range s {
		if v == "" {
			v = "(unset)"
		}
		parts[i] = kf.Knobs[i].Label() + " = " + v
	}
	return strings.Join(parts, ", ")
}

// writeTrials prints every setting tried: its knob values, the objective's
// metrics (mean ± CI), the score and the constraints it breaks.
func writeTrials(w io.Writer, kf *sim.KnobsFile, res *sim.TuneResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "#")
	for _, k := range kf.Knobs {
		fmt.Fprintf(tw, "\t%s", k.Label())
	}
	for _, o := range kf.Objective {
		fmt.Fprintf(tw, "\t%s (%s)", o.Metric, o.Goal)
	}
	fmt.Fprintln(tw, "\tSCORE\tCONSTRAINTS")
	for i, t := range res.Trials {
		mark := ""
		switch t {
		case res.Best:
			mark = " best"
		case res.Baseline:
			mark = " as written"
		}
		fmt.Fprintf(tw, "%d%s", i+1, mark)
		for _, v := range t.Setting {
			if v == "" {
				v = "(unset)"
			}
			fmt.Fprintf(tw, "\t%s", v)
		}
		for _, o := range kf.Objective {
			m, _ := sim.SeedMetricByKey(o.Metric)
			fmt.Fprintf(tw, "\t%s", sim.FormatStat(m, t.Metrics[o.Metric]))
		}
		status := "ok"
		if !t.Feasible() {
			status = "breaks " + strings.Join(t.Broken, "; ")
		}
		fmt.Fprintf(tw, "\t%.6g\t%s\n", t.Score, status)
	}
	tw.Flush()
}

func writeHeldOut(w io.Writer, res *sim.SeedResults) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tAS WRITTEN\tTUNED\tBEST")
	for _, row := range res.Table(sim.SeedMetrics) {
		best := row.Best
		if best == "" {
			best = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", row.Label, row.Values[0], row.Values[1], best)
	}
	tw.Flush()
}

// writeTuned writes the tuned strategy (and its policy file, if any) to out.
// The strategy's description gains tuned, which says what tuning changed.
func writeTuned(w io.Writer, tn *sim.Tuner, s sim.Setting, out, comment, tuned string) error {
	v, err := tn.Variant(s)
	if err != nil {
		return err
	}
	st, polName, pol, err := v.Files(out, comment, tuned)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(out, st, 0o644); err != nil {
		return err
	}
	wrote := out
	if pol != nil {
		p := filepath.Join(filepath.Dir(out), polName)
		if err := os.WriteFile(p, pol, 0o644); err != nil {
			return err
		}
		wrote += " and " + p
	}
	fmt.Fprintf(w, "\nwrote %s\n", wrote)
	return nil
}
