package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

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
func (c *Client) StreamEvents(ctx context.Context, after int64, fn func(api.Event) error) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/v1/events"+query("after", strconv.FormatInt(after, 10)), nil)
	if err != nil {
		return after, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.hc
	hc.Timeout = 0 // a stream lasts as long as ctx
	resp, err := hc.Do(req)
	if err != nil {
		return after, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		ae := &api.Error{}
		if json.Unmarshal(data, ae) != nil || ae.Code == "" {
			ae = &api.Error{Code: http.StatusText(resp.StatusCode), Message: strings.TrimSpace(string(data))}
		}
		ae.Status = resp.StatusCode
		return after, ae
	}
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
				return after, err
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
