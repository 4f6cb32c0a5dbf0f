package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/server"
	"github.com/arbiterhq/arbiter/internal/store"
)

const adminToken = "test-admin-token-0123456789"

// script records its environment, traps SIGTERM (a marker and a
// checkpoint), then keeps running past the grace period.
const script = `#!/bin/sh
out="$OUTDIR/$ARBITER_WORKLOAD-$ARBITER_REPLICA"
if [ -f "$ARBITER_CHECKPOINT_DIR/ckpt" ]; then echo resumed >> "$out.resumed"; fi
echo $$ > "$out.pid"
pwd > "$out.pwd"
env | sort > "$out.env.$ARBITER_PREEMPTIONS.tmp" && mv "$out.env.$ARBITER_PREEMPTIONS.tmp" "$out.env.$ARBITER_PREEMPTIONS"
echo "hello from replica $ARBITER_REPLICA"
trap 'date +%s.%N > "$out.term"; echo step > "$ARBITER_CHECKPOINT_DIR/ckpt"; sleep 30 & wait $!' TERM
sleep "${RUN_FOR:-60}" & wait $!
`

type env struct {
	t      *testing.T
	ctx    context.Context
	url    string
	admin  *client.Client
	dir    string
	out    string
	script string
	agents map[string]context.CancelFunc
	done   map[string]chan struct{}
	objs   map[string]*Agent
}

func newEnv(t *testing.T, lostAfter time.Duration) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	st, err := store.OpenBolt(filepath.Join(dir, "arbiter.db"), &store.BoltOptions{MaxBatchDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(ctx, server.Options{Store: st, AdminToken: adminToken, Interval: 200 * time.Millisecond, MinInterval: 10 * time.Millisecond,
		NodeLostAfter: lostAfter, SpotNotice: testSpotNotice, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	srvDone := make(chan struct{})
	go func() { s.Run(ctx); close(srvDone) }()
	e := &env{t: t, ctx: ctx, url: hs.URL, admin: client.New(hs.URL, adminToken), dir: dir, out: filepath.Join(dir, "out"),
		agents: map[string]context.CancelFunc{}, done: map[string]chan struct{}{}, objs: map[string]*Agent{}}
	os.MkdirAll(e.out, 0o755)
	e.script = filepath.Join(dir, "job.sh")
	os.WriteFile(e.script, []byte(script), 0o755)
	t.Cleanup(func() {
		for id, c := range e.agents {
			c()
			<-e.done[id]
			e.objs[id].Shutdown()
		}
		cancel()
		<-srvDone
		hs.Close()
		st.Close()
	})
	g16 := api.GPUs(resource.GPUs(16))
	// team borrows what prod guarantees and does not use; prod's
	// higher-priority work takes it back.
	if _, err := e.admin.CreateTenant(ctx, api.Tenant{Name: "prod", Quotas: []api.Quota{{Flavor: "A100-80G", Guaranteed: g16, Limit: &g16}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CreateTenant(ctx, api.Tenant{Name: "team", Quotas: []api.Quota{{Flavor: "A100-80G", Limit: &g16}}}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) startAgent(id string) { e.t.Helper(); e.startAgentWith(id, nil) }

// startAgentWith starts an in-process agent whose options edit changes.
func (e *env) startAgentWith(id string, edit func(*Options)) {
	e.t.Helper()
	// Each agent acts with its node's own token, as deployments should.
	tok, err := e.admin.CreateNodeToken(e.ctx, id, "")
	if err != nil {
		e.t.Fatal(err)
	}
	o := Options{Server: e.url, Token: tok.Secret, NodeID: id, Region: "local", Block: "b0",
		Inventory: Fake(id, 8, "A100-80G"), DataDir: filepath.Join(e.dir, "agent-"+id), CheckpointRoot: filepath.Join(e.dir, "ckpt"),
		Interval: 300 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, StaleGrace: 500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), AllowRoot: true}
	if edit != nil {
		edit(&o)
	}
	a, err := New(o)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	e.agents[id], e.done[id], e.objs[id] = cancel, done, a
}

// kill stops an agent as SIGKILL would: its processes keep running.
func (e *env) kill(id string) {
	e.agents[id]()
	<-e.done[id]
	delete(e.agents, id)
}

func (e *env) submit(name, prio string, replicas int, grace time.Duration, runFor string) {
	e.t.Helper()
	tenant := "team"
	if prio == "high" {
		tenant = "prod"
	}
	_, err := e.admin.Submit(e.ctx, tenant, api.WorkloadSpec{Name: name, GPUs: api.GPUs(resource.GPUs(8)), Replicas: replicas, Priority: prio, Preemptible: prio == "low",
		Flavors: []string{"A100-80G"}, Regions: []string{"local"}, GracePeriod: api.Duration(grace),
		Command: &api.Command{Argv: []string{"/bin/sh", e.script}, Env: map[string]string{"OUTDIR": e.out, "RUN_FOR": runFor}}})
	if err != nil {
		e.t.Fatal(err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func (e *env) waitFor(what string, d time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) workload(name string) api.Workload {
	w, err := e.admin.Workload(e.ctx, "team", name)
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func readEnv(t *testing.T, path string) map[string]string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

func (e *env) events(typ string) []api.Event {
	var out []api.Event
	var after int64
	for {
		page, err := e.admin.Events(e.ctx, after, 0, 1000)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, ev := range page.Items {
			if typ == "" || ev.Type == typ {
				out = append(out, ev)
			}
		}
		if len(page.Items) == 0 || page.Next == after {
			return out
		}
		after = page.Next
	}
}

// TestGangPreemptResume: two agents with fake GPUs run a 2-node gang that
// records its environment; each replica sees exactly its GPUs. A
// higher-priority workload preempts it: SIGTERM arrives, the grace period
// is honoured (the script outlives it and is killed), the gang is requeued
// and resumes from its checkpoint once the GPUs are free again.
func TestGangPreemptResume(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	e.startAgent("n1")
	e.startAgent("n2")
	e.waitFor("two nodes", 5*time.Second, func() bool { ns, _ := e.admin.Nodes(e.ctx, ""); return len(ns) == 2 })

	const grace = time.Second
	e.submit("train", "low", 2, grace, "60")
	var w api.Workload
	e.waitFor("the gang to run and record its environment", 10*time.Second, func() bool {
		w = e.workload("train")
		return w.State == "Running" && exists(filepath.Join(e.out, "train-0.env.0")) && exists(filepath.Join(e.out, "train-1.env.0"))
	})
	hosts := []string{w.Running.Replicas[0].Node, w.Running.Replicas[1].Node}
	if hosts[0] == hosts[1] {
		t.Fatalf("both replicas on %s", hosts[0])
	}
	for i, rep := range w.Running.Replicas {
		m := readEnv(t, filepath.Join(e.out, fmt.Sprintf("train-%d.env.0", i)))
		var idx, uuids []string
		for _, g := range rep.GPUs {
			idx = append(idx, strconv.Itoa(g))
			uuids = append(uuids, fmt.Sprintf("GPU-fake-%s-%d", rep.Node, g))
		}
		want := map[string]string{
			"CUDA_VISIBLE_DEVICES": strings.Join(idx, ","), "NVIDIA_VISIBLE_DEVICES": strings.Join(uuids, ","),
			"ARBITER_WORKLOAD": "train", "ARBITER_REPLICA": strconv.Itoa(i), "ARBITER_GANG_SIZE": "2",
			"ARBITER_HOSTS": strings.Join(hosts, ","), "ARBITER_PEERS": hosts[1-i], "ARBITER_NODE": rep.Node,
		}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("replica %d on %s: %s=%q, want %q", i, rep.Node, k, m[k], v)
			}
		}
		if len(rep.GPUs) != 8 || !strings.HasPrefix(m["ARBITER_CHECKPOINT_DIR"], filepath.Join(e.dir, "ckpt")) {
			t.Errorf("replica %d: GPUs %v, checkpoint dir %q", i, rep.GPUs, m["ARBITER_CHECKPOINT_DIR"])
		}
	}
	// Logs through the server from the agent.
	e.waitFor("replica 1's output through the server", 5*time.Second, func() bool {
		logs, err := e.admin.Logs(e.ctx, "team", "train", 1, 0)
		return err == nil && strings.Contains(string(logs), "hello from replica 1")
	})

	e.submit("urgent", "high", 1, grace, "1")
	e.waitFor("SIGTERM to reach both replicas", 10*time.Second, func() bool {
		return exists(filepath.Join(e.out, "train-0.term")) && exists(filepath.Join(e.out, "train-1.term"))
	})
	e.waitFor("both replicas to be reported stopped", 10*time.Second, func() bool { return len(e.events("ReplicaStopped")) >= 2 })
	for _, ev := range e.events("ReplicaStopped") {
		if !strings.Contains(ev.Message, "SIGKILL after the grace period of 1s") {
			t.Errorf("stop report %q: the script outlives SIGTERM, want SIGKILL after the grace", ev.Message)
		}
		i := strings.TrimPrefix(strings.Fields(ev.Message)[1], "")
		b, _ := os.ReadFile(filepath.Join(e.out, "train-"+i+".term"))
		sec, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		if term := time.Unix(0, int64(sec*1e9)); term.After(ev.Time) {
			t.Errorf("replica %s: SIGTERM marker at %v, after the stop report at %v", i, term, ev.Time)
		}
		// The agent measures from SIGTERM to SIGKILL.
		_, after, _ := strings.Cut(ev.Message, "(SIGTERM ")
		held, err := time.ParseDuration(strings.TrimSuffix(after, " before)"))
		if err != nil || held < grace {
			t.Errorf("replica %s killed %v after SIGTERM (%v), before its grace of %v", i, held, err, grace)
		}
	}
	if w := e.workload("train"); w.Preemptions < 1 {
		t.Fatalf("train not preempted: %+v", w)
	}
	e.waitFor("urgent to succeed", 15*time.Second, func() bool {
		w, err := e.admin.Workload(e.ctx, "prod", "urgent")
		return err == nil && w.State == "Succeeded"
	})
	// The claimant starts on a node only after the evicted replica there
	// has exited (its grace period over): the two never share GPUs.
	all := e.events("")
	for i, ev := range all {
		if ev.Type != "ReplicaStarted" || ev.Object != "workloads/prod/urgent" {
			continue
		}
		_, node, _ := strings.Cut(ev.Message, " started on ")
		stoppedBefore := false
		for _, prev := range all[:i] {
			if prev.Type == "ReplicaStopped" && prev.Object == "workloads/team/train" && strings.Contains(prev.Message, " on "+node+":") {
				stoppedBefore = true
			}
		}
		if !stoppedBefore {
			t.Errorf("urgent started on %s before train's replica there was stopped", node)
		}
	}
	e.waitFor("the gang to resume from its checkpoint", 15*time.Second, func() bool {
		w := e.workload("train")
		return w.State == "Running" && exists(filepath.Join(e.out, "train-0.resumed")) && exists(filepath.Join(e.out, "train-1.resumed")) &&
			exists(filepath.Join(e.out, "train-0.env.1")) && exists(filepath.Join(e.out, "train-1.env.1"))
	})
	m := readEnv(t, filepath.Join(e.out, "train-0.env.1"))
	if m["ARBITER_PREEMPTIONS"] != "1" {
		t.Errorf("resumed run: ARBITER_PREEMPTIONS=%q", m["ARBITER_PREEMPTIONS"])
	}
}

// TestNodeLoss: an agent dies (as with SIGKILL: its processes live on,
// and so does its fence); its fence stops the orphan when the node's lease
// ends, and only after the lease and the grace is the node lost and the
// workload requeued onto the other node; the restarted agent takes work.
func TestNodeLoss(t *testing.T) {
	const lostAfter, grace = 1500 * time.Millisecond, 200 * time.Millisecond
	e := newEnv(t, lostAfter)
	e.startAgent("n1")
	e.startAgent("n2")
	e.waitFor("two nodes", 5*time.Second, func() bool { ns, _ := e.admin.Nodes(e.ctx, ""); return len(ns) == 2 })
	e.submit("job", "normal", 1, grace, "60")
	var w api.Workload
	var orphan int
	e.waitFor("the job to run", 10*time.Second, func() bool {
		w = e.workload("job")
		orphan = readPID(filepath.Join(e.out, "job-0.pid"))
		return w.State == "Running" && orphan > 0
	})
	victim := w.Running.Replicas[0].Node
	os.Remove(filepath.Join(e.out, "job-0.pid"))
	killed := time.Now()
	e.kill(victim)
	e.waitFor("the fence to stop the orphan", lostAfter+3*time.Second, func() bool { return !alive(orphan) })
	fenced := time.Since(killed)
	e.waitFor("the job to be requeued onto the other node", lostAfter+5*time.Second, func() bool {
		w = e.workload("job")
		return w.State == "Running" && w.Running.Replicas[0].Node != victim
	})
	took := time.Since(killed)
	t.Logf("orphan fenced %v, job running on %s %v after the agent died (lease %v, grace %v)", fenced.Round(time.Millisecond), w.Running.Replicas[0].Node, took.Round(time.Millisecond), lostAfter, grace)
	if took < lostAfter+grace {
		t.Fatalf("requeued after %v, before the lease and the grace had passed", took)
	}
	e.startAgent(victim)
	e.waitFor("the node to come back up", 5*time.Second, func() bool {
		var node api.Node
		err := e.admin.Do(e.ctx, "GET", "/v1/nodes/"+victim, nil, &node)
		return err == nil && !node.Down
	})
}
