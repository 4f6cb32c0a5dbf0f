package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/sim"
)

func newPolicyTestCmd() *cobra.Command {
	var file, scenario, strategy, traceDir string
	var days float64
	var seed uint64
	cmd := &cobra.Command{
		Use:   "test -f FILE [--scenario S] [--strategy X] [--days N]",
		Short: "Replay a scenario with the rules and print each firing",
		Long: `Runs the simulator on a scenario (default: the embedded contention scenario)
under a strategy (default: dynamic) with the rules of FILE in place of the
strategy's own, and prints every firing: when, the values that made the
condition true, the actions taken and their effect, and how long the worst
inference TTFT p99 took to return under its SLO.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("policy test: -f FILE is required")
			}
			sc, err := loadScenario(scenario, traceDir)
			if err != nil {
				return err
			}
			st, err := loadStrategy(strategy)
			if err != nil {
				return err
			}
			abs, err := filepath.Abs(file)
			if err != nil {
				return err
			}
			st.WithPolicyFile(abs)
			opt := sim.Options{Seed: seed}
			if days > 0 {
				opt.Duration = time.Duration(days * 24 * float64(time.Hour))
			}
			s, err := sim.New(sc, st, opt)
			if err != nil {
				return err
			}
			res := s.Run()
			out := cmd.OutOrStdout()
			firings := s.Firings()
			for _, f := range firings {
				fmt.Fprintf(out, "%s  %-24s %-8s", f.Time.Format("2006-01-02 15:04"), f.Rule, f.Event)
				var vals []string
				for _, v := range f.Values {
					vals = append(vals, v.String())
				}
				fmt.Fprintf(out, " when %s\n", strings.Join(vals, "; "))
				for _, a := range f.Actions {
					fmt.Fprintf(out, "    %s\n", a.Summary())
				}
				if f.Effect != "" {
					fmt.Fprintf(out, "    effect: %s\n", strings.TrimSuffix(f.Effect, "; "))
				}
				switch {
				case f.Recovered > 0:
					fmt.Fprintf(out, "    inference TTFT p99 %v above SLO %v; back under it after %v\n", f.WorstP99.Round(time.Millisecond), f.SLO, f.Recovered)
				case f.Recovered < 0:
					fmt.Fprintf(out, "    inference TTFT p99 %v above SLO %v; not back under it by the end of the run\n", f.WorstP99.Round(time.Millisecond), f.SLO)
				}
			}
			fmt.Fprintf(out, "\n%d firings over %.0f days of %s under %s; inference SLO attainment %.2f%%, customer capacity failures %d\n",
				len(firings), res.CapacityGPUHours/float64(s.GPUs())/24, sc.Name, st.Name, 100*res.InferenceSLOAttainment, res.CustomerCapacityFailures)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "policy file (operators' or native format)")
	cmd.Flags().StringVar(&scenario, "scenario", "", "scenario file (default: the embedded contention scenario)")
	cmd.Flags().StringVar(&traceDir, "trace-dir", "", traceDirUsage)
	cmd.Flags().StringVar(&strategy, "strategy", "dynamic", "strategy name or file")
	cmd.Flags().Float64Var(&days, "days", 0, "simulated days (default: the scenario's)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed")
	return cmd
}
