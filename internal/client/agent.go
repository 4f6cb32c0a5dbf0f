package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/arbiterhq/arbiter/internal/api"
)

// Heartbeat sends a node agent's heartbeat and returns the node's tasks.
func (c *Client) Heartbeat(ctx context.Context, node string, hb api.Heartbeat) (api.HeartbeatReply, error) {
	var out api.HeartbeatReply
	err := c.Do(ctx, "POST", "/v1/nodes/"+esc(node)+"/heartbeat", hb, &out)
	return out, err
}

// Logs fetches a replica's output (through the server, from its node's
// agent); tail > 0 keeps only the last tail bytes.
func (c *Client) Logs(ctx context.Context, tenant, name string, replica int, tail int64) ([]byte, error) {
	path := tpath(tenant, "workloads", name, "logs") + "?replica=" + strconv.Itoa(replica)
	if tail > 0 {
		path += "&tail=" + strconv.FormatInt(tail, 10)
	}
	ans, err := c.send(ctx, &request{method: http.MethodGet, path: path})
	if err != nil {
		return nil, err
	}
	if ans.resp.StatusCode >= 300 { // a redirect send did not follow is an error too
		return nil, apiError(ans.resp.StatusCode, ans.data)
	}
	return ans.data, nil
}
