package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/agent"
	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/server"
	"github.com/arbiterhq/arbiter/internal/store"
)

// followScript writes a line, waits for the test's go file, writes
// another and exits.
const followScript = `#!/bin/sh
echo "first line"
while [ ! -f "$GO_FILE" ]; do sleep 0.02; done
echo "second line"
`

// TestWorkloadLogsFollow (issue 22, point 4): `workload logs --follow`
// against a real server and a real in-process agent prints what is in
// the log, then a line the replica writes after the command started,
// reconnecting from where it got to when an answer ends (the agent
// bounds each to 150 ms here), and exits 0 when the replica exits.
// Another tenant cannot follow the log (404); bad offsets are 400s
// naming the parameter.
func TestWorkloadLogsFollow(t *testing.T) {
	cleanEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	st, err := store.OpenBolt(filepath.Join(dir, "arbiter.db"), &store.BoltOptions{MaxBatchDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(ctx, server.Options{Store: st, AdminToken: testAdmin, Interval: 200 * time.Millisecond, MinInterval: 10 * time.Millisecond,
		RateLimit: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var follows atomic.Int64 // follow answers asked of the server
	h := s.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/logs") && r.URL.Query().Get("follow") == "true" {
			follows.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	srvDone := make(chan struct{})
	go func() { s.Run(ctx); close(srvDone) }()
	admin := client.New(hs.URL, testAdmin)
	g8 := api.GPUs(resource.GPUs(8))
	for _, name := range []string{"team", "other"} {
		if _, err := admin.CreateTenant(ctx, api.Tenant{Name: name, Quotas: []api.Quota{{Flavor: "A100-80G", Limit: &g8}}}); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := admin.CreateNodeToken(ctx, "n1", "")
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{Server: hs.URL, Token: tok.Secret, NodeID: "n1", Region: "local", Block: "b0",
		Inventory: agent.Fake("n1", 8, "A100-80G"), DataDir: filepath.Join(dir, "agent"), CheckpointRoot: filepath.Join(dir, "ckpt"),
		Interval: 300 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, StaleGrace: 500 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), AllowRoot: true, LogFollowFor: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithCancel(ctx)
	agentDone := make(chan struct{})
	go func() { a.Run(actx); close(agentDone) }()
	t.Cleanup(func() {
		acancel()
		<-agentDone
		a.Shutdown()
		cancel()
		<-srvDone
		hs.Close()
		st.Close()
	})

	waitUntil(t, "the agent's node to register", 20*time.Second, func() bool {
		ns, err := admin.Nodes(ctx, "")
		return err == nil && len(ns) == 1
	})
	script, goFile := filepath.Join(dir, "job.sh"), filepath.Join(dir, "go")
	if err := os.WriteFile(script, []byte(followScript), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Submit(ctx, "team", api.WorkloadSpec{Name: "job", GPUs: g8, Replicas: 1, Priority: "normal",
		Flavors: []string{"A100-80G"}, Regions: []string{"local"},
		Command: &api.Command{Argv: []string{"/bin/sh", script}, Env: map[string]string{"GO_FILE": goFile}}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first line in the replica's log", 20*time.Second, func() bool {
		b, err := admin.Logs(ctx, "team", "job", 0, 0)
		return err == nil && strings.Contains(string(b), "first line")
	})

	// The hostile side, while it runs.
	otherTok, err := admin.CreateToken(ctx, "other", "")
	if err != nil {
		t.Fatal(err)
	}
	other := client.New(hs.URL, otherTok.Secret)
	for _, tenant := range []string{"team", "other"} {
		err := other.FollowLogs(ctx, tenant, "job", 0, 0, io.Discard)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
			t.Errorf("tenant other following %s's job: %v, want a 404", tenant, err)
		}
	}
	teamTok, err := admin.CreateToken(ctx, "team", "")
	if err != nil {
		t.Fatal(err)
	}
	team := client.New(hs.URL, teamTok.Secret)
	for _, tc := range []struct{ query, field string }{
		{"from=-1&follow=true", "from"},
		{"from=99999999999999999999&follow=true", "from"},
		{"from=1099511627777", "from"},       // past api.MaxLogOffset
		{"from=1000000&follow=true", "from"}, // past the log's end
		{"from=0&tail=5", "from"},
		{"follow=yes", "follow"},
		{"from=", "from"},
	} {
		err := team.Do(ctx, "GET", "/v1/tenants/team/workloads/job/logs?"+tc.query, nil, nil)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != tc.field {
			t.Errorf("logs?%s: %v, want a 400 naming %s", tc.query, err, tc.field)
		}
	}

	// The command, its output through a pipe.
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	var errOut strings.Builder
	go func() {
		c := Main([]string{"workload", "logs", "job", "--follow", "--server", hs.URL, "--token-file", secretFile(t, "team.token", teamTok.Secret), "--tenant", "team"}, pw, &errOut)
		pw.Close()
		code <- c
	}()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(30 * time.Second)
	next := func(what string) (string, bool) {
		t.Helper()
		select {
		case l, ok := <-lines:
			return l, ok
		case <-deadline:
			t.Fatalf("timed out waiting for %s; stderr: %s", what, errOut.String())
		}
		return "", false
	}
	if l, _ := next("the log's header"); !strings.HasPrefix(l, "--- arbiter: replica 0 of team/job") {
		t.Fatalf("first line %q, want the agent's header", l)
	}
	if l, _ := next("the first line"); l != "first line" {
		t.Fatalf("got %q, want the first line", l)
	}
	// The command goes on asking from where it got to when an answer
	// ends: let it do so twice before the replica writes again.
	start := follows.Load()
	waitUntil(t, "two more follow answers", 20*time.Second, func() bool { return follows.Load() >= start+2 })
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if l, _ := next("the second line"); l != "second line" {
		t.Fatalf("got %q, want the second line (once, after the first)", l)
	}
	// Then the agent's own last line, and the end.
	if l, _ := next("the agent's exit line"); !strings.HasPrefix(l, "--- arbiter: exited with code 0") {
		t.Fatalf("got %q after the last line, want the agent's exit line", l)
	}
	if l, ok := next("the end of the output"); ok {
		t.Fatalf("got %q after the agent's exit line, want the command to end", l)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("logs --follow exited %d when the replica ended, want 0: %s", c, errOut.String())
		}
	case <-deadline:
		t.Fatal("logs --follow did not end with the replica")
	}
}

// waitUntil polls cond until it holds or d passes.
func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLogsFollowFlushed: the server passes a follow answer on as the
// agent writes it (the first line arrives while the agent's answer is
// still open), and the client asks again from the offset it got to when
// an answer ends, until one says the run has ended and it has all.
func TestLogsFollowFlushed(t *testing.T) {
	cleanEnv(t)
	gotA := make(chan struct{})
	var mu sync.Mutex
	var froms []string
	agentSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		froms = append(froms, q.Get("from"))
		mu.Unlock()
		if q.Get("follow") != "true" {
			http.Error(w, "want follow", http.StatusBadRequest)
			return
		}
		h := w.Header()
		h.Set(api.HeaderLogStart, q.Get("from"))
		if q.Get("from") == "0" {
			h.Set(api.HeaderLogSize, "2")
			h.Set(api.HeaderLogEnded, "false")
			io.WriteString(w, "a\n")
			w.(http.Flusher).Flush()
			select {
			case <-gotA:
			case <-time.After(20 * time.Second):
				return
			}
			io.WriteString(w, "b\n")
			return // a bounded answer's end
		}
		h.Set(api.HeaderLogSize, "4")
		h.Set(api.HeaderLogEnded, "true")
	}))
	defer agentSrv.Close()
	url := logsWorldWith(t, agentSrv.URL)
	cl := client.New(url, testAdmin)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- cl.FollowLogs(context.Background(), "contoso", "job", 0, 0, pw); pw.Close() }()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() || sc.Text() != "a" {
		t.Fatalf("first line %q, want a", sc.Text())
	}
	close(gotA) // the agent's answer is still open: the server flushed a
	var rest []string
	for sc.Scan() {
		rest = append(rest, sc.Text())
	}
	if err := <-done; err != nil || strings.Join(rest, ",") != "b" {
		t.Fatalf("then %q, %v; want b and nil", rest, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(froms, ",") != "0,4" {
		t.Errorf("the agent was asked from %v, want 0 then 4", froms)
	}
}
