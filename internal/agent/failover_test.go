package agent

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAgentFollowsLeader (issue 14, item 3): an agent given several
// servers passes one that is down, follows a follower's redirect to the
// leader and sends its heartbeats to the leader from then on.
func TestAgentFollowsLeader(t *testing.T) {
	e := newEnv(t, 0)
	target, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	var heartbeats atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/heartbeat") {
			heartbeats.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer leader.Close()
	var redirected atomic.Int32
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			proxy.ServeHTTP(w, r) // a follower serves reads itself
			return
		}
		redirected.Add(1)
		w.Header().Set("X-Arbiter-Leader", leader.URL)
		w.Header().Set("Location", leader.URL+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	defer follower.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close()

	e.startAgentWith("n1", func(o *Options) { o.Server = strings.Join([]string{down, follower.URL, leader.URL}, ",") })
	e.waitFor("three heartbeats at the leader", 20*time.Second, func() bool { return heartbeats.Load() >= 3 })
	ns, err := e.admin.Nodes(e.ctx, "")
	if err != nil || len(ns) != 1 || ns[0].ID != "n1" {
		t.Fatalf("nodes %+v %v; want n1 registered", ns, err)
	}
	if n := redirected.Load(); n != 1 {
		t.Fatalf("the follower redirected %d writes; want 1 (the client keeps the leader after it)", n)
	}
}
