package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// principal is who a request acts for.
type principal struct {
	admin   bool
	role    string // store.RoleAdmin, RoleTenant, RoleNode or RoleMetrics
	id      string // the token's ID
	tenant  string
	node    string // a node (agent) token: its node
	hash    string
	expires time.Time // zero: never
}

// requireNode lets the admin and the token of node id through.
func requireNode(r *http.Request, id string) error {
	if p := who(r); p.admin || (p.node != "" && p.node == id) {
		return nil
	}
	return apiErr(http.StatusForbidden, api.CodeForbidden, "", "this token may not act for node %q", id)
}

type ctxKey struct{}

func who(r *http.Request) principal {
	p, _ := r.Context().Value(ctxKey{}).(principal)
	return p
}

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
	if ae.Status == http.StatusTooManyRequests {
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
			s.metrics.requests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
			s.metrics.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}()
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

// admit rate-limits and authenticates a request, or answers it. A source
// address that sent too many requests without a valid token is refused
// before its token is even looked at (429 with Retry-After); a valid
// token then spends its own budget.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (principal, bool) {
	src := sourceOf(r)
	if s.sources.empty(src) {
		s.writeErr(w, apiErr(http.StatusTooManyRequests, api.CodeRateLimited, "", "too many requests without a valid token from this address; retry later"))
		return principal{}, false
	}
	p, err := s.authenticate(r)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
			s.sources.allow(src)
		}
		s.writeErr(w, err)
		return principal{}, false
	}
	if !s.limiter.allow(p.hash) {
		s.writeErr(w, apiErr(http.StatusTooManyRequests, api.CodeRateLimited, "", "rate limit of this token exceeded; retry later"))
		return principal{}, false
	}
	s.tokens.touch(p.hash, s.now())
	return p, true
}

// sourceOf is the rate-limiting key of a request's peer: its IP address
// (an IPv6 address by its /64, what one host usually holds). Headers
// such as X-Forwarded-For are not trusted.
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		if pfx, err := ip.Prefix(64); err == nil {
			return pfx.String()
		}
	}
	return ip.String()
}

// guard serves h to the principals rule a admits, after admit.
func (s *Server) guard(a access, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.admit(w, r)
		if !ok {
			return
		}
		if err := a.authorize(p, r); err != nil {
			s.writeErr(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// authenticate checks the bearer token. The secret is hashed at once and
// never logged.
func (s *Server) authenticate(r *http.Request) (principal, error) {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || strings.TrimSpace(secret) == "" {
		return principal{}, apiErr(http.StatusUnauthorized, api.CodeUnauthenticated, "", "send Authorization: Bearer <token>")
	}
	hash := HashToken(strings.TrimSpace(secret))
	var p principal
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		var err error
		p, err = s.tokens.lookup(tx, hash)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return principal{}, apiErr(http.StatusUnauthorized, api.CodeUnauthenticated, "", "unknown or revoked token")
	}
	if err == nil && !p.expires.IsZero() && !s.now().Before(p.expires) {
		return principal{}, apiErr(http.StatusUnauthorized, api.CodeUnauthenticated, "", "token expired")
	}
	return p, err
}

// tokenCache keeps the principals of tokens seen, valid while no token
// has been created or revoked: every request still reads the tokens'
// revision in its own snapshot, so a revoked token stops working at once,
// but it does not decode the token each time.
type tokenCache struct {
	mu  sync.Mutex
	rev int64
	by  map[string]principal
	use lastUse
}

func (c *tokenCache) lookup(tx store.ReadTx, hash string) (principal, error) {
	rev := tx.KindRevision(store.KindToken)
	c.mu.Lock()
	if c.rev == rev {
		if p, ok := c.by[hash]; ok {
			c.mu.Unlock()
			return p, nil
		}
	}
	c.mu.Unlock()
	tok, err := store.Get[store.Token](tx, hash)
	if err != nil {
		return principal{}, err
	}
	p := principalOf(tok)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case rev > c.rev:
		c.rev, c.by = rev, map[string]principal{}
	case rev < c.rev:
		return p, nil // an older snapshot than the cache's: do not mix them
	}
	if len(c.by) < 100_000 {
		c.by[hash] = p
	}
	return p, nil
}

// limiter is a token bucket per key: per API token after
// authentication, per source address before it. It holds at most max
// buckets: when full, it drops the buckets that have refilled (they
// would start full anyway), and only if none has, all of them.
type limiter struct {
	rate  float64
	burst float64
	max   int
	now   func() time.Time
	mu    sync.Mutex
	b     map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, burst int, now func() time.Time) *limiter {
	return &limiter{rate: rate, burst: float64(burst), max: 100_000, now: now, b: map[string]*bucket{}}
}

// empty reports whether key's bucket has no request left (without
// spending one).
func (l *limiter) empty(key string) bool {
	if l.rate < 0 {
		return false
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.b[key]
	return ok && min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate) < 1
}

// sweep drops the buckets that have refilled; l.mu is held.
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.b {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.b, k)
		}
	}
	if len(l.b) >= l.max {
		clear(l.b)
	}
}

func (l *limiter) allow(key string) bool {
	if l.rate < 0 {
		return true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.b[key]
	if !ok {
		if len(l.b) >= l.max {
			l.sweep(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.b[key] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// routes wires every endpoint.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() {
			writeJSON(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: "the scheduler loop has not started"})
			return
		}
		err := s.st.View(r.Context(), func(tx store.ReadTx) error { return nil })
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: "the store does not answer"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.Handle("GET /metrics", s.guard(metricsScrape, s.MetricsHandler()))
	mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(s.openAPI)
	})
	for _, rt := range s.apiRoutes() {
		s.route(mux, rt)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			// The mux would answer 404 or 405 in plain text; answer JSON.
			rec := &probe{header: http.Header{}}
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

// probe captures the mux's own 404/405 answer.
type probe struct {
	header http.Header
	status int
}

func (p *probe) Header() http.Header         { return p.header }
func (p *probe) Write(b []byte) (int, error) { return len(b), nil }
func (p *probe) WriteHeader(code int)        { p.status = code }
