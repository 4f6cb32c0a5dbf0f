package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/sim"
)

// runSeeds runs every strategy on every seed (at most jobs at a time,
// default GOMAXPROCS), writes DIR/results.json with each metric's mean and
// 95% CI per strategy and DIR/seed-N/ with each seed's usual outputs, and
// prints the comparison.
func runSeeds(cmd *cobra.Command, sc *sim.Scenario, sts []*sim.Strategy, seeds []uint64, duration time.Duration, jobs int, out, output string) error {
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	bar := newProgress(cmd.ErrOrStderr(), int(duration.Hours())*len(sts)*len(seeds))
	runs, gpus, err := sim.RunSeeds(sim.RunSpec{Scenario: sc, Strategies: sts, Seeds: seeds, Duration: duration, Jobs: jobs, Progress: bar.step})
	bar.done()
	if err != nil {
		return err
	}
	names := make([]string, len(sts))
	for i, st := range sts {
		names[i] = st.Name
	}
	res := sim.NewSeedResults(sc.Name, duration.Hours()/24, gpus, seeds, names, runs, sim.SeedMetrics)
	if err := writeSeedOutputs(out, res); err != nil {
		return err
	}
	if output == "json" {
		return res.WriteJSON(cmd.OutOrStdout())
	}
	writeSeedTable(cmd.OutOrStdout(), res)
	fmt.Fprintf(cmd.OutOrStdout(), "\nwrote %s, %s and %s\n", filepath.Join(out, "report.html"), filepath.Join(out, "results.json"), filepath.Join(out, "seed-N", "..."))
	return nil
}

// writeSeedOutputs writes DIR/results.json and DIR/report.html (the
// aggregate) and each seed's results.json, CSVs and report in DIR/seed-N.
func writeSeedOutputs(dir string, res *sim.SeedResults) error {
	for k, seed := range res.Seeds {
		if err := writeSimOutputs(filepath.Join(dir, fmt.Sprintf("seed-%d", seed)), res.SeedRun(k)); err != nil {
			return err
		}
	}
	for _, o := range []struct {
		name  string
		write func(io.Writer) error
	}{{"results.json", res.WriteJSON}, {"report.html", res.WriteHTML}} {
		f, err := os.Create(filepath.Join(dir, o.name))
		if err != nil {
			return err
		}
		if err := o.write(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// writeSeedTable prints mean ± 95% CI per metric and strategy; "*" marks
// the best only where it is significantly better than every other
// strategy (Welch's t-test, p < 0.05), else the BEST column says "tie".
func writeSeedTable(w io.Writer, res *sim.SeedResults) {
	fmt.Fprintf(w, "scenario %s, %.0f days, %d GPUs, %d seeds (%s): mean ± 95%% CI\n\n", res.Scenario, res.Days, res.GPUs, len(res.Seeds), seedsString(res.Seeds))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "METRIC")
	for _, s := range res.Strategies {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(s.Strategy))
	}
	fmt.Fprintln(tw, "\tBEST")
	for _, row := range res.Table(sim.SeedMetrics) {
		fmt.Fprint(tw, row.Label)
		for _, v := range row.Values {
			fmt.Fprintf(tw, "\t%s", v)
		}
		best := row.Best
		if best == "" {
			best = "-"
		}
		fmt.Fprintf(tw, "\t%s\n", best)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n* significantly better than every other strategy (Welch's t-test, p < %.2f); tie: not told apart\n", sim.Significance)
}

// simGC sets the garbage collector for simulation (unless GOGC is set)
// and returns the undo. The simulator allocates short-lived snapshots
// every cycle; collecting at 800% instead of 100% trades memory for time
// (docs/perf.md has the numbers); results do not change.
func simGC() (undo func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(800)
	return func() { debug.SetGCPercent(old) }
}

// startCPUProfile profiles the process's CPU into file until stop.
func startCPUProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("sim: --cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("sim: --cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func seedsString(seeds []uint64) string {
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ",")
}
