package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sim"
)

func newPolicyTestCmd() *cobra.Command {
	var file, scenario, strategy, traceDir string
	var days float64
	var seed uint64
	var verbose bool
	cmd := &cobra.Command{
		Use:   "test -f FILE [--scenario S] [--strategy X] [--days N] [-v]",
		Short: "Replay a scenario with the rules and summarize each rule's firings",
		Long: `Runs the simulator on a scenario (default: the embedded contention scenario)
under a strategy (default: dynamic) with the rules of FILE in place of the
strategy's own, and prints a summary, one line per rule of the file: how
many times it fired, reverted and expired, how long its actions were in
force, how often the worst inference TTFT p99 was above its SLO when it
fired and how long it took to return under it, and what its actions did
(the caps they set, the others as written). -v then lists every firing:
when, the values that made the condition true, the actions taken and their
effect, and the TTFT p99 against the SLO.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("policy test: -f FILE is required")
			}
			pol, err := loadPolicyFlag(file)
			if err != nil {
				return err
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
			dur := sc.Duration
			if days > 0 {
				opt.Duration = time.Duration(days * 24 * float64(time.Hour))
				dur = opt.Duration
			}
			s, err := sim.New(sc, st, opt)
			if err != nil {
				return err
			}
			res := s.Run()
			out := cmd.OutOrStdout()
			firings := s.Firings()
			sums := summarizeRules(pol.Rules, firings, sc.Start, sc.Start.Add(dur))
			writeRuleSummary(out, sums, dur)
			fmt.Fprintf(out, "\n%d firings over %.0f days of %s under %s; inference SLO attainment %.2f%%, customer capacity failures %d\n",
				len(firings), res.CapacityGPUHours/float64(s.GPUs())/24, sc.Name, st.Name, 100*res.InferenceSLOAttainment, res.CustomerCapacityFailures)
			if !verbose {
				if len(firings) > 0 {
					fmt.Fprintln(out, "(-v lists every firing)")
				}
				return nil
			}
			fmt.Fprintln(out)
			writeFirings(out, firings)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "policy file (operators' or native format)")
	cmd.Flags().StringVar(&scenario, "scenario", "", "scenario file (default: the embedded contention scenario)")
	cmd.Flags().StringVar(&traceDir, "trace-dir", "", traceDirUsage)
	cmd.Flags().StringVar(&strategy, "strategy", "dynamic", "strategy name or file")
	cmd.Flags().Float64Var(&days, "days", 0, "simulated days (default: the scenario's)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "after the summary, list every firing with its values, actions and effect")
	return cmd
}

// ruleSummary is what one rule did in a policy test run.
type ruleSummary struct {
	rule                     *policy.Rule
	fired, reverted, expired int
	// held is how long its actions were in force; open, whether they
	// still were at the end of the run.
	held time.Duration
	open bool
	// above counts the firings with the worst TTFT p99 above its SLO,
	// recovered how long each of those that got back under it took.
	above     int
	recovered []time.Duration
	// caps are the lowest and highest cap each capping action (by index)
	// set on each target.
	caps map[int]map[string][2]resource.MilliGPU
}

// summarizeRules sums up the firings of a run from start to end per rule,
// in the file's order.
func summarizeRules(rules []policy.Rule, firings []sim.Firing, start, end time.Time) []*ruleSummary {
	out := make([]*ruleSummary, len(rules))
	by := map[string]*ruleSummary{}
	since := map[string]time.Time{}
	for i := range rules {
		out[i] = &ruleSummary{rule: &rules[i], caps: map[int]map[string][2]resource.MilliGPU{}}
		by[rules[i].Name] = out[i]
	}
	for _, f := range firings {
		r := by[f.Rule]
		if r == nil {
			continue
		}
		switch f.Event {
		case policy.EventFired:
			r.fired++
			since[f.Rule] = f.Time
			if f.Recovered != 0 {
				r.above++
				if f.Recovered > 0 {
					r.recovered = append(r.recovered, f.Recovered)
				}
			}
			for _, c := range f.Caps {
				m := r.caps[c.Hold.Index]
				if m == nil {
					m = map[string][2]resource.MilliGPU{}
					r.caps[c.Hold.Index] = m
				}
				t := c.Target.String()
				if lh, ok := m[t]; ok {
					m[t] = [2]resource.MilliGPU{min(lh[0], c.Limit), max(lh[1], c.Limit)}
				} else {
					m[t] = [2]resource.MilliGPU{c.Limit, c.Limit}
				}
			}
		case policy.EventReverted, policy.EventExpired:
			if f.Event == policy.EventReverted {
				r.reverted++
			} else {
				r.expired++
			}
			if t, ok := since[f.Rule]; ok {
				r.held += f.Time.Sub(t)
				delete(since, f.Rule)
			}
		}
	}
	for name, t := range since {
		by[name].held += end.Sub(t)
		by[name].open = true
	}
	return out
}

// writeRuleSummary prints one line per rule: its counts, time in force,
// SLO outcome and effects.
func writeRuleSummary(w io.Writer, sums []*ruleSummary, run time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "RULES (%d)\n", len(sums))
	fmt.Fprintln(tw, "RULE\tFIRED\tREVERTED\tEXPIRED\tIN FORCE\tTTFT P99 ABOVE SLO AT FIRING\tEFFECTS")
	for _, r := range sums {
		inForce := "-"
		if r.held > 0 || r.open {
			inForce = fmt.Sprintf("%s (%.1f%%)", shortDuration(r.held), 100*float64(r.held)/float64(run))
			if r.open {
				inForce += ", at the end too"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", r.rule.Name, r.fired, r.reverted, r.expired, inForce, r.sloOutcome(), r.effects())
	}
	tw.Flush()
}

// sloOutcome says how often the worst TTFT p99 was above its SLO when the
// rule fired, and how long it took to get back under it.
func (r *ruleSummary) sloOutcome() string {
	if r.fired == 0 {
		return "-"
	}
	if r.above == 0 {
		return fmt.Sprintf("0 of %d", r.fired)
	}
	s := fmt.Sprintf("%d of %d", r.above, r.fired)
	if n := len(r.recovered); n > 0 {
		d := slices.Clone(r.recovered)
		slices.Sort(d)
		s += fmt.Sprintf(", back under it after %s (median), %s (max)", shortDuration(d[n/2]), shortDuration(d[n-1]))
	}
	if never := r.above - len(r.recovered); never > 0 {
		s += fmt.Sprintf(", %d never back under it", never)
	}
	return s
}

// effects says what the rule's actions did: the caps they set, the
// others as written.
func (r *ruleSummary) effects() string {
	switch {
	case !r.rule.Options.Enabled:
		return "none: the rule is disabled"
	case r.fired == 0:
		return "-"
	case r.rule.Options.DryRun:
		return "none: dry run"
	}
	var parts []string
	for i := range r.rule.Actions {
		caps := r.caps[i]
		if len(caps) == 0 {
			parts = append(parts, r.rule.Actions[i].Summary())
			continue
		}
		targets := make([]string, 0, len(caps))
		for t := range caps {
			targets = append(targets, t)
		}
		slices.Sort(targets)
		for _, t := range targets {
			lh := caps[t]
			if lh[0] == lh[1] {
				parts = append(parts, fmt.Sprintf("%s capped at %v GPUs", t, lh[0]))
			} else {
				parts = append(parts, fmt.Sprintf("%s capped at %v-%v GPUs", t, lh[0], lh[1]))
			}
		}
	}
	return strings.Join(parts, "; ")
}

// shortDuration writes d as 2d3h, 5h12m, 4m or 30s.
func shortDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	d = d.Round(time.Minute)
	days, h, m := d/(24*time.Hour), d%(24*time.Hour)/time.Hour, d%time.Hour/time.Minute
	var b strings.Builder
	if days > 0 {
		fmt.Fprintf(&b, "%dd", days)
	}
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 && days == 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if b.Len() == 0 {
		return "0m"
	}
	return b.String()
}

// writeFirings prints every firing: when, the values that decided, the
// actions, their effect and the TTFT p99 against the SLO.
func writeFirings(out io.Writer, firings []sim.Firing) {
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
}
