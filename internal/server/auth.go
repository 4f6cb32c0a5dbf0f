package server

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
)

// Authentication: who a request acts for (its bearer token, cached by
// the tokens' revision), and the admission of a request before its
// route's access rule (routes.go) is enforced.

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
	var hash string
	switch {
	case ok && strings.TrimSpace(secret) != "":
		hash = HashToken(strings.TrimSpace(secret))
	case h == "":
		// The dashboard's session (reads only; see ui.go).
		if hash, ok = s.sessionHash(r); !ok {
			return principal{}, apiErr(http.StatusUnauthorized, api.CodeUnauthenticated, "", "send Authorization: Bearer <token>")
		}
	default:
		return principal{}, apiErr(http.StatusUnauthorized, api.CodeUnauthenticated, "", "send Authorization: Bearer <token>")
	}
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
