package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/server"
	"github.com/arbiterhq/arbiter/internal/store"
)

// TestServerFlagListsReplicas (issue 14, item 3): --server and
// ARBITER_SERVER take several URLs; the CLI passes a replica that is
// down and follows a follower's redirect to the leader.
func TestServerFlagListsReplicas(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "a.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const admin = "admin-secret-for-cli-tests-0123"
	s, err := server.New(ctx, server.Options{Store: st, AdminToken: admin, RateLimit: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	lead := httptest.NewServer(s.Handler())
	defer lead.Close()
	var redirected atomic.Int32
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			s.Handler().ServeHTTP(w, r) // followers serve reads
			return
		}
		redirected.Add(1)
		w.Header().Set("X-Arbiter-Leader", lead.URL)
		w.Header().Set("Location", lead.URL+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	defer follower.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + l.Addr().String()
	l.Close()

	servers := strings.Join([]string{downURL, follower.URL, lead.URL}, ",")
	var out, errb bytes.Buffer
	if code := Main([]string{"tenant", "create", "t1", "--server", servers, "--token", admin}, &out, &errb); code != 0 {
		t.Fatalf("tenant create: %d %s", code, errb.String())
	}
	if redirected.Load() != 1 {
		t.Fatalf("the follower redirected %d writes, want 1", redirected.Load())
	}
	t.Setenv("ARBITER_SERVER", downURL+","+follower.URL)
	out.Reset()
	if code := Main([]string{"tenant", "list", "--token", admin, "-o", "json"}, &out, &errb); code != 0 {
		t.Fatalf("tenant list: %d %s", code, errb.String())
	}
	var ts []api.Tenant
	if err := json.Unmarshal(out.Bytes(), &ts); err != nil || len(ts) != 1 || ts[0].Name != "t1" {
		t.Fatalf("tenant list through ARBITER_SERVER: %v %s", err, out.String())
	}
	// A write redirected to a server the list does not name is refused.
	if code := Main([]string{"tenant", "create", "t2", "--server", follower.URL, "--token", admin}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "not one of the configured servers") {
		t.Fatalf("a redirect to an unnamed server: %d %s", code, errb.String())
	}
}
