package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
)

// Logs (issue 12). `arbiter workload logs` reads a replica's output from
// the agent of its node, through the server. The server never sends a
// secret there: it signs each request for that node, path and a few
// seconds with the key the agent sent (api.SignLogRequest), and the
// agent serves only what was signed. The agent's log_url must be an
// http(s) URL on the node's registered address, which is either
//
//   - the node's arbiter.io/host label (set when it registered: how other
//     replicas reach it), or
//   - the IP address the heartbeat carrying the log_url came from,
//
// and never the address the agent reached the server at (the server's
// own API). Other log_urls are refused with a 400 naming log_url.

// maxLogBytes bounds a log answer passed on to the caller.
const maxLogBytes = 64 << 20

// logClient reaches agents: no redirects are followed (the server goes
// only where the URL checked at heartbeat says), no proxy, bounded time.
var logClient = &http.Client{
	Timeout: 60 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
	Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
		MaxIdleConns:          16,
		IdleConnTimeout:       time.Minute,
	},
}

// checkLogEndpoint checks the log_url and log_key of node id's heartbeat.
func (s *Server) checkLogEndpoint(r *http.Request, id fleet.NodeID, logURL, logKey string) error {
	if logURL == "" {
		return nil
	}
	if n := len(logKey); n < api.MinLogKey || n > api.MaxLogKey {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "log_key", "a log_url needs a log_key of %d to %d characters", api.MinLogKey, api.MaxLogKey)
	}
	var label string
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		n, err := store.Get[store.Node](tx, string(id))
		if err != nil {
			return notFound("node", string(id))
		}
		label = n.Labels[LabelHost]
		return nil
	})
	if err != nil {
		return err
	}
	remote, _, _ := net.SplitHostPort(r.RemoteAddr)
	if err := checkLogURL(logURL, label, remote, r.Host); err != nil {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "log_url", "%v", err)
	}
	return nil
}

// checkLogURL checks an agent's log URL: absolute http or https, no
// userinfo, query or fragment, its host the node's host label or the
// address its heartbeat came from (remote), and not the server itself
// (self: the host:port the agent reached the server at).
func checkLogURL(raw, label, remote, self string) error {
	if len(raw) > 2048 {
		return fmt.Errorf("log_url is longer than 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("log_url does not parse: %v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("log_url must be an http:// or https:// URL, got scheme %q", u.Scheme)
	case u.User != nil:
		return fmt.Errorf("log_url may not carry user information")
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("log_url needs a host")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "":
		return fmt.Errorf("log_url may not have a query or fragment")
	}
	host := u.Hostname()
	if !sameHost(host, label) && !sameHost(host, remote) {
		return fmt.Errorf("log_url host %q is not the node's address (its %s label %q, or %q its heartbeat comes from)", clip(host, 256), LabelHost, label, remote)
	}
	if self != "" && hostPort(u.Host, u.Scheme) == hostPort(self, u.Scheme) {
		return fmt.Errorf("log_url %q is the server's own address", clip(raw, 256))
	}
	return nil
}

// sameHost compares hosts as names (case-insensitively) or as IPs.
func sameHost(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if ia, ib := net.ParseIP(a), net.ParseIP(b); ia != nil && ib != nil {
		return ia.Equal(ib)
	}
	return strings.EqualFold(a, b)
}

// hostPort is host:port with the scheme's port filled in and the host
// normalised, for comparing addresses.
func hostPort(hp, scheme string) string {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		h, p = hp, map[string]string{"https": "443"}[scheme]
		if p == "" {
			p = "80"
		}
	}
	h = strings.Trim(h, "[]")
	if ip := net.ParseIP(h); ip != nil {
		h = ip.String()
	}
	return strings.ToLower(net.JoinHostPort(h, p))
}

// logFollowClient reaches agents for follow answers, which last up to
// api.LogFollowFor: as logClient, with no bound on the whole exchange
// (workloadLogs bounds it).
var logFollowClient = &http.Client{CheckRedirect: logClient.CheckRedirect, Transport: logClient.Transport}

// logHeaders are the agent's headers passed on to the caller.
var logHeaders = []string{api.HeaderLogStart, api.HeaderLogSize, api.HeaderLogEnded}

// workloadLogs proxies a replica's log from the agent of its node:
// ?tail=N the last N bytes, ?from=OFFSET from that offset, &follow=true
// then the bytes as they are written, flushed as they come, until the run
// ends (the agent's answer ends), the caller goes away or
// api.LogFollowFor passes (see api.HeaderLogStart).
func (s *Server) workloadLogs(w http.ResponseWriter, r *http.Request) error {
	x, err := s.loadWorkload(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	rep, err := optIntParam(q, "replica", 0, int64(x.Spec.Replicas-1), 0)
	if err != nil {
		return err
	}
	replica := int(rep)
	tail, err := optIntParam(q, "tail", 0, api.MaxLogOffset, 0)
	if err != nil {
		return err
	}
	from, err := optIntParam(q, "from", 0, api.MaxLogOffset, -1)
	if err != nil {
		return err
	}
	if _, ok := q["tail"]; ok && from >= 0 {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "from", "from and tail exclude each other: tail=N is the last N bytes, from=OFFSET the bytes from that offset")
	}
	follow, err := boolParam(q, "follow")
	if err != nil {
		return err
	}
	// The node of the replica's current run, or the last one its agent
	// reported it started on.
	var node fleet.NodeID
	if x.Running != nil && replica < len(x.Running.Replicas) {
		node = x.Running.Replicas[replica].Node
	} else {
		node = lastNode(x, replica)
	}
	if node == "" {
		return apiErr(http.StatusNotFound, api.CodeNotFound, "", "replica %d of %q has not run on any node", replica, x.Spec.Name)
	}
	s.agents.mu.Lock()
	base, key := s.agents.logURL[node], s.agents.logKey[node]
	s.agents.mu.Unlock()
	if base == "" || key == "" {
		return apiErr(http.StatusServiceUnavailable, api.CodeUnavailable, "", "the agent of node %s has not said where it serves logs", node)
	}
	u, err := url.Parse(base)
	if err != nil {
		return err // checked at heartbeat
	}
	u = u.JoinPath("logs", x.Tenant, string(x.Spec.Name), strconv.Itoa(replica))
	aq := url.Values{}
	if tail > 0 {
		aq.Set("tail", strconv.FormatInt(tail, 10))
	}
	if from >= 0 {
		aq.Set("from", strconv.FormatInt(from, 10))
	}
	if follow {
		aq.Set("follow", "true")
	}
	u.RawQuery = aq.Encode()
	ctx, hc := r.Context(), logClient
	if follow {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, api.LogFollowFor+30*time.Second)
		defer cancel()
		hc = logFollowClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", api.SignLogRequest(key, http.MethodGet, req.URL.EscapedPath(), req.URL.RawQuery, string(node), time.Now().Add(api.LogSigLifetime)))
	resp, err := hc.Do(req)
	if err != nil {
		return apiErr(http.StatusServiceUnavailable, api.CodeUnavailable, "", "the agent of node %s does not answer", node)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "from", "from %d is past the end of the log of replica %d of %q (%s bytes)", from, replica, x.Spec.Name, clip(resp.Header.Get(api.HeaderLogSize), 20))
	case resp.StatusCode != http.StatusOK:
		return apiErr(http.StatusNotFound, api.CodeNotFound, "", "node %s has no log of replica %d of %q (status %d)", node, replica, x.Spec.Name, resp.StatusCode)
	}
	for _, h := range logHeaders {
		if v := resp.Header.Get(h); v != "" && len(v) <= 20 {
			w.Header().Set(h, v)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	body := io.LimitReader(resp.Body, maxLogBytes)
	if !follow {
		io.Copy(w, body)
		return nil
	}
	// Flushed as it comes: the agent writes what the replica wrote each
	// time it looks.
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil || rc.Flush() != nil {
				return nil
			}
		}
		if err != nil {
			return nil
		}
	}
}
