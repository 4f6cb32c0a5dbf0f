package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/meter"
)

// newAdvisorCmd is `arbiter advisor`: the optimisation advice over the
// metered use (docs/cost.md, "The advisor").
func newAdvisorCmd() *cobra.Command {
	var c conn
	cmd := &cobra.Command{Use: "advisor", Short: "What to change to spend less on GPUs: idle reservations, unused guarantees, reservations and spot to buy, quota to ask", Args: cobra.NoArgs}
	c.bind(cmd)
	var window, threshold string
	list := &cobra.Command{
		Use:   "list [--window 30d] [--idle-threshold 50%] [-o table|json|yaml]",
		Short: "The recommendations over a window, with their evidence and estimated monthly saving",
		Long: `List the advisor's recommendations over the last --window of usage records:
idle-reservation (a reservation idle above --idle-threshold), unused-guarantee
(a guarantee used below 100% − --idle-threshold), reserve-baseline (GPUs held
on demand all window that a 1- or 3-year reservation would serve cheaper),
use-spot (preemptible work charged on demand) and quota-increase (pending
work blocked by a quota limit now). Each has its evidence and the estimated
saving a month (USD, 730 h; none for unused guarantees and quota increases),
highest first. The admin sees every tenant's (one with --tenant); a tenant
token its own.`,
		Args: cobra.NoArgs,
		RunE: costRun(&c, []string{"table", "json", "yaml"}, func(ctx context.Context, cl *client.Client, out io.Writer, format string) error {
			if _, err := meter.ParseWindow("--window", window); err != nil {
				return err
			}
			if _, err := meter.ParseThreshold("--idle-threshold", threshold); err != nil {
				return err
			}
			recs, err := cl.Advisor(ctx, window, threshold)
			if err != nil {
				return err
			}
			if t := c.givenTenant(); t != "" {
				kept := recs[:0]
				for _, r := range recs {
					if r.Tenant == t {
						kept = append(kept, r)
					}
				}
				recs = kept
			}
			meter.SortRecommendations(recs)
			saved := c.output
			c.output = format
			defer func() { c.output = saved }()
			return c.emit(out, recs, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "KIND\tTARGET\tSAVING/MONTH\tEVIDENCE")
				for _, r := range recs {
					saving := "$" + strconv.FormatFloat(r.Saving, 'f', 2, 64)
					if r.SavingNote != "" {
						saving = "none"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Kind, r.Target, saving, meter.EvidenceString(r.Evidence))
				}
			})
		}),
	}
	list.Flags().StringVar(&window, "window", "30d", "the usage window to weigh, back from now: a duration (30d, 12h, 1w)")
	list.Flags().StringVar(&threshold, "idle-threshold", "50%", "the idle share above which a reservation or a guarantee is reported (0% to below 100%)")
	cmd.AddCommand(list)
	return cmd
}
