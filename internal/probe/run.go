package probe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
)

// Result is one attempt of a probe.
type Result struct {
	Probe  string
	Target policy.Target
	// At is the runner's clock when the attempt started.
	At time.Time
	// Latency is how long the attempt took (wall time), or the probe's
	// timeout when it failed.
	Latency time.Duration
	OK      bool
	Status  int
	// Err says why an attempt failed; it never holds a header's value.
	Err string
}

// DefaultConcurrency bounds the attempts a runner has in flight.
const DefaultConcurrency = 256

// maxResponseBytes is how much of a response an attempt reads.
const maxResponseBytes = 1 << 20

// Options configure a Runner.
type Options struct {
	// Concurrency bounds the attempts in flight (default
	// DefaultConcurrency). A probe that finds no free slot waits for one
	// at the front of the queue and counts the intervals it misses.
	Concurrency int
	// Clock stamps the attempts and decides which are due (default
	// time.Now); latency is always measured on the wall clock.
	Clock func() time.Time
	// Client sends the requests (default: NewClient()).
	Client *http.Client
	// Record receives every result, from the attempt's goroutine.
	Record func(Result)
}

// NewClient returns the HTTP client probes use: no redirects followed
// (a probe measures the endpoint it names), no proxy from the
// environment, keep-alive connections kept for the next attempt.
func NewClient() *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: MaxTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: MaxTimeout,
		ForceAttemptHTTP2:   true,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Runner runs probes on their intervals with bounded concurrency. Its
// methods are safe for concurrent use.
type Runner struct {
	opts Options
	sem  chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	probes map[string]*state

	missed atomic.Int64
}

type state struct {
	p    Probe
	next time.Time
	busy bool
	last *Result
}

// NewRunner returns a runner with no probes.
func NewRunner(o Options) *Runner {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Client == nil {
		o.Client = NewClient()
	}
	return &Runner{opts: o, sem: make(chan struct{}, o.Concurrency), probes: map[string]*state{}}
}

// Set replaces the probes. A probe that is unchanged keeps its schedule
// and its last result; new and changed ones are due at once.
func (r *Runner) Set(ps []Probe) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := make(map[string]*state, len(ps))
	for _, p := range ps {
		if st := r.probes[p.Name]; st != nil && same(st.p, p) {
			next[p.Name] = st
			continue
		}
		next[p.Name] = &state{p: p}
	}
	r.probes = next
}

func same(a, b Probe) bool {
	return a.Name == b.Name && a.URL == b.URL && a.Method == b.Method && a.Body == b.Body && a.HeadersFile == b.HeadersFile &&
		a.Interval == b.Interval && a.Timeout == b.Timeout && a.ExpectStatus == b.ExpectStatus && a.Target == b.Target &&
		a.From.String() == b.From.String()
}

// Len is the number of probes.
func (r *Runner) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.probes)
}

// Missed is the number of intervals probes have missed for want of a free
// slot since the runner started.
func (r *Runner) Missed() int64 { return r.missed.Load() }

// RunDue starts every probe that is due at the clock's now and not still
// running, oldest due first, as long as slots are free; it returns at
// once (the attempts run on their own goroutines) with the number
// started. A due probe that finds no slot stays due.
func (r *Runner) RunDue(ctx context.Context) int {
	now := r.opts.Clock()
	r.mu.Lock()
	due := make([]*state, 0, len(r.probes))
	for _, st := range r.probes {
		if !st.busy && !now.Before(st.next) {
			due = append(due, st)
		}
	}
	slices.SortFunc(due, func(a, b *state) int {
		if c := a.next.Compare(b.next); c != 0 {
			return c
		}
		return strings.Compare(a.p.Name, b.p.Name)
	})
	started := 0
	for _, st := range due {
		select {
		case r.sem <- struct{}{}:
		default:
			r.mu.Unlock()
			return started
		}
		if !st.next.IsZero() {
			if late := now.Sub(st.next); late >= st.p.Interval {
				r.missed.Add(int64(late / st.p.Interval))
			}
		}
		st.busy, st.next = true, now.Add(st.p.Interval)
		started++
		r.wg.Add(1)
		go r.attempt(ctx, st, st.p, now)
	}
	r.mu.Unlock()
	return started
}

func (r *Runner) attempt(ctx context.Context, st *state, p Probe, at time.Time) {
	defer r.wg.Done()
	res := Attempt(ctx, r.opts.Client, p)
	res.At = at
	<-r.sem
	r.mu.Lock()
	st.busy, st.last = false, &res
	r.mu.Unlock()
	if r.opts.Record != nil {
		r.opts.Record(res)
	}
}

// Wait waits for the attempts in flight.
func (r *Runner) Wait() { r.wg.Wait() }

// Run calls RunDue every tick until ctx ends, then waits for the attempts
// in flight (which ctx cancels).
func (r *Runner) Run(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	defer r.Wait()
	for {
		r.RunDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Status is a probe with its last result (nil before the first).
type Status struct {
	Probe Probe
	Last  *Result
	Next  time.Time
}

// Statuses returns every probe with its last result, by name.
func (r *Runner) Statuses() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Status, 0, len(r.probes))
	for _, st := range r.probes {
		s := Status{Probe: st.p, Next: st.next}
		if st.last != nil {
			l := *st.last
			s.Last = &l
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Probe.Name, b.Probe.Name) })
	return out
}

// Attempt sends p's request once and times it. It never takes longer
// than p.Timeout (plus the cost of returning).
func Attempt(ctx context.Context, c *http.Client, p Probe) Result {
	res := Result{Probe: p.Name, Target: p.Target, Latency: p.Timeout}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	var body io.Reader
	if p.Body != "" {
		body = strings.NewReader(p.Body)
	}
	req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, body)
	if err != nil {
		res.Err = "request: " + err.Error()
		return res
	}
	req.Header.Set("User-Agent", "arbiter-probe/1")
	if p.HeadersFile != "" {
		if err := addHeaders(req, p.HeadersFile); err != nil {
			res.Err = err.Error()
			return res
		}
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			res.Err = fmt.Sprintf("timed out after %v", p.Timeout)
		} else {
			res.Err = errText(err, p.URL)
		}
		return res
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
	resp.Body.Close()
	took := time.Since(start)
	res.Status = resp.StatusCode
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.Err = fmt.Sprintf("timed out after %v reading the response", p.Timeout)
	case err != nil:
		res.Err = "reading the response: " + errText(err, p.URL)
	case p.ExpectStatus != 0 && resp.StatusCode != p.ExpectStatus:
		res.Err = fmt.Sprintf("status %d, want %d", resp.StatusCode, p.ExpectStatus)
	case p.ExpectStatus == 0 && (resp.StatusCode < 200 || resp.StatusCode > 299):
		res.Err = fmt.Sprintf("status %d, want 2xx", resp.StatusCode)
	default:
		res.OK, res.Latency = true, min(took, p.Timeout)
	}
	return res
}

// errText is a transport error without the URL, which Go repeats in
// every message (the probe's name says which endpoint it was).
func errText(err error, u string) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			err = inner
		}
	}
	return strings.ReplaceAll(err.Error(), u, "<url>")
}

// addHeaders reads "Name: value" lines (blank lines and # comments
// ignored) from path into req. Messages name the line, never a value.
func addHeaders(req *http.Request, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("headers_file: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxHeadersBytes+1))
	if err != nil {
		return fmt.Errorf("headers_file: %v", err)
	}
	if len(data) > MaxHeadersBytes {
		return fmt.Errorf("headers_file: larger than %d bytes", MaxHeadersBytes)
	}
	h, err := ParseHeaders(data)
	if err != nil {
		return fmt.Errorf("headers_file %s: %v", path, err)
	}
	for k, vs := range h {
		if strings.EqualFold(k, "Host") {
			req.Host = vs[0]
			continue
		}
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return nil
}

// ParseHeaders parses a headers file: "Name: value" lines, blank lines
// and lines starting with # ignored. Errors name the line, never a value.
func ParseHeaders(data []byte) (http.Header, error) {
	h := http.Header{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxHeadersBytes)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, v, ok := strings.Cut(s, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !validHeaderName(k) {
			return nil, fmt.Errorf("line %d: want \"Name: value\"", line)
		}
		if strings.ContainsAny(v, "\x00\r\n") {
			return nil, fmt.Errorf("line %d: the value of %s has a control character", line, k)
		}
		h.Add(k, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %v", line+1, err)
	}
	return h, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}
