package probe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/probe/probetest"
)

func TestLoadDefaults(t *testing.T) {
	ps, err := Load("p.yaml", []byte(`probes:
  - name: coding-assistant
    url: https://assist.example.com/healthz
  - name: chat
    url: http://10.0.0.7:8080/v1/chat
    method: post
    body: '{"prompt":"ping"}'
    interval: 1s
    expect_status: 201
    from: node:gpu-a-1,node:gpu-a-2
    target: class:inference
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := ps[0], ps[1]
	if a.Method != "GET" || a.Interval != DefaultInterval || a.Timeout != DefaultTimeout || !a.From.Server ||
		a.Target != (policy.Target{Kind: policy.TargetService, Name: "coding-assistant"}) {
		t.Errorf("defaults: %+v", a)
	}
	if b.Method != "POST" || b.Timeout != time.Second || b.ExpectStatus != 201 || b.From.String() != "node:gpu-a-1,node:gpu-a-2" ||
		b.Target != (policy.Target{Kind: policy.TargetClass, Name: "inference"}) {
		t.Errorf("second: %+v", b)
	}
	if !b.From.Runs("gpu-a-2", "x") || b.From.Runs("gpu-b-1", "x") || a.From.Runs("gpu-a-1", "x") {
		t.Error("Runs")
	}
}

// TestLoadErrors: every problem is reported at once, each with its line
// and field.
func TestLoadErrors(t *testing.T) {
	_, err := Load("p.yaml", []byte(`probes:
  - name: a
    url: ftp://x
  - name: a
    url: http://user:pw@h/
    method: DELETE
  - name: "bad name"
    url: http://h/
    body: x
    interval: 100ms
  - name: c
    url: http://h/
    interval: 10s
    timeout: 20s
    expect_status: 700
    from: zone:q
    target: tenant:acme
`))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{
		"p.yaml:2:5: probes[0].url", "p.yaml:4:5: probes[1].url: the URL may not carry a user or password",
		"probes[1].method", "p.yaml:7:5: probes[2].name", "probes[2].body: a body goes with method POST or PUT",
		"probes[2].interval", "p.yaml:11:5: probes[3].timeout", "probes[3].expect_status", "probes[3].from", "probes[3].target",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if _, err := Load("p.yaml", []byte("probes:\n  - name: a\n    url: http://h/\n  - name: a\n    url: http://h/\n")); err == nil || !strings.Contains(err.Error(), "duplicate probe name") {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := Load("p.yaml", []byte("probes:\n  - name: a\n    urll: http://h/\n")); err == nil || !strings.Contains(err.Error(), "urll") {
		t.Errorf("unknown field: %v", err)
	}
	if err := CheckURL("http://h/" + strings.Repeat("a", MaxURLBytes)); err == nil {
		t.Error("a long URL passed")
	}
}

func TestParseHeaders(t *testing.T) {
	h, err := ParseHeaders([]byte("# secrets\nAuthorization: Bearer s3cret\n\nX-Team: ml\n"))
	if err != nil || h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Team") != "ml" {
		t.Fatalf("%v %v", h, err)
	}
	_, err = ParseHeaders([]byte("Authorization Bearer s3cret\n"))
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a bad line: %v (must name the line, never the value)", err)
	}
}

func probeOf(t *testing.T, url string, timeout time.Duration) Probe {
	t.Helper()
	return Probe{Name: "p", URL: url, Method: "GET", Interval: time.Second, Timeout: timeout,
		Target: policy.Target{Kind: policy.TargetService, Name: "p"}, From: From{Server: true}}
}

func TestAttempt(t *testing.T) {
	dir := t.TempDir()
	hf := filepath.Join(dir, "h")
	if err := os.WriteFile(hf, []byte("Authorization: Bearer s3cret\nHost: assist.example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var gotAuth, gotHost atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		gotHost.Store(r.Host)
		w.Write([]byte(strings.Repeat("x", 4<<20))) // more than an attempt reads
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	release := make(chan struct{})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	defer close(release)
	c := NewClient()
	ctx := context.Background()

	p := probeOf(t, hs.URL+"/ok", 5*time.Second)
	p.HeadersFile = hf
	r := Attempt(ctx, c, p)
	if !r.OK || r.Status != 200 || r.Latency <= 0 || r.Latency >= p.Timeout {
		t.Errorf("ok: %+v", r)
	}
	if gotAuth.Load() != "Bearer s3cret" || gotHost.Load() != "assist.example.com" {
		t.Errorf("headers: %v %v", gotAuth.Load(), gotHost.Load())
	}
	// A redirect is the endpoint's answer: not followed, and not 2xx.
	r = Attempt(ctx, c, probeOf(t, hs.URL+"/moved", time.Second))
	if r.OK || r.Status != http.StatusFound || r.Latency != time.Second {
		t.Errorf("redirect: %+v", r)
	}
	p = probeOf(t, hs.URL+"/moved", time.Second)
	p.ExpectStatus = http.StatusFound
	if r := Attempt(ctx, c, p); !r.OK {
		t.Errorf("expect_status 302: %+v", r)
	}
	// A failure counts as its whole timeout.
	r = Attempt(ctx, c, probeOf(t, hs.URL+"/fail", 700*time.Millisecond))
	if r.OK || r.Status != 503 || r.Latency != 700*time.Millisecond || !strings.Contains(r.Err, "503") {
		t.Errorf("503: %+v", r)
	}
	r = Attempt(ctx, c, probeOf(t, hs.URL+"/hang", 50*time.Millisecond))
	if r.OK || r.Latency != 50*time.Millisecond || !strings.Contains(r.Err, "timed out") {
		t.Errorf("hang: %+v", r)
	}
	p = probeOf(t, hs.URL+"/ok", time.Second)
	p.HeadersFile = filepath.Join(dir, "missing")
	if r := Attempt(ctx, c, p); r.OK || !strings.Contains(r.Err, "headers_file") {
		t.Errorf("missing headers file: %+v", r)
	}
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func newClock() *clock               { return &clock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)} }

// TestRunnerBounded: attempts in flight never exceed the concurrency; due
// probes that find no slot wait at the front and count their missed
// intervals; a probe is never run twice at once.
func TestRunnerBounded(t *testing.T) {
	url := probetest.DeadEndpoint(t) + "/"
	clk := newClock()
	var done atomic.Int64
	r := NewRunner(Options{Concurrency: 3, Clock: clk.Now, Record: func(Result) { done.Add(1) }})
	var ps []Probe
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		p := probeOf(t, url, 200*time.Millisecond)
		p.Name = n
		ps = append(ps, p)
	}
	r.Set(ps)
	ctx := context.Background()
	if n := r.RunDue(ctx); n != 3 {
		t.Fatalf("started %d, want 3 (the concurrency)", n)
	}
	if n := r.RunDue(ctx); n != 0 {
		t.Fatalf("started %d with every slot busy", n)
	}
	r.Wait()
	if done.Load() != 3 {
		t.Fatalf("recorded %d", done.Load())
	}
	clk.Add(3 * time.Second)
	// d and e waited: they go first, having missed 3 intervals each; a,
	// b and c are due again and one of them gets the last slot.
	if n := r.RunDue(ctx); n != 3 {
		t.Fatalf("started %d, want 3", n)
	}
	r.Wait()
	st := r.Statuses()
	for _, s := range st[3:] {
		if s.Last == nil || s.Last.OK {
			t.Errorf("%s: %+v", s.Probe.Name, s.Last)
		}
	}
	// a was due at 1s and ran at 3s: two intervals missed. d and e had
	// never run (nothing to miss).
	if r.Missed() != 2 {
		t.Errorf("missed %d intervals, want 2", r.Missed())
	}
	if st[0].Last == nil || st[1].Last == nil || !st[0].Next.Equal(clk.Now().Add(time.Second)) || !st[1].Next.Equal(clk.Now().Add(-2*time.Second)) {
		t.Errorf("a: %+v, b: %+v", st[0], st[1])
	}
}

func FuzzLoad(f *testing.F) {
	f.Add([]byte("probes:\n  - name: a\n    url: http://h/\n    interval: 1s\n    from: region:eastus\n"))
	f.Add([]byte("probes:\n  - name: a\n    url: https://h:8443/x?y=1\n    method: POST\n    body: '{}'\n    timeout: 10ms\n    from: node:a,node:b\n    target: selector:app=chat\n"))
	f.Add([]byte("probes: [{name: a, url: 'http://[::1]:80/'}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := Load("f.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not wrapped: %v", err)
			}
			return
		}
		for _, p := range ps {
			if p.Interval < MinInterval || p.Timeout > p.Interval || CheckURL(p.URL) != nil || len(p.Body) > MaxBodyBytes {
				t.Fatalf("accepted out of bounds: %+v", p)
			}
		}
	})
}

func FuzzParseHeaders(f *testing.F) {
	f.Add([]byte("Authorization: Bearer x\n# c\n\nX-A: b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHeaders(data)
		if err != nil {
			return
		}
		for k, vs := range h {
			if !validHeaderName(k) {
				t.Fatalf("bad name %q", k)
			}
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("bad value %q", v)
				}
			}
		}
	})
}

// BenchmarkAttempt is one probe attempt against a loopback endpoint that
// answers at once (keep-alive connection reused): the CPU a probe costs
// per attempt, client and endpoint together.
//
//	go test ./internal/probe -run XXX -bench Attempt
func BenchmarkAttempt(b *testing.B) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer hs.Close()
	c := NewClient()
	p := Probe{Name: "p", URL: hs.URL + "/healthz", Method: "GET", Interval: time.Second, Timeout: time.Second}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := Attempt(ctx, c, p); !r.OK {
			b.Fatal(r.Err)
		}
	}
}
