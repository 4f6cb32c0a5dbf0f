package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		ae := &api.Error{}
		if json.Unmarshal(data, ae) != nil || ae.Code == "" {
			ae = &api.Error{Code: http.StatusText(resp.StatusCode), Message: strings.TrimSpace(string(data))}
		}
		ae.Status = resp.StatusCode
		return nil, ae
	}
	return data, nil
}
