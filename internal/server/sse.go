package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
)

// sseHeartbeat is how often an idle stream sends a comment, so proxies
// and clients see it alive.
const sseHeartbeat = 15 * time.Second

// wantsSSE reports whether the request asks for server-sent events.
func wantsSSE(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true
		}
	}
	return false
}

// streamEvents answers GET /v1/events with Accept: text/event-stream: the
// events after ?after=SEQ (or the Last-Event-ID header, which reconnecting
// clients send), then each new one as it is committed, as server-sent
// events (id: seq, event: type, data: the event's JSON). A tenant sees
// only its own events. The stream ends when the client goes away.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, after int64, sc eventScope) error {
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := intParam(url.Values{"Last-Event-ID": {id}}, "Last-Event-ID", 0, math.MaxInt64)
		if err != nil {
			return err
		}
		after = max(after, n)
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		return apiErr(http.StatusNotAcceptable, api.CodeInvalid, "", "this connection cannot stream events; use the long poll")
	}
	if err := s.st.View(r.Context(), func(tx store.ReadTx) error { return checkPruned(tx, after) }); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	fl.Flush()
	var buf bytes.Buffer
	for {
		ch := s.changes()
		buf.Reset()
		for {
			n := 0
			err := s.st.View(r.Context(), func(tx store.ReadTx) error {
				if err := checkPruned(tx, after); err != nil {
					return err // fell behind the pruner
				}
				var err error
				after, err = scanEvents(tx, sc, after, func(e *store.Event) bool {
					b, err := json.Marshal(eventOut(e))
					if err != nil {
						return false
					}
					fmt.Fprintf(&buf, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, sseField(e.Type.String()), b)
					n++
					return n < 1000
				})
				return err
			})
			if err != nil {
				// Headers are sent: end the stream with an error event; the
				// client reconnects with Last-Event-ID (and, when it fell
				// behind the pruner, gets the 410).
				var ae *api.Error
				if errors.As(err, &ae) {
					b, _ := json.Marshal(ae)
					fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
					fl.Flush()
				} else if r.Context().Err() == nil {
					s.log.Warn("events stream: reading", "err", err)
				}
				return nil
			}
			if n < 1000 {
				break
			}
		}
		if buf.Len() > 0 {
			if _, err := w.Write(buf.Bytes()); err != nil {
				return nil
			}
			fl.Flush()
		}
		select {
		case <-ch:
		case <-timeAfter(sseHeartbeat):
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
			fl.Flush()
		case <-r.Context().Done():
			return nil
		}
	}
}

// sseField keeps a value on one line.
func sseField(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}
