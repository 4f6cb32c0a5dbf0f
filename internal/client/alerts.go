package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// Alerts lists the alert rules with their state (admin).
func (c *Client) Alerts(ctx context.Context) (api.Alerts, error) {
	var out api.Alerts
	return out, c.Do(ctx, "GET", "/v1/alerts", nil, &out)
}

// ApplyAlerts replaces the alert rules with a rules file (admin).
func (c *Client) ApplyAlerts(ctx context.Context, a api.AlertsApply) (api.Alerts, error) {
	var out api.Alerts
	return out, c.Do(ctx, "PUT", "/v1/alerts", a, &out)
}

// StreamEvents follows the event stream as server-sent events from after
// on, calling fn for each event, until ctx ends, the server closes the
// stream or fn returns an error (which StreamEvents returns). It returns
// the sequence number of the last event seen, to resume from.
//
// With several servers a stream that breaks or ends (its replica died or
// stepped down) is opened again on the next server from the last event
// seen, after a jittered backoff; StreamEvents then returns only when ctx
// ends, fn fails, a server refuses the stream (an *api.Error: 401, 410 ...)
// or no server gave a stream back for the failover budget.
func (c *Client) StreamEvents(ctx context.Context, after int64, fn func(api.Event) error) (int64, error) {
	return c.StreamTenantEvents(ctx, "", after, fn)
}

// StreamTenantEvents is StreamEvents of one tenant ("": every event the
// token sees).
func (c *Client) StreamTenantEvents(ctx context.Context, tenant string, after int64, fn func(api.Event) error) (int64, error) {
	if len(c.servers) == 1 {
		after, err := c.streamOnce(ctx, tenant, after, fn)
		var fe *callbackError
		if errors.As(err, &fe) {
			return after, fe.err
		}
		return after, err
	}
	start, fails := time.Now(), 0
	for {
		before := after
		var err error
		after, err = c.streamOnce(ctx, tenant, after, fn)
		var ae *api.Error
		var fe *callbackError
		switch {
		case ctx.Err() != nil:
			return after, ctx.Err()
		case errors.As(err, &fe):
			return after, fe.err
		case errors.As(err, &ae), errors.Is(err, ErrRedirectRefused), errors.Is(err, ErrTooManyRedirects):
			return after, err
		}
		if after > before {
			start, fails = time.Now(), 0 // it made progress: a fresh budget
		}
		if time.Since(start) >= c.failover {
			if err == nil {
				err = fmt.Errorf("client: the event stream kept ending for %s", c.failover)
			}
			return after, err
		}
		fails++
		idx := c.cur.Load()
		c.cur.CompareAndSwap(idx, (idx+1)%int32(len(c.servers)))
		if err := sleepCtx(ctx, backoff(fails)); err != nil {
			return after, err
		}
	}
}

// callbackError carries fn's error out of streamOnce.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }
func (e *callbackError) Unwrap() error { return e.err }

// streamOnce reads one stream from the current server (send picks it and
// fails over while connecting) until it ends.
func (c *Client) streamOnce(ctx context.Context, tenant string, after int64, fn func(api.Event) error) (int64, error) {
	ans, err := c.send(ctx, &request{method: "GET", path: "/v1/events" + query("after", strconv.FormatInt(after, 10), "tenant", tenant),
		header: http.Header{"Accept": {"text/event-stream"}}, stream: true})
	if err != nil {
		return after, err
	}
	resp := ans.resp
	if resp.StatusCode >= 300 { // a redirect send did not follow is an error too
		return after, apiError(resp.StatusCode, ans.data)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return after, fmt.Errorf("client: the server answered %q, not an event stream", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() == 0 {
				continue
			}
			var e api.Event
			if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
				return after, fmt.Errorf("client: decoding an event: %w", err)
			}
			data.Reset()
			after = max(after, e.Seq)
			if err := fn(e); err != nil {
				return after, &callbackError{err}
			}
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
		// "id:", "event:", "retry:" and ":" comments need nothing here.
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return after, err
	}
	return after, ctx.Err()
}
