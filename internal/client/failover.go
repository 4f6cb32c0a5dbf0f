package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// Failover. A client may name several servers (the replicas of one
// control plane). It sends every request to its current server, the
// leader once one answered as such, and
//
//   - follows a 307/308 redirect itself (net/http never does), to the
//     Location, only when that URL's origin (scheme, host, port) is one of
//     the configured servers: the token never goes to a server the user
//     did not name (ErrRedirectRefused otherwise). The server it lands on
//     becomes the current one.
//   - on a connection error, a timeout, or a 503 that says the replica
//     cannot serve (NoLeader, or any 503 with Retry-After), moves to the
//     next server and, when the request may be sent again, re-sends it
//     there after a jittered backoff, until the request's context ends or
//     the failover budget (SetFailoverTimeout) is spent.
//
// A request may be sent again when it is idempotent (GET, HEAD, PUT,
// DELETE, OPTIONS, or a request carrying an Idempotency-Key), or when it
// cannot have reached a server: the connection was refused, or a replica
// answered NoLeader (it processed nothing). A non-idempotent POST that may
// have reached a server is never re-sent blindly; the client only moves
// to the next server for the next call.
//
// With one server the client behaves as it always did: no retries.

// Errors of failover.
var (
	// ErrRedirectRefused: a server redirected to an origin that is not one
	// of the configured servers; nothing was sent there.
	ErrRedirectRefused = errors.New("client: redirect to a server that is not configured")
	// ErrTooManyRedirects: the servers kept redirecting each other.
	ErrTooManyRedirects = errors.New("client: too many redirects")
)

// RedirectError is the error of a refused redirect (errors.Is
// ErrRedirectRefused).
type RedirectError struct {
	From, Location string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("client: %s redirected to %s, which is not one of the configured servers (add it to --server to follow it); the request was not sent there", e.From, e.Location)
}

// Unwrap makes errors.Is(err, ErrRedirectRefused) hold.
func (e *RedirectError) Unwrap() error { return ErrRedirectRefused }

const (
	// codeNoLeader is the api.Error code of a replica that knows no leader.
	codeNoLeader = "NoLeader"
	// defaultFailover is how long one call keeps failing over.
	defaultFailover = 30 * time.Second
	backoffBase     = 50 * time.Millisecond
	backoffMax      = 2 * time.Second
	// maxRetryAfter caps how long a server's Retry-After makes us wait.
	maxRetryAfter = 5 * time.Second
	// maxAnswer bounds an answer's body.
	maxAnswer = 64 << 20
)

// server is one configured server.
type server struct {
	base   string // scheme://host[:port][/path], no trailing slash
	origin string // scheme://host:port, lower case, with the port
}

// parseServers splits a comma-separated list of server URLs. An entry
// without a scheme is http://.
func parseServers(list string) []server {
	var out []server
	for _, b := range strings.Split(list, ",") {
		b = strings.TrimRight(strings.TrimSpace(b), "/")
		if b == "" {
			continue
		}
		if !strings.Contains(b, "://") {
			b = "http://" + b
		}
		out = append(out, server{base: b, origin: originOf(b)})
	}
	if len(out) == 0 {
		out = append(out, server{base: "http://", origin: ""}) // as before: requests fail with a clear URL error
	}
	return out
}

// CanonicalServers returns the servers of a comma-separated list as the
// client reads them, in a form to compare: scheme://host:port (lower case,
// the port made explicit) and the path; an entry that is not a URL is
// kept as written (with http:// when it had no scheme). An empty list
// gives none.
func CanonicalServers(list string) []string {
	var out []string
	for _, sv := range parseServers(list) {
		if sv.base == "http://" && sv.origin == "" {
			continue // parseServers' placeholder for an empty list
		}
		u, err := url.Parse(sv.base)
		if err != nil || sv.origin == "" {
			out = append(out, sv.base)
			continue
		}
		out = append(out, sv.origin+u.EscapedPath())
	}
	return out
}

// originOf returns scheme://host:port of a URL in lower case, the port
// made explicit; "" when it does not parse.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return origin(u)
}

func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// Servers returns the configured servers' base URLs, in order.
func (c *Client) Servers() []string {
	out := make([]string, len(c.servers))
	for i, s := range c.servers {
		out[i] = s.base
	}
	return out
}

// Current returns the base URL of the server the next request goes to
// (the leader, once one answered as such).
func (c *Client) Current() string { return c.servers[c.cur.Load()%int32(len(c.servers))].base }

// SetFailoverTimeout bounds how long one call keeps trying the servers
// (default 30s; the call's context bounds it too).
func (c *Client) SetFailoverTimeout(d time.Duration) { c.failover = d }

// serverOf returns the index of the configured server whose origin is u's.
func (c *Client) serverOf(u *url.URL) (int, bool) {
	o := origin(u)
	for i, s := range c.servers {
		if s.origin != "" && s.origin == o {
			return i, true
		}
	}
	return 0, false
}

// request is one call, re-sendable: the body is kept as bytes.
type request struct {
	method, path string
	body         []byte
	header       http.Header
	// stream: the answer is read by the caller (no client timeout, the
	// body left open).
	stream bool
	// repeatable: the server treats a repeat of this POST as a no-op.
	repeatable bool
}

// idempotent reports whether the request may be sent twice.
func (r *request) idempotent() bool {
	switch r.method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return true
	}
	return r.repeatable || r.header.Get(api.HeaderIdempotencyKey) != ""
}

// answer is a response; data holds the body unless the request streams.
type answer struct {
	resp *http.Response
	data []byte
}

// send sends rq to the current server, following redirects to configured
// servers and failing over (see above). For a stream the caller closes
// the answer's body.
func (c *Client) send(ctx context.Context, rq *request) (*answer, error) {
	start := time.Now()
	idx := int(c.cur.Load()) % len(c.servers)
	target := c.servers[idx].base + rq.path
	hops, tries := 0, 0
	for {
		ans, err := c.attempt(ctx, target, rq)
		if err == nil && isRedirect(ans.resp.StatusCode) {
			next, i, rerr := c.redirectTarget(target, ans.resp)
			ans.close()
			if rerr != nil {
				return nil, rerr
			}
			if hops++; hops > len(c.servers)+2 {
				return nil, fmt.Errorf("%w (%d, the last to %s)", ErrTooManyRedirects, hops, next)
			}
			c.cur.Store(int32(i))
			idx, target = i, next
			continue
		}
		move, resend, wait := c.judge(ctx, rq, ans, err)
		if len(c.servers) == 1 || !move {
			return ans, err
		}
		// This server cannot serve now: the next call starts at the next one.
		nxt := (idx + 1) % len(c.servers)
		c.cur.CompareAndSwap(int32(idx), int32(nxt))
		hops = 0 // redirects are counted per server tried
		if !resend || time.Since(start) >= c.failover {
			return ans, err
		}
		tries++
		if tries%len(c.servers) != 0 {
			wait = 0 // a full round of servers before honouring Retry-After
		}
		if serr := sleepCtx(ctx, max(backoff(tries), wait)); serr != nil {
			if err == nil {
				return ans, nil // the context ended while waiting: the last answer stands
			}
			return nil, err
		}
		ans.close()
		idx = int(c.cur.Load()) % len(c.servers)
		target = c.servers[idx].base + rq.path
	}
}

// attempt sends rq to target once.
func (c *Client) attempt(ctx context.Context, target string, rq *request) (*answer, error) {
	var body io.Reader
	if rq.body != nil {
		body = bytes.NewReader(rq.body)
	}
	req, err := http.NewRequestWithContext(ctx, rq.method, target, body)
	if err != nil {
		return nil, err
	}
	for k, v := range rq.header {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := c.hc
	if rq.stream {
		h := *c.hc
		h.Timeout = 0 // a stream lasts as long as ctx
		hc = &h
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	ans := &answer{resp: resp}
	if rq.stream && resp.StatusCode < 300 {
		return ans, nil
	}
	defer resp.Body.Close()
	if ans.data, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer)); err != nil {
		return nil, err
	}
	return ans, nil
}

func (a *answer) close() {
	if a != nil && a.data == nil && a.resp != nil {
		a.resp.Body.Close()
	}
}

func isRedirect(code int) bool {
	return code == http.StatusTemporaryRedirect || code == http.StatusPermanentRedirect
}

// redirectTarget resolves a redirect's Location against the URL it came
// from and returns it with the index of its server, or the error that
// refuses it.
func (c *Client) redirectTarget(from string, resp *http.Response) (string, int, error) {
	loc := resp.Header.Get("Location")
	base, err := url.Parse(from)
	if err != nil {
		return "", 0, err
	}
	u, err := base.Parse(loc)
	if loc == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return "", 0, fmt.Errorf("client: %s answered %d with an unusable Location %q", redact(from), resp.StatusCode, loc)
	}
	i, ok := c.serverOf(u)
	if !ok {
		return "", 0, &RedirectError{From: redact(from), Location: u.Redacted()}
	}
	return u.String(), i, nil
}

// redact drops a URL's query (it is logged in errors).
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		u.RawQuery = ""
		return u.Redacted()
	}
	return raw
}

// judge classifies one attempt's outcome: move says the server cannot
// serve now (the client moves to the next one), resend that rq may be
// sent again, wait the server's Retry-After.
func (c *Client) judge(ctx context.Context, rq *request, ans *answer, err error) (move, resend bool, wait time.Duration) {
	if err != nil {
		if ctx.Err() != nil {
			// The caller's deadline passed with no answer: the server may be
			// stuck; the next call tries the next one. Nothing is re-sent.
			return errors.Is(ctx.Err(), context.DeadlineExceeded), false, 0
		}
		if !transportError(err) {
			return false, false, 0 // a bad URL or the like: no other server helps
		}
		return true, notSent(err) || rq.idempotent(), 0
	}
	if ans.resp.StatusCode != http.StatusServiceUnavailable {
		return false, false, 0
	}
	wait, hasWait := retryAfter(ans.resp.Header)
	if errorCode(ans.data) == codeNoLeader {
		return true, true, wait // the replica processed nothing
	}
	if !hasWait {
		return false, false, 0
	}
	return true, rq.idempotent(), wait
}

// transportError reports whether err is the network's: a connection
// refused, reset or closed early, or a timeout.
func transportError(err error) bool {
	var op *net.OpError
	var ne net.Error
	return errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// notSent reports whether a transport error shows the request never left:
// the connection was not made.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// retryAfter reads a Retry-After of seconds, capped.
func retryAfter(h http.Header) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, true // an HTTP date or junk: retry, no particular wait
	}
	return min(time.Duration(n)*time.Second, maxRetryAfter), true
}

func errorCode(data []byte) string {
	var e struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(data, &e) != nil {
		return ""
	}
	return e.Code
}

// backoff is the jittered wait before try n (1, 2, ...): between half
// and all of base·2^(n-1), at most backoffMax.
func backoff(n int) time.Duration {
	d := backoffBase << min(n-1, 10)
	d = min(d, backoffMax)
	return d/2 + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// apiError turns an error answer into an *api.Error.
func apiError(status int, data []byte) *api.Error {
	ae := &api.Error{}
	if json.Unmarshal(data, ae) != nil || ae.Code == "" {
		ae = &api.Error{Code: http.StatusText(status), Message: strings.TrimSpace(string(data))}
	}
	ae.Status = status
	return ae
}
