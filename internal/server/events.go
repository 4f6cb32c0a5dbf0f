package server

import (
	"math"
	"net/http"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
)

// Event handlers: the event log, read by polling or long-polling here and
// as a server-sent event stream in sse.go.

func eventOut(e *store.Event) api.Event {
	return api.Event{Seq: e.Seq, Time: e.Time, Type: e.Type.String(), Object: e.Object, Tenant: e.Tenant, Message: e.Message}
}

// events answers the events after ?after=SEQ visible to the caller (with
// ?tenant=T, T's only), at most ?limit= (default 100, at most 1000); with
// ?wait=DURATION (at most 60s) it waits for the first one (long poll).
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	after, err := optIntParam(q, "after", 0, math.MaxInt64, 0)
	if err != nil {
		return err
	}
	limit64, err := optIntParam(q, "limit", 1, 1000, 100)
	if err != nil {
		return err
	}
	limit := int(limit64)
	var wait api.Duration
	if v := q.Get("wait"); v != "" {
		if err := wait.UnmarshalYAMLScalar(v); err != nil || wait > api.Duration(60e9) {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "wait", "wait must be a duration of at most 60s, got %q", v)
		}
	}
	sc, err := s.eventScopeOf(r)
	if err != nil {
		return err
	}
	if wantsSSE(r) {
		return s.streamEvents(w, r, after, sc)
	}
	deadline := s.now().Add(timeDuration(wait))
	for {
		ch := s.changes()
		out := api.Events{Items: []api.Event{}, Next: after}
		err := s.st.View(r.Context(), func(tx store.ReadTx) error {
			if err := checkPruned(tx, after); err != nil {
				return err
			}
			var err error
			out.Next, err = scanEvents(tx, sc, after, func(e *store.Event) bool {
				out.Items = append(out.Items, eventOut(e))
				return len(out.Items) < limit
			})
			return err
		})
		if err != nil {
			return err
		}
		left := deadline.Sub(s.now())
		if len(out.Items) > 0 || left <= 0 {
			writeJSON(w, http.StatusOK, out)
			return nil
		}
		after = out.Next
		select {
		case <-ch:
		case <-timeAfter(left):
		case <-r.Context().Done():
			return r.Context().Err()
		}
	}
}
