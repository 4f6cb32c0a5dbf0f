package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/sched"
)

func newScheduleCmd() *cobra.Command {
	var file, output string
	cmd := &cobra.Command{
		Use:   "schedule --config FILE [-o table|json]",
		Short: "Run one scheduling cycle over a config and print the plan",
		Long: `Runs one scheduling cycle over a config that holds the fleet, tenants,
reservations and workloads (running ones with their placements, pending ones)
and prints the plan: placements, preemptions, overflow and why each remaining
workload is pending.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("schedule: --config FILE is required (try examples/schedule.yaml)")
			}
			c, err := config.Load(file)
			if err != nil {
				return err
			}
			plan := sched.Schedule(c.Input())
			return writePlan(cmd.OutOrStdout(), plan, output)
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "config file (fleet, tenants, reservations, workloads)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func writePlan(w io.Writer, p sched.Plan, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(nilToEmpty(p))
	case "table":
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "PLACEMENTS (%d)\n", len(p.Placements))
		fmt.Fprintln(tw, "WORKLOAD\tREPLICA\tNODE\tGPUS\tMILLI\tFLAVOR\tREGION\tNOTE")
		for _, x := range p.Placements {
			note := ""
			if x.OnReservation {
				note = "reservation"
			}
			if x.AfterPreemption {
				note = strings.TrimPrefix(note+",after-preemption", ",")
			}
			if m := x.MIG.Instance(); m != nil {
				note = strings.TrimPrefix(fmt.Sprintf("%s,mig %s@%d", note, m.Profile, m.Start), ",")
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\n", x.Workload, x.Replica, x.Node, intsString(x.GPUs), x.Milli, x.Flavor, x.Region, note)
		}
		fmt.Fprintf(tw, "\nPREEMPTIONS (%d)\n", len(p.Preemptions))
		fmt.Fprintln(tw, "WORKLOAD\tBY\tWORK LOST (GPU-h)\tREASON")
		for _, x := range p.Preemptions {
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\n", x.Workload, orDash(string(x.By)), x.WorkLost/3600, x.Reason)
		}
		if len(p.Resizes) > 0 {
			fmt.Fprintf(tw, "\nRESIZES (%d)\n", len(p.Resizes))
			fmt.Fprintln(tw, "WORKLOAD\tREPLICAS\tBY\tREASON")
			for _, x := range p.Resizes {
				fmt.Fprintf(tw, "%s\t%d -> %d\t%s\t%s\n", x.Workload, x.From, x.To, orDash(string(x.By)), x.Reason)
			}
		}
		if len(p.Capped) > 0 {
			fmt.Fprintf(tw, "\nELASTIC BELOW MAX (%d)\n", len(p.Capped))
			fmt.Fprintln(tw, "WORKLOAD\tREPLICAS\tMIN-MAX\tWHY NOT LARGER")
			for _, x := range p.Capped {
				fmt.Fprintf(tw, "%s\t%d\t%d-%d\t%s\n", x.Workload, x.Replicas, x.Min, x.Max, x.Reason)
			}
		}
		fmt.Fprintf(tw, "\nOVERFLOW (%d)\n", len(p.Overflow))
		fmt.Fprintln(tw, "WORKLOAD\tFROM\tTO")
		for _, x := range p.Overflow {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", x.Workload, x.From, x.To)
		}
		fmt.Fprintf(tw, "\nPENDING (%d)\n", len(p.Pending))
		fmt.Fprintln(tw, "WORKLOAD\tCODE\tREASON")
		for _, x := range p.Pending {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", x.Workload, x.Code, x.Reason)
		}
		return tw.Flush()
	}
	return fmt.Errorf("unknown output format %q: use table or json", format)
}

// nilToEmpty makes JSON lists [] rather than null.
func nilToEmpty(p sched.Plan) sched.Plan {
	if p.Placements == nil {
		p.Placements = []sched.Placement{}
	}
	if p.Preemptions == nil {
		p.Preemptions = []sched.Preemption{}
	}
	if p.Pending == nil {
		p.Pending = []sched.Pending{}
	}
	if p.Overflow == nil {
		p.Overflow = []sched.Overflow{}
	}
	return p
}

func intsString(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
