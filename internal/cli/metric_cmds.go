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
	"github.com/arbiterhq/arbiter/internal/policy"
)

// newMetricCmd is `arbiter metric push`: measurements only the outside
// world has (an inference service's latency, a queue's wait, spot prices)
// for the server's policies.
func newMetricCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "metric", Aliases: []string{"metrics"}, Short: "Push measurements for the server's policies (admin)", Args: cobra.NoArgs}
	var c conn
	var s api.MetricSample
	var value string
	push := &cobra.Command{
		Use:   "push --metric NAME --target KIND:NAME --value V",
		Short: "Record one value now (e.g. --metric p95_latency --target service:coding-assistant --value 182ms)",
		Args:  cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			if s.Metric == "" || s.Target == "" || value == "" {
				return errors.New("metric push: --metric, --target and --value are required")
			}
			v, err := metricValue(s.Metric, value)
			if err != nil {
				return fmt.Errorf("metric push: --value: %w", err)
			}
			s.Value = v
			res, err := cl.PushMetrics(ctx, api.MetricSamples{Samples: []api.MetricSample{s}})
			if err != nil {
				return err
			}
			return c.emit(out, res, func(tw *tabwriter.Writer) { fmt.Fprintf(tw, "ACCEPTED\n%d\n", res.Accepted) })
		}),
	}
	c.bind(push)
	push.Flags().StringVar(&s.Metric, "metric", "", "p50_latency, p95_latency, p99_latency (seconds), queue_wait (seconds), spot_price (USD per GPU-hour), capacity_failure_rate or success_ratio")
	push.Flags().StringVar(&s.Target, "target", "", "what was measured: kind:name (service:, class:, tenant:, pool:, flavor:, region:) or cluster")
	push.Flags().StringVar(&value, "value", "", "the value, written as in policy files: a time with a unit (400ms, 1.5s), a percentage (85%), a price ($2.50) or a plain number in the metric's base unit")
	cmd.AddCommand(push)
	return cmd
}

// metricValue parses a pushed value as policy files write quantities
// (policy.ParseQuantity) and returns it in the metric's base unit:
// seconds, a fraction, dollars per GPU-hour. A value with a unit must be
// of the metric's dimension where the metric is one policies know (a
// latency is a time, not "85%"); a plain number is taken as base units.
func metricValue(metric, value string) (float64, error) {
	q, err := policy.ParseQuantity(value)
	if err != nil {
		return 0, err
	}
	if m, err := policy.ParseMetric(metric); err == nil && q.Dim != policy.DimCount && q.Dim != m.Dim() {
		return 0, fmt.Errorf("%q is a %s, but %s is a %s", value, q.Dim, metric, m.Dim())
	}
	return q.Value, nil
}
