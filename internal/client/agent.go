package client

import (
	"bytes"
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

// MaxLogTailBytes is the most LogLines asks for: the server passes on at
// most 64 MiB of a log (server.maxLogBytes), counted from where the tail
// starts, so a longer tail would not end at the log's end.
const MaxLogTailBytes = 64 << 20

// LogLines fetches the last n lines of a replica's output, whole (n <= 0:
// all of it). The API tails by bytes, so it asks for a few hundred bytes a
// line and, while the answer is a full tail holding fewer than n whole
// lines, asks for four times as much, up to MaxLogTailBytes; a line cut
// by the byte tail is dropped, never shown in part. Beyond that bound it
// returns the whole lines of the last MaxLogTailBytes, fewer than n.
func (c *Client) LogLines(ctx context.Context, tenant, name string, replica, n int) ([]byte, error) {
	if n <= 0 {
		return c.Logs(ctx, tenant, name, replica, 0)
	}
	want := min(max(int64(n)*256, 4096), MaxLogTailBytes)
	for {
		b, err := c.Logs(ctx, tenant, name, replica, want)
		if err != nil {
			return nil, err
		}
		whole := int64(len(b)) < want // the log is shorter than the tail: all of it came
		if out, ok := lastLines(b, n, whole); ok || want >= MaxLogTailBytes {
			return out, nil
		}
		want = min(want*4, MaxLogTailBytes)
	}
}

// lastLines returns the last n lines of b, a line being what ends in a
// newline or ends b. When b is the log's end but not its start (whole is
// false) its first line may be cut: ok is false when the n lines would
// reach into it, and out is then b without that first line.
func lastLines(b []byte, n int, whole bool) (out []byte, ok bool) {
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end-- // the last line's own newline
	}
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			if n--; n == 0 {
				return b[i+1:], true
			}
		}
	}
	if whole {
		return b, true
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[i+1:], false
	}
	return nil, false
}
