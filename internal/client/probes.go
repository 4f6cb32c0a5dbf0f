package client

import (
	"context"

	"github.com/arbiterhq/arbiter/internal/api"
)

// Probes lists the probes with what they measured (admin).
func (c *Client) Probes(ctx context.Context) (api.Probes, error) {
	var out api.Probes
	return out, c.Do(ctx, "GET", "/v1/probes", nil, &out)
}

// ApplyProbes replaces the probes with a probes file (admin).
func (c *Client) ApplyProbes(ctx context.Context, a api.ProbesApply) (api.Probes, error) {
	var out api.Probes
	return out, c.Do(ctx, "PUT", "/v1/probes", a, &out)
}
