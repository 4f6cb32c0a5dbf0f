package client

import (
	"context"

	"github.com/arbiterhq/arbiter/internal/api"
)

// SpotPrices lists the current spot price of each GPU model and region.
func (c *Client) SpotPrices(ctx context.Context) ([]api.SpotPrice, error) {
	return list[api.SpotPrice](c, ctx, "/v1/spot-prices")
}
