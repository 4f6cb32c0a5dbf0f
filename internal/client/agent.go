package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

// LogPiece is a piece of a replica's log as the server answered it.
type LogPiece struct {
	Data  []byte
	Start int64 // the offset of Data's first byte in the log
	Size  int64 // the log's size when the answer began
	// Ended: the replica's process was not running when the answer
	// began, so the log holds all its run wrote.
	Ended bool
}

// Logs fetches a replica's output (through the server, from its node's
// agent); tail > 0 keeps only the last tail bytes.
func (c *Client) Logs(ctx context.Context, tenant, name string, replica int, tail int64) ([]byte, error) {
	p, err := c.LogTail(ctx, tenant, name, replica, tail)
	return p.Data, err
}

// LogTail is Logs with where the piece lies in the log.
func (c *Client) LogTail(ctx context.Context, tenant, name string, replica int, tail int64) (LogPiece, error) {
	path := tpath(tenant, "workloads", name, "logs") + "?replica=" + strconv.Itoa(replica)
	if tail > 0 {
		path += "&tail=" + strconv.FormatInt(tail, 10)
	}
	ans, err := c.send(ctx, &request{method: http.MethodGet, path: path})
	if err != nil {
		return LogPiece{}, err
	}
	if ans.resp.StatusCode >= 300 { // a redirect send did not follow is an error too
		return LogPiece{}, apiError(ans.resp.StatusCode, ans.data)
	}
	p := pieceOf(ans.resp.Header)
	p.Data = ans.data
	return p, nil
}

// pieceOf reads the log headers of an answer (zero where absent).
func pieceOf(h http.Header) LogPiece {
	start, _ := strconv.ParseInt(h.Get(api.HeaderLogStart), 10, 64)
	size, _ := strconv.ParseInt(h.Get(api.HeaderLogSize), 10, 64)
	return LogPiece{Start: start, Size: size, Ended: h.Get(api.HeaderLogEnded) == "true"}
}

// FollowLogs writes a replica's output from byte offset from to w as it is
// written, asking again from where it got to when an answer ends (the
// server bounds each to api.LogFollowFor and api.MaxLogAnswer), until the
// replica's run has ended and w has all of its log (nil), ctx ends
// (ctx.Err()), the server refuses (its *api.Error), or the connection
// keeps breaking.
func (c *Client) FollowLogs(ctx context.Context, tenant, name string, replica int, from int64, w io.Writer) error {
	fails := 0
	for {
		path := tpath(tenant, "workloads", name, "logs") + "?replica=" + strconv.Itoa(replica) + "&from=" + strconv.FormatInt(from, 10) + "&follow=true"
		ans, err := c.send(ctx, &request{method: http.MethodGet, path: path, stream: true})
		if err == nil && ans.resp.StatusCode >= 300 {
			err = apiError(ans.resp.StatusCode, ans.data)
			var ae *api.Error
			if errors.As(err, &ae) && ae.Status != http.StatusServiceUnavailable {
				return err
			}
		}
		if err == nil {
			p := pieceOf(ans.resp.Header)
			if ans.resp.Header.Get(api.HeaderLogEnded) == "" {
				ans.resp.Body.Close()
				return fmt.Errorf("client: the server or the node's agent does not follow logs (no %s header): upgrade it", api.HeaderLogEnded)
			}
			var n int64
			n, err = io.Copy(w, ans.resp.Body)
			ans.resp.Body.Close()
			from = p.Start + n
			if n > 0 {
				fails = 0
			}
			if p.Ended && from >= p.Size {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			continue // a bounded answer ended: ask again from where it got to
		}
		if fails++; fails > 5 {
			return err
		}
		if err := sleepCtx(ctx, backoff(fails)); err != nil {
			return err
		}
	}
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
	b, _, err := c.LogLinesAt(ctx, tenant, name, replica, n)
	return b, err
}

// LogLinesAt is LogLines with the offset in the log where what it returns
// ends (where FollowLogs goes on from).
func (c *Client) LogLinesAt(ctx context.Context, tenant, name string, replica, n int) ([]byte, int64, error) {
	if n <= 0 {
		p, err := c.LogTail(ctx, tenant, name, replica, 0)
		return p.Data, p.Start + int64(len(p.Data)), err
	}
	want := min(max(int64(n)*256, 4096), MaxLogTailBytes)
	for {
		p, err := c.LogTail(ctx, tenant, name, replica, want)
		if err != nil {
			return nil, 0, err
		}
		b := p.Data
		whole := int64(len(b)) < want // the log is shorter than the tail: all of it came
		if out, ok := lastLines(b, n, whole); ok || want >= MaxLogTailBytes {
			return out, p.Start + int64(len(b)), nil
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
