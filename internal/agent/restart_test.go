package agent

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/server"
	"github.com/arbiterhq/arbiter/internal/store"
)

// startScript appends one line per start of a replica, then runs until
// stopped.
const startScript = `#!/bin/sh
echo $$ >> "$OUTDIR/$ARBITER_WORKLOAD-$ARBITER_REPLICA.starts"
trap 'exit 0' TERM
sleep 600 & wait $!
`

// restartable is a control plane that can be stopped and started again
// on the same bbolt file, admin token file and address, as a process
// upgrade would.
type restartable struct {
	t         *testing.T
	dir, addr string
	lostAfter time.Duration

	mu      sync.Mutex
	okSince map[string]time.Time // node -> last heartbeat answered 200
	stop    func()
}

// start opens the store and serves on r.addr until stop.
func (r *restartable) start() {
	r.t.Helper()
	st, err := store.OpenBolt(filepath.Join(r.dir, "arbiter.db"), &store.BoltOptions{MaxBatchDelay: time.Millisecond})
	if err != nil {
		r.t.Fatal(err)
	}
	admin, err := server.AdminTokenFile(filepath.Join(r.dir, "admin.token"))
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := server.New(ctx, server.Options{Store: st, AdminToken: admin, Interval: 200 * time.Millisecond, MinInterval: 10 * time.Millisecond,
		NodeLostAfter: r.lostAfter, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		r.t.Fatal(err)
	}
	var ln net.Listener
	deadline := time.Now().Add(5 * time.Second)
	for ln == nil {
		if ln, err = net.Listen("tcp", r.addr); err != nil {
			if time.Now().After(deadline) {
				r.t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // the old listener's port is being released
			ln = nil
		}
	}
	r.addr = ln.Addr().String()
	hs := &http.Server{Handler: r.observe(s.Handler())}
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	wg.Go(func() { hs.Serve(ln) })
	r.stop = func() {
		hs.Close() // as a killed process: every connection drops
		cancel()
		wg.Wait()
		st.Close()
	}
}

// observe records each node's successful heartbeats.
func (r *restartable) observe(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := &statusRec{ResponseWriter: w}
		h.ServeHTTP(rec, req)
		if id, ok := strings.CutSuffix(strings.TrimPrefix(req.URL.Path, "/v1/nodes/"), "/heartbeat"); ok && rec.status == http.StatusOK {
			r.mu.Lock()
			r.okSince[id] = time.Now()
			r.mu.Unlock()
		}
	})
}

type statusRec struct {
	http.ResponseWriter
	status int
}

func (s *statusRec) WriteHeader(c int) {
	if s.status == 0 {
		s.status = c
	}
	s.ResponseWriter.WriteHeader(c)
}

func (s *statusRec) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRec) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// heartbeatAfter reports whether every node had a heartbeat answered
// after t.
func (r *restartable) heartbeatAfter(t time.Time, nodes []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range nodes {
		if !r.okSince[n].After(t) {
			return false
		}
	}
	return true
}

// testLog writes lines to a test's log until closed.
type testLog struct {
	mu     sync.Mutex
	t      *testing.T
	closed bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (l *testLog) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// TestServerRestartKeepsAgents (issue 12, item 9): agents with node
// tokens run replicas while the server is restarted again and again on
// the same store and admin token file. No node is lost, nothing is
// preempted or requeued and no replica starts twice — on today's code
// the first restart deleted every node token, so every agent got 401
// from then on, every node was marked lost and its work requeued while
// the old replicas ran on.
func TestServerRestartKeepsAgents(t *testing.T) {
	const restarts = 5
	// The lease each heartbeat grants: a restart that outlasts it makes the
	// agents' fences stop their replicas, as designed, so it is longer than
	// a restart takes on a loaded CI machine (at 1.5 s, CI runs saw every
	// replica stopped and started again with no node lost and nothing
	// preempted). What the test catches is a restart that loses state.
	const lostAfter = 4 * time.Second
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	os.MkdirAll(out, 0o755)
	jobScript := filepath.Join(dir, "job.sh")
	os.WriteFile(jobScript, []byte(startScript), 0o755)
	// The agents' logs go to the test's, shown when it fails: which
	// replica was stopped, fenced or started, and when (the first cleanup
	// registered runs last, after the agents have stopped).
	logs := &testLog{t: t}
	t.Cleanup(logs.close)
	srv := &restartable{t: t, dir: dir, addr: "127.0.0.1:0", lostAfter: lostAfter, okSince: map[string]time.Time{}}
	srv.start()
	url := "http://" + srv.addr
	adminSecret, _ := server.AdminTokenFile(filepath.Join(dir, "admin.token"))
	admin := client.New(url, adminSecret)
	ctx := context.Background()
	g32 := api.GPUs(resource.GPUs(32))
	if _, err := admin.CreateTenant(ctx, api.Tenant{Name: "team", Quotas: []api.Quota{{Flavor: "A100-80G", Guaranteed: g32, Limit: &g32}}}); err != nil {
		t.Fatal(err)
	}
	nodes := []string{"r1", "r2", "r3", "r4"}
	var cancels []func()
	for _, id := range nodes {
		tok, err := admin.CreateNodeToken(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(Options{Server: url, Token: tok.Secret, NodeID: id, Region: "local", Block: "b0",
			Inventory: Fake(id, 8, "A100-80G"), DataDir: filepath.Join(dir, "agent-"+id), CheckpointRoot: filepath.Join(dir, "ckpt"),
			Interval: 300 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, StaleGrace: 500 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil)).With("node", id), AllowRoot: true})
		if err != nil {
			t.Fatal(err)
		}
		actx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { a.Run(actx); close(done) }()
		cancels = append(cancels, func() { cancel(); <-done; a.Shutdown() })
	}
	t.Cleanup(func() {
		for _, c := range cancels {
			c()
		}
		srv.stop()
	})
	waitCond(t, 10*time.Second, "the agents registered", func() bool { ns, _ := admin.Nodes(ctx, ""); return len(ns) == len(nodes) })
	// Work on every node: a 2-replica gang and two single replicas.
	jobs := map[string]int{"gang": 2, "solo1": 1, "solo2": 1}
	for name, replicas := range jobs {
		_, err := admin.Submit(ctx, "team", api.WorkloadSpec{Name: name, GPUs: api.GPUs(resource.GPUs(8)), Replicas: replicas, Flavors: []string{"A100-80G"}, Regions: []string{"local"},
			Command: &api.Command{Argv: []string{"/bin/sh", jobScript}, Env: map[string]string{"OUTDIR": out}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	startsOf := func(name string, replica int) int {
		b, _ := os.ReadFile(filepath.Join(out, name+"-"+string(rune('0'+replica))+".starts"))
		n := 0
		for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
			n++
		}
		return n
	}
	allStarted := func() bool {
		for name, replicas := range jobs {
			for i := range replicas {
				if startsOf(name, i) == 0 {
					return false
				}
			}
		}
		return true
	}
	waitCond(t, 20*time.Second, "every replica started", allStarted)
	// Running once every replica's start has been reported (Starting
	// before that).
	waitCond(t, 20*time.Second, "every workload shown Running", func() bool {
		for name := range jobs {
			if w, err := admin.Workload(ctx, "team", name); err != nil || w.State != "Running" {
				return false
			}
		}
		return true
	})
	placed := map[string]string{}
	for name := range jobs {
		w, err := admin.Workload(ctx, "team", name)
		if err != nil {
			t.Fatal(err)
		}
		placed[name] = placement(w)
	}

	for i := range restarts {
		down := time.Now()
		srv.stop()
		stopped := time.Now()
		srv.start()
		back := time.Now()
		// Every agent is served again, and still is once a node that
		// missed heartbeats would have been lost.
		waitCond(t, 10*time.Second, "heartbeats after the restart", func() bool { return srv.heartbeatAfter(back, nodes) })
		served := time.Now()
		waitCond(t, 10*time.Second, "heartbeats past the lost timeout", func() bool { return srv.heartbeatAfter(back.Add(lostAfter+200*time.Millisecond), nodes) })
		t.Logf("restart %d: stop %v, start %v, every agent served again %v after the stop; every agent heartbeated through it",
			i+1, stopped.Sub(down).Round(time.Millisecond), back.Sub(stopped).Round(time.Millisecond), served.Sub(down).Round(time.Millisecond))
	}

	lost, err := countEvents(ctx, admin, "NodeLost")
	if err != nil {
		t.Fatal(err)
	}
	requeued, err := countEvents(ctx, admin, "WorkloadPreempted")
	if err != nil {
		t.Fatal(err)
	}
	placedEvents, err := countEvents(ctx, admin, "WorkloadPlaced")
	if err != nil {
		t.Fatal(err)
	}
	if placedEvents != len(jobs) {
		t.Errorf("%d WorkloadPlaced events for %d workloads: something was placed again", placedEvents, len(jobs))
	}
	preempted := 0
	for name, replicas := range jobs {
		w, err := admin.Workload(ctx, "team", name)
		if err != nil {
			t.Fatal(err)
		}
		preempted += w.Preemptions
		if w.State != "Running" || placement(w) != placed[name] {
			t.Errorf("%s after the restarts: %s on %s, was Running on %s", name, w.State, placement(w), placed[name])
		}
		for r := range replicas {
			if n := startsOf(name, r); n != 1 {
				t.Errorf("replica %d of %s started %d times", r, name, n)
			}
		}
	}
	ns, err := admin.Nodes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.Down {
			t.Errorf("node %s is down after the restarts", n.ID)
		}
	}
	t.Logf("%d restarts with %d agents running %d replicas: %d NodeLost, %d preempted events, %d preemptions", restarts, len(nodes), 4, lost, requeued, preempted)
	if lost != 0 || requeued != 0 || preempted != 0 {
		t.Errorf("restarts lost %d nodes and preempted %d workloads (%d preemptions)", lost, requeued, preempted)
	}
}

func placement(w api.Workload) string {
	if w.Running == nil {
		return "-"
	}
	var b strings.Builder
	for _, r := range w.Running.Replicas {
		b.WriteString(r.Node + ";")
	}
	return b.String()
}

func countEvents(ctx context.Context, c *client.Client, typ string) (int, error) {
	n := 0
	var after int64
	for {
		page, err := c.Events(ctx, after, 0, 1000)
		if err != nil {
			return 0, err
		}
		for _, ev := range page.Items {
			if ev.Type == typ {
				n++
			}
		}
		if len(page.Items) == 0 || page.Next == after {
			return n, nil
		}
		after = page.Next
	}
}

func waitCond(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
