package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

const tok = "secret-token-0123456789"

// seen is what one test server received.
type seen struct {
	Method, Path, Auth, Key, Body string
}

// recorder is a test server that records every request and answers with
// its handler.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newRecorder(t *testing.T, h http.HandlerFunc) *recorder {
	rc := &recorder{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, seen{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get(api.HeaderIdempotencyKey), string(b)})
		rc.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *recorder) seen() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seen(nil), rc.reqs...)
}

// leader answers every request with a tenant.
func leader(t *testing.T) *recorder {
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"name":"contoso"}`)
	})
}

// follower answers 307 to target's URL, as an HA replica does.
func follower(t *testing.T, target func() string) *recorder {
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Arbiter-Leader", target())
		w.Header().Set("Location", target()+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
}

// noLeader answers 503 NoLeader with Retry-After.
func noLeader(t *testing.T) *recorder {
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"code":"NoLeader","message":"no leader is known"}`)
	})
}

// down returns the URL of a server that is not running.
func down(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}

// dropper reads the request and drops the connection without an answer.
func dropper(t *testing.T) *recorder {
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestFollowsLeaderRedirect: a write sent to a follower is re-sent, body
// and token intact, to the leader it names, which the client then keeps.
func TestFollowsLeaderRedirect(t *testing.T) {
	ld := leader(t)
	fl := follower(t, func() string { return ld.URL })
	c := New(fl.URL+" , "+ld.URL+"/", tok)
	for i := range 3 {
		if _, err := c.CreateTenant(ctx(t), api.Tenant{Name: "contoso"}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := len(fl.seen()); n != 1 {
		t.Fatalf("the follower got %d requests; after the first the client should go to the leader", n)
	}
	got := ld.seen()
	if len(got) != 3 {
		t.Fatalf("the leader got %d requests, want 3", len(got))
	}
	if g := got[0]; g.Method != "POST" || g.Path != "/v1/tenants" || g.Auth != "Bearer "+tok || !strings.Contains(g.Body, `"contoso"`) {
		t.Fatalf("the re-sent request: %+v", g)
	}
	if c.Current() != ld.URL {
		t.Fatalf("current %s, want the leader %s", c.Current(), ld.URL)
	}
}

// TestRefusesRedirectToUnconfiguredOrigin (hostile): a redirect to a
// server the user did not name is not followed, and the token never
// reaches it; the error says so.
func TestRefusesRedirectToUnconfiguredOrigin(t *testing.T) {
	evil := leader(t)
	ld := leader(t)
	fl := follower(t, func() string { return evil.URL })
	for _, servers := range []string{fl.URL, fl.URL + "," + ld.URL} {
		c := New(servers, tok)
		_, err := c.CreateTenant(ctx(t), api.Tenant{Name: "contoso"})
		var re *RedirectError
		if !errors.Is(err, ErrRedirectRefused) || !errors.As(err, &re) || !strings.Contains(re.Location, evil.URL) {
			t.Fatalf("servers %s: %v, want ErrRedirectRefused naming %s", servers, err, evil.URL)
		}
		if _, err := c.Tenant(ctx(t), "contoso"); !errors.Is(err, ErrRedirectRefused) {
			t.Fatalf("a GET: %v", err)
		}
	}
	if n := len(evil.seen()); n != 0 {
		t.Fatalf("the unconfigured server got %d requests: %+v", n, evil.seen())
	}
	if n := len(ld.seen()); n != 0 {
		t.Fatalf("the refused request went to the other server (%d)", n)
	}
	// The same host on another port is another origin.
	other := follower(t, func() string { return strings.Replace(ld.URL, "127.0.0.1", "localhost", 1) })
	if _, err := New(other.URL+","+ld.URL, tok).CreateTenant(ctx(t), api.Tenant{Name: "x"}); !errors.Is(err, ErrRedirectRefused) {
		t.Fatalf("a redirect to another host name: %v", err)
	}
}

// TestFailsOverNoLeaderAndDown: a replica without a leader and one that
// is down are passed for the next; even a POST without a key goes on
// (neither processed it).
func TestFailsOverNoLeaderAndDown(t *testing.T) {
	ld := leader(t)
	nl := noLeader(t)
	c := New(strings.Join([]string{down(t), nl.URL, ld.URL}, ","), tok)
	if _, err := c.CreateTenant(ctx(t), api.Tenant{Name: "contoso"}); err != nil {
		t.Fatal(err)
	}
	if len(nl.seen()) != 1 || len(ld.seen()) != 1 || c.Current() != ld.URL {
		t.Fatalf("no-leader %d, leader %d requests, current %s", len(nl.seen()), len(ld.seen()), c.Current())
	}
	// The next call goes to the leader directly.
	if _, err := c.Tenant(ctx(t), "contoso"); err != nil || len(ld.seen()) != 2 || len(nl.seen()) != 1 {
		t.Fatalf("%v; leader %d, no-leader %d", err, len(ld.seen()), len(nl.seen()))
	}
}

// TestRetriesOnlyIdempotentAfterDrop: a connection dropped after the
// request was sent is retried on the next server for a GET and a
// submission (its Idempotency-Key the same), not for a POST without a
// key; that one errs, and the next call starts at the next server.
func TestRetriesOnlyIdempotentAfterDrop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		call  func(*Client) error
		retry bool
	}{
		{"get", func(c *Client) error { _, err := c.Tenant(ctx(t), "contoso"); return err }, true},
		{"submit", func(c *Client) error { _, err := c.Submit(ctx(t), "contoso", api.WorkloadSpec{Name: "a"}); return err }, true},
		{"cancel", func(c *Client) error { _, err := c.Cancel(ctx(t), "contoso", "a"); return err }, true},
		{"post without a key", func(c *Client) error { _, err := c.CreateTenant(ctx(t), api.Tenant{Name: "x"}); return err }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dr, ld := dropper(t), leader(t)
			c := New(dr.URL+","+ld.URL, tok)
			err := tc.call(c)
			switch {
			case tc.retry && (err != nil || len(ld.seen()) != 1):
				t.Fatalf("%v; the second server got %d requests, want 1", err, len(ld.seen()))
			case !tc.retry && (err == nil || len(ld.seen()) != 0):
				t.Fatalf("%v; the second server got %d requests, want an error and 0", err, len(ld.seen()))
			}
			if tc.retry && ld.seen()[0].Key != dr.seen()[0].Key {
				t.Fatalf("the retry's key %q differs from the first %q", ld.seen()[0].Key, dr.seen()[0].Key)
			}
			if tc.name == "submit" && len(ld.seen()[0].Key) != 32 {
				t.Fatalf("the submission's key %q is not 128-bit hex", ld.seen()[0].Key)
			}
			if c.Current() != ld.URL {
				t.Fatalf("after the drop the current server is %s, want %s", c.Current(), ld.URL)
			}
		})
	}
}

// TestRetriesAfterTimeout: a server that does not answer within the
// client's timeout is passed for the next on an idempotent call.
func TestRetriesAfterTimeout(t *testing.T) {
	stuck := make(chan struct{})
	hung := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
	})
	defer close(stuck)
	ld := leader(t)
	c := New(hung.URL+","+ld.URL, tok)
	c.hc.Timeout = 200 * time.Millisecond
	if _, err := c.Tenant(ctx(t), "contoso"); err != nil || len(ld.seen()) != 1 {
		t.Fatalf("%v; the second server got %d requests", err, len(ld.seen()))
	}
}

// TestSingleServerUnchanged: with one server there is no retry: a down
// server or a 503 is the call's error at once.
func TestSingleServerUnchanged(t *testing.T) {
	if _, err := New(down(t), tok).Tenant(ctx(t), "contoso"); err == nil {
		t.Fatal("a down server answered")
	}
	nl := noLeader(t)
	_, err := New(nl.URL, tok).CreateTenant(ctx(t), api.Tenant{Name: "x"})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != "NoLeader" || ae.Status != 503 || len(nl.seen()) != 1 {
		t.Fatalf("%v, %d requests; want the NoLeader error after one", err, len(nl.seen()))
	}
	ld := leader(t)
	if _, err := New(strings.TrimPrefix(ld.URL, "http://"), tok).Tenant(ctx(t), "x"); err != nil {
		t.Fatalf("a server without a scheme: %v", err)
	}
}

// TestAllServersDown: the call ends with the transport's error once the
// failover budget is spent, not before the context, not hanging.
func TestAllServersDown(t *testing.T) {
	c := New(down(t)+","+down(t), tok)
	c.SetFailoverTimeout(300 * time.Millisecond)
	if _, err := c.Tenant(ctx(t), "contoso"); err == nil || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("%v, want a connection error", err)
	}
	// A context that ends first ends the call.
	cx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New(down(t)+","+down(t), tok).Tenant(cx, "contoso"); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
}

// TestStreamResumesOnNextServer: an event stream whose replica dies is
// opened again on the next server from the last event seen.
func TestStreamResumesOnNextServer(t *testing.T) {
	sse := func(w http.ResponseWriter, seqs ...int) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, s := range seqs {
			fmt.Fprintf(w, "id: %d\nevent: X\ndata: {\"seq\":%d,\"type\":\"X\"}\n\n", s, s)
		}
		w.(http.Flusher).Flush()
	}
	first := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, 1, 2)
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close() // the replica dies mid-stream
	})
	second := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, 3)
		<-r.Context().Done()
	})
	c := New(first.URL+","+second.URL, tok)
	var got []int64
	stop := errors.New("stop")
	last, err := c.StreamEvents(ctx(t), 0, func(e api.Event) error {
		got = append(got, e.Seq)
		if e.Seq == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || last != 3 || fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("last %d, events %v, err %v", last, got, err)
	}
	if s := second.seen(); len(s) != 1 || s[0].Path != "/v1/events?after=2" {
		t.Fatalf("the second server was asked %+v, want after=2", s)
	}
}

func TestOriginOf(t *testing.T) {
	for in, want := range map[string]string{
		"http://a:7070":         "http://a:7070",
		"HTTP://A:7070/x":       "http://a:7070",
		"http://a":              "http://a:80",
		"https://a":             "https://a:443",
		"https://a:443/":        "https://a:443",
		"http://[::1]:7070":     "http://[::1]:7070",
		"http://user@a:1/p?q=1": "http://a:1",
		"not a url":             "",
	} {
		if got := originOf(in); got != want {
			t.Errorf("originOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedirectLoopEnds: two replicas that name each other end the call
// with ErrTooManyRedirects instead of looping.
func TestRedirectLoopEnds(t *testing.T) {
	var a, b *recorder
	a = follower(t, func() string { return b.URL })
	b = follower(t, func() string { return a.URL })
	c := New(a.URL+","+b.URL, tok)
	if _, err := c.CreateTenant(ctx(t), api.Tenant{Name: "x"}); !errors.Is(err, ErrTooManyRedirects) {
		t.Fatalf("%v, want ErrTooManyRedirects", err)
	}
}

// TestRedirectToDeadLeader: a follower that still names a leader that
// died sends the client there; the refused connection moves it on to the
// replica that leads now.
func TestRedirectToDeadLeader(t *testing.T) {
	dead := down(t)
	ld := leader(t)
	fl := follower(t, func() string { return dead })
	c := New(strings.Join([]string{fl.URL, dead, ld.URL}, ","), tok)
	if _, err := c.CreateTenant(ctx(t), api.Tenant{Name: "x"}); err != nil || len(ld.seen()) != 1 || c.Current() != ld.URL {
		t.Fatalf("%v; leader %d requests, current %s", err, len(ld.seen()), c.Current())
	}
}
