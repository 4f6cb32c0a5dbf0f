package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// apiErr builds an error answer.
func apiErr(status int, code, field, format string, args ...any) *api.Error {
	return &api.Error{Status: status, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

func notFound(what, name string) *api.Error {
	return apiErr(http.StatusNotFound, api.CodeNotFound, "", "%s %q not found", what, name)
}

var errForbidden = apiErr(http.StatusForbidden, api.CodeForbidden, "", "this needs the admin token")

// toAPIError maps errors to answers in one place: typed errors by
// errors.Is/As, anything else is a 500 (logged, not shown).
func (s *Server) toAPIError(err error) *api.Error {
	var ae *api.Error
	var inUse *TenantInUseError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &inUse):
		return apiErr(http.StatusConflict, api.CodeConflict, "", "%s", inUse.Error())
	case errors.Is(err, store.ErrNotFound):
		return apiErr(http.StatusNotFound, api.CodeNotFound, "", "%s", strings.TrimPrefix(err.Error(), "store: "))
	case errors.Is(err, store.ErrExists):
		return apiErr(http.StatusConflict, api.CodeConflict, "name", "%s", strings.TrimPrefix(err.Error(), "store: "))
	case errors.Is(err, store.ErrConflict):
		return apiErr(http.StatusConflict, api.CodeConflict, "", "%s; read it again and retry", strings.TrimPrefix(err.Error(), "store: "))
	case errors.Is(err, tenancy.ErrInsufficientCapacity):
		return apiErr(http.StatusConflict, api.CodeCapacity, "capacity", "%s", strings.TrimPrefix(err.Error(), "tenancy: "))
	case errors.Is(err, store.ErrNotLeader):
		return apiErr(http.StatusServiceUnavailable, api.CodeNoLeader, "", "this replica no longer leads; retry (another one leads or is being elected)")
	case errors.Is(err, store.ErrUnavailable):
		return apiErr(http.StatusServiceUnavailable, api.CodeUnavailable, "", "the store is unavailable (etcd electing a leader or unreachable); the write may or may not have been made: retry it with the same Idempotency-Key")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return apiErr(http.StatusServiceUnavailable, api.CodeUnavailable, "", "request cancelled")
	}
	s.log.Error("internal error", "err", err)
	return apiErr(http.StatusInternalServerError, api.CodeInternal, "", "internal error")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, `{"code":"Internal","message":"encoding the answer"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func (s *Server) writeErr(w http.ResponseWriter, err error) {
	ae := s.toAPIError(err)
	if ae.Status == 0 {
		ae.Status = http.StatusBadRequest
	}
	if ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, ae.Status, ae)
}

// decode reads a JSON body strictly: size-limited, one object, no unknown
// fields. Errors name the offending field where JSON tells it.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return apiErr(http.StatusUnsupportedMediaType, api.CodeMediaType, "", "send JSON with Content-Type: application/json, not %q", ct)
		}
	}
	body := http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return s.decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return s.decodeError(err)
		}
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "", "the body must hold exactly one JSON object")
	}
	return nil
}

func (s *Server) decodeError(err error) error {
	var mbe *http.MaxBytesError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return apiErr(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "", "the body is larger than %d bytes", mbe.Limit)
	case errors.Is(err, io.EOF):
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "", "the body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "", "the JSON body ends early")
	case errors.As(err, &syn):
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "", "malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		if api.IsValueError(typ) { // a GPU amount's or duration's own message
			return apiErr(http.StatusBadRequest, api.CodeInvalid, typ.Field, "%s", typ.Value)
		}
		return apiErr(http.StatusBadRequest, api.CodeInvalid, typ.Field, "expected %s, got JSON %s", typ.Type, typ.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return apiErr(http.StatusBadRequest, api.CodeInvalid, f, "unknown field %q", f)
	}
	// Errors of our own UnmarshalJSON methods (GPU amounts, durations).
	return apiErr(http.StatusBadRequest, api.CodeInvalid, "", "%s", strings.TrimPrefix(msg, "json: "))
}

// recorder remembers the status of an answer for metrics.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// handlerFunc is an API handler: it answers or returns an error.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// route registers an authenticated API route: it rate-limits and
// authenticates the request, enforces the route's access rule, checks
// its query parameters, then runs the handler.
func (s *Server) route(mux *http.ServeMux, rt apiRoute) {
	route, h := rt.pattern, rt.h
	// The metrics' labels: "GET /v1/nodes/{id}" is method GET, route
	// /v1/nodes/{id}.
	method, path, _ := strings.Cut(route, " ")
	mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("panic in handler", "route", route, "panic", fmt.Sprint(v))
				if rec.status == 0 {
					s.writeErr(rec, fmt.Errorf("panic: %v", v))
				}
			}
			s.metrics.requests.WithLabelValues(method, path, strconv.Itoa(rec.status)).Inc()
			s.metrics.latency.WithLabelValues(method, path).Observe(time.Since(start).Seconds())
		}()
		if s.toLeader(rec, r, route) {
			return
		}
		p, ok := s.admit(rec, r)
		if !ok {
			return
		}
		if err := rt.auth.authorize(p, r); err != nil {
			s.writeErr(rec, err)
			return
		}
		if err := checkQuery(rt, r.URL.Query()); err != nil {
			s.writeErr(rec, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, p))
		if err := h(rec, r); err != nil {
			s.writeErr(rec, err)
		}
	})
}

// routes wires every endpoint.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if ok, why := s.readiness(r.Context()); !ok {
			writeJSON(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: why})
			return
		}
		err := s.st.View(r.Context(), func(tx store.ReadTx) error { return nil })
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: "the store does not answer"})
			return
		}
		_, why := s.readiness(r.Context())
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "role": why})
	})
	mux.Handle("GET /metrics", s.guard(metricsScrape, s.MetricsHandler()))
	mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(s.openAPI)
	})
	for _, rt := range s.apiRoutes() {
		s.route(mux, rt)
	}
	s.uiRoutes(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			// The mux would answer 404 or 405 in plain text; answer JSON.
			rec := &muxProbe{header: http.Header{}}
			h, _ := mux.Handler(r)
			h.ServeHTTP(rec, r)
			if rec.status == http.StatusMethodNotAllowed {
				w.Header().Set("Allow", rec.header.Get("Allow"))
				writeJSON(w, http.StatusMethodNotAllowed, &api.Error{Code: api.CodeMethod, Message: fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow"))})
				return
			}
			writeJSON(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("no endpoint %s %s; see /v1/openapi.json", r.Method, r.URL.Path)})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// MetricsHandler serves the Prometheus metrics without authentication,
// for a listener of its own (serve --metrics-listen); the main listener
// asks for the admin token or a metrics token.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// muxProbe captures the mux's own 404/405 answer.
type muxProbe struct {
	header http.Header
	status int
}

func (p *muxProbe) Header() http.Header         { return p.header }
func (p *muxProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *muxProbe) WriteHeader(code int)        { p.status = code }
