package client

import (
	"context"
	"time"

	"github.com/arbiterhq/arbiter/internal/meter"
)

// UsageRecords lists the usage records whose interval meets [since,
// until), every page of them: every tenant's for the admin, its own for a
// tenant token.
func (c *Client) UsageRecords(ctx context.Context, since, until time.Time) ([]meter.Record, error) {
	q := query("since", since.UTC().Format(time.RFC3339Nano), "until", until.UTC().Format(time.RFC3339Nano))
	return list[meter.Record](c, ctx, "/v1/usage-records"+q)
}

// Advisor returns the advisor's recommendations over window (e.g. "30d")
// at the idle threshold (e.g. "50%"); empty values take the server's
// defaults. A tenant token gets its own tenant's.
func (c *Client) Advisor(ctx context.Context, window, idleThreshold string) ([]meter.Recommendation, error) {
	var kv []string
	if window != "" {
		kv = append(kv, "window", window)
	}
	if idleThreshold != "" {
		kv = append(kv, "idle_threshold", idleThreshold)
	}
	return list[meter.Recommendation](c, ctx, "/v1/advisor"+query(kv...))
}

// CostReport returns the cost report over [since, until) grouped by
// groupBy (comma-separated dimensions), summed on the server; tenant, when
// not empty, narrows it to that tenant's subtree. A tenant token gets its
// own subtree's.
func (c *Client) CostReport(ctx context.Context, since, until time.Time, groupBy, tenant string) (meter.Report, error) {
	kv := []string{"since", since.UTC().Format(time.RFC3339Nano), "until", until.UTC().Format(time.RFC3339Nano), "group_by", groupBy}
	if tenant != "" {
		kv = append(kv, "tenant", tenant)
	}
	var rep meter.Report
	err := c.Do(ctx, "GET", "/v1/cost-report"+query(kv...), nil, &rep)
	return rep, err
}
