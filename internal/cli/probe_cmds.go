package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

func probeTable(ps api.Probes) func(tw *tabwriter.Writer) {
	dur := func(d *api.Duration) string {
		if d == nil {
			return "-"
		}
		return time.Duration(*d).Round(100 * time.Microsecond).String()
	}
	return func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NAME\tTARGET\tFROM\tINTERVAL\tSAMPLES\tP50\tP95\tP99\tSUCCESS\tLAST")
		for _, p := range ps.Items {
			ok := "-"
			if p.SuccessRatio != nil {
				ok = fmt.Sprintf("%.1f%%", 100**p.SuccessRatio)
			}
			last := "-"
			if l := p.Last; l != nil {
				last = "ok"
				if !l.OK {
					last = l.Error
				}
				if l.Node != "" {
					last += " (" + l.Node + ")"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Target, p.From, time.Duration(p.Interval), p.Samples,
				dur(p.P50), dur(p.P95), dur(p.P99), ok, last)
		}
	}
}

func newProbeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "probe", Aliases: []string{"probes"}, Short: "Latency probes of HTTP(S) endpoints, for policies and alerts (admin)", Args: cobra.NoArgs,
		Long: `Probes time a request to an endpoint every interval, from the server or from
chosen agents. Each attempt is a latency and a success sample of the probe's
target (service:<name> unless it names one) and of the cluster: a policy on
p95_latency or success_ratio of that target reads them. See docs/signals.md.`}
	var lc conn
	listCmd := &cobra.Command{
		Use: "list", Short: "List the probes with their latency percentiles and success over the policy window (5m)", Args: cobra.NoArgs,
		RunE: lc.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			ps, err := cl.Probes(ctx)
			if err != nil {
				return err
			}
			return lc.emit(out, ps, probeTable(ps))
		}),
	}
	lc.bind(listCmd)
	apply := applyFileCmd("probe apply", "Replace the probes with a probes file (a probes: list)", "probes file (YAML)",
		func(ctx context.Context, cl *client.Client, file string, data []byte) (api.Probes, error) {
			return cl.ApplyProbes(ctx, api.ProbesApply{File: file, Source: string(data)})
		}, probeTable)
	cmd.AddCommand(listCmd, apply)
	return cmd
}
