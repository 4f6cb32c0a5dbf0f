package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// startBinary runs the real `arbiter agent` binary for node id against
// server (the test server's URL or a proxy's), with the node's token in a
// file (never on its command line), its output in DIR/log. It is stopped
// with SIGTERM when the test ends.
func (e *env) startBinary(bin, id, server, log string, extra ...string) *exec.Cmd {
	e.t.Helper()
	tokFile := filepath.Join(e.dir, id+".token")
	if !exists(tokFile) {
		tok, err := e.admin.CreateNodeToken(e.ctx, id, "")
		if err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(tokFile, []byte(tok.Secret+"\n"), 0o600); err != nil {
			e.t.Fatal(err)
		}
	}
	args := append([]string{"agent", "--server", server, "--token-file", tokFile, "--node", id, "--gpus", "fake:8xA100-80G",
		"--data", filepath.Join(e.dir, "agent-bin-"+id), "--checkpoint-root", filepath.Join(e.dir, "ckpt"), "--heartbeat", "300ms", "--stale-grace", "500ms"}, extra...)
	cmd := exec.Command(bin, args...)
	lf, err := os.Create(filepath.Join(e.dir, log))
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); lf.Close(); close(exited) }()
	e.t.Cleanup(func() {
		// SIGCONT in case a test stopped it; SIGTERM: the agent stops its
		// replicas (stop-on-exit).
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	logFilesOnFailure(e.t, filepath.Join(e.dir, log), filepath.Join(e.dir, "agent-bin-"+id, "fence.log"))
	return cmd
}

// TestAgentBinarySIGKILL runs the real `arbiter agent` binary against an
// in-process server on loopback, kills it with SIGKILL while it runs a
// workload and checks that its watchdog fences the replica (the node's
// lease ends) before the workload is requeued, no sooner than the
// node-lost timeout and its grace; the restarted agent takes work again.
func TestAgentBinarySIGKILL(t *testing.T) {
	bin := arbiterBinary(t)
	const lostAfter, grace = 1500 * time.Millisecond, 200 * time.Millisecond
	e := newEnv(t, lostAfter)
	agent := e.startBinary(bin, "b1", e.url, "agent-1.log", "--allow-root")
	e.waitFor("the binary agent's node", 10*time.Second, func() bool { ns, _ := e.admin.Nodes(e.ctx, ""); return len(ns) == 1 })
	e.submit("job", "normal", 1, grace, "60")
	var w api.Workload
	var orphan int
	e.waitFor("the job to run", 10*time.Second, func() bool {
		w = e.workload("job")
		// The pid file may be seen between its creation and its write.
		orphan = readPID(filepath.Join(e.out, "job-0.pid"))
		return w.State == "Running" && orphan > 0
	})
	os.Remove(filepath.Join(e.out, "job-0.pid"))
	startedAt := w.Running.StartedAt

	killed := time.Now()
	if err := agent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The watchdog outlives the agent and ends the replica with the lease.
	e.waitFor("the watchdog to fence the orphan", lostAfter+3*time.Second, func() bool { return !alive(orphan) })
	fenced := time.Since(killed)
	// Requeued: pending again (the only node is lost). The node watcher
	// ticks every lostAfter/4 and the scheduler reacts at once.
	e.waitFor("the job to be requeued", lostAfter+3*time.Second, func() bool {
		w = e.workload("job")
		return w.State == "Pending" || w.State == "Running" && !w.Running.StartedAt.Equal(startedAt)
	})
	took := time.Since(killed)
	t.Logf("fenced %v and requeued %v after SIGKILL (node lost after %v + grace %v): %s", fenced.Round(time.Millisecond), took.Round(time.Millisecond), lostAfter, grace, w.LastPreemption)
	if took < lostAfter+grace {
		t.Fatalf("requeued after %v, before the lease (%v) and the grace (%v) had passed", took, lostAfter, grace)
	}
	if limit := lostAfter + grace + lostAfter/2 + time.Second; took > limit {
		t.Errorf("requeued %v after SIGKILL; want within the lease and grace (plus a watcher tick and a cycle: %v)", took, limit)
	}
	if b, _ := os.ReadFile(filepath.Join(e.out, "job-0.term")); len(b) == 0 {
		t.Errorf("the fenced replica got no SIGTERM before it was killed")
	}

	e.startBinary(bin, "b1", e.url, "agent-2.log", "--allow-root")
	var pid int
	e.waitFor("the node to come back and the job to run again", 10*time.Second, func() bool {
		w = e.workload("job")
		pid = readPID(filepath.Join(e.out, "job-0.pid"))
		return w.State == "Running" && pid > 0
	})
	if pid == orphan || alive(orphan) {
		t.Fatalf("the job runs as %d again (orphan %d alive: %v)", pid, orphan, alive(orphan))
	}
}

// readPID reads a pid file the job script writes; 0 until it holds one.
func readPID(path string) int {
	b, _ := os.ReadFile(path)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
