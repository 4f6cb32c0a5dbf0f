package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/meter"
)

// newCostCmd is `arbiter cost`: reports and exports of the metered GPU use
// (docs/cost.md).
func newCostCmd() *cobra.Command {
	var c conn
	cmd := &cobra.Command{Use: "cost", Short: "What the GPUs cost and who used them: reports and FOCUS exports of the usage records", Args: cobra.NoArgs}
	c.bind(cmd)
	var since, until, groupBy string
	window := func(cmd *cobra.Command) {
		cmd.Flags().StringVar(&since, "since", "30d", "start of the window: a duration back from now (30d, 12h, 1w), an RFC 3339 time or a date (2006-01-02)")
		cmd.Flags().StringVar(&until, "until", "", "end of the window (exclusive), in the forms --since takes (default: now); runs still going count up to it")
	}
	report := &cobra.Command{
		Use:   "report [--since 30d] [--until T] [--group-by tenant,kind,region,sku] [-o table|csv|json]",
		Short: "GPU-hours and cost per group over a window, with totals",
		Long: `Sum the usage records over [--since, --until) by the dimensions of --group-by
(tenant, kind, region, sku, model, charge, class, workload; default tenant):
GPU-hours, cost at the unit prices in force when each run started, and the
list (on-demand) cost, with a TOTAL row. The server sums the records
(GET /v1/cost-report). The admin sees every tenant (one tenant's subtree
with --tenant); a tenant token its own subtree.`,
		Args: cobra.NoArgs,
		RunE: costRun(&c, []string{"table", "csv", "json"}, func(ctx context.Context, cl *client.Client, out io.Writer, format string) error {
			by, err := meter.ParseGroupBy("--group-by", groupBy)
			if err != nil {
				return err
			}
			from, to, err := window2(since, until)
			if err != nil {
				return err
			}
			dims := make([]string, len(by))
			for i, d := range by {
				dims[i] = d.String()
			}
			rep, err := cl.CostReport(ctx, from, to, strings.Join(dims, ","), c.givenTenant())
			if err != nil {
				return err
			}
			switch format {
			case "csv":
				return rep.WriteCSV(out)
			case "json":
				return rep.WriteJSON(out)
			}
			return rep.WriteTable(out)
		}),
	}
	window(report)
	report.Flags().StringVar(&groupBy, "group-by", "tenant", "dimensions to group by, comma-separated: tenant, kind, region, sku, model, charge, class, workload")
	export := &cobra.Command{
		Use:   "export [--since 30d] [--until T] -o csv|json",
		Short: "The usage records over a window as FOCUS " + meter.FOCUSVersion + " rows (CSV or JSON)",
		Long: `Write the usage records over [--since, --until), clipped to it, as rows of
the FinOps FOCUS ` + meter.FOCUSVersion + ` specification's columns (BillingPeriodStart,
ChargePeriodStart, BilledCost, EffectiveCost, ListCost, PricingQuantity in
GPU-Hours, SubAccountId for the tenant, Tags with the tenant path, kind,
class, charge, model and node; see docs/cost.md).`,
		Args: cobra.NoArgs,
		RunE: costRun(&c, []string{"csv", "json"}, func(ctx context.Context, cl *client.Client, out io.Writer, format string) error {
			from, to, recs, err := c.usage(ctx, cl, since, until)
			if err != nil {
				return err
			}
			if format == "json" {
				return meter.WriteFOCUSJSON(out, recs, from, to)
			}
			return meter.WriteFOCUSCSV(out, recs, from, to)
		}),
	}
	window(export)
	cmd.AddCommand(report, export)
	return cmd
}

// costRun runs a cost command whose -o is one of formats (the first is
// the default where -o was left at table).
func costRun(c *conn, formats []string, fn func(ctx context.Context, cl *client.Client, out io.Writer, format string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		format := c.output
		if !cmd.Flags().Changed("output") && !cmd.InheritedFlags().Changed("output") {
			format = formats[0]
		}
		if !slices.Contains(formats, format) {
			return fmt.Errorf("%s: -o: unknown output format %q: use %s", commandName(cmd), format, joinOr(formats))
		}
		saved := c.output
		c.output = "json" // the shared checks know no csv
		defer func() { c.output = saved }()
		return c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			return fn(ctx, cl, out, format)
		})(cmd, args)
	}
}

func joinOr(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	out := xs[0]
	for _, x := range xs[1 : len(xs)-1] {
		out += ", " + x
	}
	return out + " or " + xs[len(xs)-1]
}

// window2 reads --since and --until.
func window2(since, until string) (from, to time.Time, err error) {
	now := time.Now()
	to = now
	if until != "" {
		if to, err = meter.ParseTime("--until", until, now); err != nil {
			return from, to, err
		}
	}
	if from, err = meter.ParseTime("--since", since, now); err != nil {
		return from, to, err
	}
	if err = meter.Window(from, to); err != nil {
		return from, to, fmt.Errorf("--since: %w", err)
	}
	return from, to, nil
}

// usage reads the window's records (the --tenant's only, when given).
func (c *conn) usage(ctx context.Context, cl *client.Client, since, until string) (from, to time.Time, recs []meter.Record, err error) {
	if from, to, err = window2(since, until); err != nil {
		return from, to, nil, err
	}
	if recs, err = cl.UsageRecords(ctx, from, to); err != nil {
		return from, to, nil, err
	}
	if t := c.givenTenant(); t != "" {
		recs = slices.DeleteFunc(recs, func(r meter.Record) bool { return r.Tenant != t })
	}
	return from, to, recs, nil
}
