package agent

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// submitLock submits a one-replica workload whose replica is the test
// binary's lockReplica: it records start and stop and detects a second
// copy of itself (LOCKDIR/overlaps).
func (e *env) submitLock(name string, grace time.Duration) {
	e.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = e.admin.Submit(e.ctx, "team", api.WorkloadSpec{Name: name, GPUs: api.GPUs(resource.GPUs(8)), Replicas: 1, Priority: "normal",
		Flavors: []string{"A100-80G"}, Regions: []string{"local"}, GracePeriod: api.Duration(grace),
		Command: &api.Command{Argv: []string{exe}, Env: map[string]string{"REPLICA_HELPER": "lock", "LOCKDIR": e.out}}})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) node(id string) api.Node {
	var n api.Node
	if err := e.admin.Do(e.ctx, "GET", "/v1/nodes/"+id, nil, &n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestPartitionNoDuplicate cuts a real agent process (the binary) off
// from the server while it runs a replica, in two ways: SIGSTOP of the
// agent's pid alone (its replicas and its watchdog keep running), and a
// proxy between agent and server that drops the connection. The server
// requeues the replica onto a second node. At no instant do two processes
// run the replica: each holds an exclusive flock for its whole life and a
// second copy that finds it held records an overlap; the start and stop
// markers show the old copy stopped before the new one started. When the
// partition ends, the node is usable again (backoff is capped at 1s).
func TestPartitionNoDuplicate(t *testing.T) {
	bin := arbiterBinary(t)
	for _, mode := range []string{"sigstop", "cut"} {
		t.Run(mode, func(t *testing.T) { testPartition(t, bin, mode) })
	}
}

func testPartition(t *testing.T, bin, mode string) {
	const lostAfter, grace = 1500 * time.Millisecond, 500 * time.Millisecond
	e := newEnv(t, lostAfter)
	px := newProxy(t, strings.TrimPrefix(e.url, "http://"))
	a := e.startBinary(bin, "a", px.url(), "agent-a.log", "--allow-root")
	e.waitFor("node a", 10*time.Second, func() bool { ns, _ := e.admin.Nodes(e.ctx, ""); return len(ns) == 1 })
	e.submitLock("job", grace)
	logPath := filepath.Join(e.out, "job-0.log")
	e.waitFor("the job to run on a", 10*time.Second, func() bool {
		w := e.workload("job")
		return w.State == "Running" && w.Running.Replicas[0].Node == "a" && exists(logPath)
	})
	e.startAgent("b")
	e.waitFor("node b", 5*time.Second, func() bool { ns, _ := e.admin.Nodes(e.ctx, ""); return len(ns) == 2 })

	cut := time.Now()
	switch mode {
	case "sigstop":
		if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	case "cut":
		px.cut()
	}
	e.waitFor("the job to be requeued and run on b", 10*time.Second, func() bool {
		w := e.workload("job")
		if w.State != "Running" || w.Running.Replicas[0].Node != "b" {
			return false
		}
		if overlaps(e.out) != "" {
			return true // the copy on b waits for the lock a's copy holds
		}
		for _, m := range readMarkers(t, logPath) {
			if m.kind == "start" && m.node == "b" {
				return true
			}
		}
		return false
	})
	moved := time.Since(cut)
	if ov := overlaps(e.out); ov != "" {
		t.Fatalf("two processes ran the replica at once:\n%s", ov)
	}
	ms := readMarkers(t, logPath)
	var stopA, startB time.Time
	for _, m := range ms {
		switch {
		case m.kind == "stop" && m.node == "a":
			stopA = m.at
		case m.kind == "start" && m.node == "b" && startB.IsZero():
			startB = m.at
		}
	}
	if stopA.IsZero() || !stopA.Before(startB) {
		t.Fatalf("the replica on a stopped at %v, the one on b started at %v: markers %+v", stopA, startB, ms)
	}
	t.Logf("%s: replica on a fenced %v after the partition began, started on b %v after that; running on b %v after the partition began",
		mode, stopA.Sub(cut).Round(time.Millisecond), startB.Sub(stopA).Round(time.Millisecond), moved.Round(time.Millisecond))
	if d := stopA.Sub(cut); d > lostAfter {
		t.Errorf("the replica on a ran %v into the partition, past its lease of %v", d, lostAfter)
	}

	// The partition ends: the node is back within a bound (reported; the
	// assertion is loose so that a slow machine does not flake).
	restored := time.Now()
	switch mode {
	case "sigstop":
		a.Process.Signal(syscall.SIGCONT)
	case "cut":
		px.restore()
	}
	e.waitFor("node a to be usable again", 15*time.Second, func() bool { return !e.node("a").Down })
	back := time.Since(restored)
	t.Logf("%s: node a usable %v after the partition ended", mode, back.Round(time.Millisecond))
	if back > 10*time.Second {
		t.Errorf("node a usable only %v after the partition ended", back)
	}
	e.waitFor("a's fenced run to be reported stopped", 30*time.Second, func() bool {
		for _, ev := range e.events("ReplicaStopped") {
			if strings.Contains(ev.Message, "on a: fenced") {
				return true
			}
		}
		return false
	})
	if ov := overlaps(e.out); ov != "" {
		t.Fatalf("two processes ran the replica at once:\n%s", ov)
	}
	if w := e.workload("job"); w.State != "Running" || w.Running.Replicas[0].Node != "b" {
		t.Errorf("after the partition the job is %s on %+v; want Running on b", w.State, w.Running)
	}
}

// TestShortPartitionRestartsFenced: a partition longer than the agent's
// lease but shorter than the server's lease plus grace. The fence stops
// the replica; the server never lost the node, so when the agent is back
// it still assigns the replica there, and the agent starts it again (the
// fenced run was not the replica's own exit: the workload does not fail).
func TestShortPartitionRestartsFenced(t *testing.T) {
	const lostAfter, grace = 1500 * time.Millisecond, 5 * time.Second
	e := newEnv(t, lostAfter)
	px := newProxy(t, strings.TrimPrefix(e.url, "http://"))
	e.startAgentWith("a", func(o *Options) { o.Server = px.url() })
	e.waitFor("node a", 5*time.Second, func() bool { ns, _ := e.admin.Nodes(e.ctx, ""); return len(ns) == 1 })
	e.submitLock("job", grace)
	logPath := filepath.Join(e.out, "job-0.log")
	var w api.Workload
	e.waitFor("the job to run", 10*time.Second, func() bool { w = e.workload("job"); return w.State == "Running" && exists(logPath) })
	startedAt := w.Running.StartedAt
	count := func(kind string) int {
		n := 0
		for _, m := range readMarkers(t, logPath) {
			if m.kind == kind {
				n++
			}
		}
		return n
	}
	px.cut()
	e.waitFor("the fence to stop the replica", 5*time.Second, func() bool { return count("stop") == 1 })
	if n := e.node("a"); n.Down {
		t.Fatalf("node lost before its lease and grace had passed")
	}
	px.restore()
	e.waitFor("the replica to start again on a", 10*time.Second, func() bool { return count("start") == 2 })
	w = e.workload("job")
	if w.State != "Running" || !w.Running.StartedAt.Equal(startedAt) || w.Running.Replicas[0].Node != "a" {
		t.Errorf("after the partition: %s %+v; want the same run on a", w.State, w.Running)
	}
	if ov := overlaps(e.out); ov != "" {
		t.Fatalf("two processes ran the replica at once:\n%s", ov)
	}
	for _, ev := range e.events("") {
		if ev.Type == "ReplicaExited" || ev.Type == "NodeLost" || ev.Type == "WorkloadFailed" {
			t.Errorf("event %s: %s", ev.Type, ev.Message)
		}
	}
}
