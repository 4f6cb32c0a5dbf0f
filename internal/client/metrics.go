package client

import (
	"context"

	"github.com/arbiterhq/arbiter/internal/api"
)

// PushMetrics sends measurements for the server's policies (admin).
func (c *Client) PushMetrics(ctx context.Context, s api.MetricSamples) (api.MetricsAccepted, error) {
	var out api.MetricsAccepted
	return out, c.Do(ctx, "POST", "/v1/metrics", s, &out)
}
