package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// newMetricCmd is `arbiter metric push`: measurements only the outside
// world has (an inference service's latency, a queue's wait, spot prices)
// for the server's policies.
func newMetricCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "metric", Aliases: []string{"metrics"}, Short: "Push measurements for the server's policies (admin)", Args: cobra.NoArgs}
	var c conn
	var s api.MetricSample
	push := &cobra.Command{
		Use:   "push --metric NAME --target KIND:NAME --value V",
		Short: "Record one value now (e.g. --metric p95_latency --target service:coding-assistant --value 0.182)",
		Args:  cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			if s.Metric == "" || s.Target == "" {
				return errors.New("metric push: --metric and --target are required")
			}
			res, err := cl.PushMetrics(ctx, api.MetricSamples{Samples: []api.MetricSample{s}})
			if err != nil {
				return err
			}
			return c.emit(out, res, func(tw *tabwriter.Writer) { fmt.Fprintf(tw, "ACCEPTED\n%d\n", res.Accepted) })
		}),
	}
	c.bind(push)
	push.Flags().StringVar(&s.Metric, "metric", "", "p50_latency, p95_latency, p99_latency (seconds), queue_wait (seconds), spot_price (USD per GPU-hour) or capacity_failure_rate")
	push.Flags().StringVar(&s.Target, "target", "", "what was measured: kind:name (service:, class:, tenant:, pool:, flavor:, region:) or cluster")
	push.Flags().Float64Var(&s.Value, "value", 0, "the value, in the metric's base unit")
	cmd.AddCommand(push)
	return cmd
}
