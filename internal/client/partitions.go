package client

import (
	"context"

	"github.com/arbiterhq/arbiter/internal/api"
)

// ListPartitions lists the partitions (admin).
func (c *Client) ListPartitions(ctx context.Context) ([]api.Partition, error) {
	return list[api.Partition](c, ctx, "/v1/partitions")
}

// SetPartition creates or replaces a partition (admin).
func (c *Client) SetPartition(ctx context.Context, name string, p api.PartitionRequest) (api.Partition, error) {
	var out api.Partition
	return out, c.Do(ctx, "PUT", "/v1/partitions/"+esc(name), p, &out)
}

// DeletePartition removes a partition; its machines return to the shared
// pool at the next cycle (admin).
func (c *Client) DeletePartition(ctx context.Context, name string) error {
	return c.Do(ctx, "DELETE", "/v1/partitions/"+esc(name), nil, nil)
}
