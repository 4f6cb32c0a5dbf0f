package client

import (
	"context"

	"github.com/arbiterhq/arbiter/internal/api"
)

// Tokens lists the tokens the caller manages: all for the admin, its own
// tenant's for a tenant token. Secrets are never listed.
func (c *Client) Tokens(ctx context.Context) ([]api.Token, error) {
	return list[api.Token](c, ctx, "/v1/tokens")
}

// CreateTokenOf creates a token of a role (admin, tenant, node, metrics);
// the secret is only returned here.
func (c *Client) CreateTokenOf(ctx context.Context, req api.TokenCreate) (api.Token, error) {
	var out api.Token
	return out, c.Do(ctx, "POST", "/v1/tokens", req, &out)
}

// RevokeToken revokes a token by its ID.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.Do(ctx, "DELETE", "/v1/tokens/"+esc(id), nil, nil)
}

// RotateToken gives a token a new secret (returned only here); the old
// one is refused from then on.
func (c *Client) RotateToken(ctx context.Context, id string) (api.Token, error) {
	var out api.Token
	return out, c.Do(ctx, "POST", "/v1/tokens/"+esc(id)+"/rotate", nil, &out)
}
