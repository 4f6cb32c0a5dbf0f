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
