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

// TestAgentBinarySIGKILL runs the real `arbiter agent` binary against an
// in-process server on loopback, kills it with SIGKILL while it runs a
// workload, checks the workload is requeued within the node-lost timeout,
// restarts it and checks the orphan it left is stopped.
func TestAgentBinarySIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the arbiter binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build the binary")
	}
	bin := filepath.Join(t.TempDir(), "arbiter")
	if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/arbiterhq/arbiter/cmd/arbiter").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const lostAfter = 1500 * time.Millisecond
	e := newEnv(t, lostAfter)
	data := filepath.Join(e.dir, "agent-bin")
	tok, err := e.admin.CreateNodeToken(e.ctx, "b1", "")
	if err != nil {
		t.Fatal(err)
	}
	start := func(log string) *exec.Cmd {
		cmd := exec.Command(bin, "agent", "--server", e.url, "--token", tok.Secret, "--node", "b1", "--gpus", "fake:8xA100-80G",
			"--data", data, "--checkpoint-root", filepath.Join(e.dir, "ckpt"), "--heartbeat", "300ms", "--stale-grace", "500ms")
		lf, err := os.Create(filepath.Join(e.dir, log))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = lf, lf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); lf.Close(); close(exited) }()
		t.Cleanup(func() {
			// SIGTERM: the agent stops its replicas (stop-on-exit).
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		})
		return cmd
	}
	t.Cleanup(func() { // on failure, what the agents said
		if t.Failed() {
			for _, f := range []string{"agent-1.log", "agent-2.log"} {
				b, _ := os.ReadFile(filepath.Join(e.dir, f))
				t.Logf("%s:\n%s", f, b)
			}
		}
	})
	agent := start("agent-1.log")
	e.waitFor("the binary agent's node", 10*time.Second, func() bool { ns, _ := e.admin.Nodes(e.ctx, ""); return len(ns) == 1 })
	e.submit("job", "normal", 1, 200*time.Millisecond, "60")
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
	// Requeued: pending again (the only node is lost). The node watcher
	// ticks every lostAfter/4 and the scheduler reacts at once.
	e.waitFor("the job to be requeued", lostAfter+3*time.Second, func() bool {
		w = e.workload("job")
		return w.State == "Pending" || w.State == "Running" && !w.Running.StartedAt.Equal(startedAt)
	})
	took := time.Since(killed)
	t.Logf("requeued %v after SIGKILL (node lost after %v): %s", took.Round(time.Millisecond), lostAfter, w.LastPreemption)
	if took < lostAfter {
		t.Fatalf("requeued after %v, before the node could be lost", took)
	}
	if limit := lostAfter + lostAfter/2 + time.Second; took > limit {
		t.Errorf("requeued %v after SIGKILL; want within the node-lost timeout of %v (plus a watcher tick and a cycle: %v)", took, lostAfter, limit)
	}
	if syscall.Kill(orphan, 0) != nil || zombie(orphan) {
		t.Fatalf("the replica %d died with its agent; it should live on until the agent returns", orphan)
	}

	start("agent-2.log")
	e.waitFor("the restarted agent to stop the orphan", 10*time.Second, func() bool {
		return syscall.Kill(orphan, 0) != nil || zombie(orphan)
	})
	var pid int
	e.waitFor("the node to come back and the job to run again", 10*time.Second, func() bool {
		w = e.workload("job")
		pid = readPID(filepath.Join(e.out, "job-0.pid"))
		return w.State == "Running" && pid > 0
	})
	if pid == orphan {
		t.Fatalf("the job runs as %d again (orphan %d)", pid, orphan)
	}
	if syscall.Kill(orphan, 0) == nil && !zombie(orphan) {
		t.Fatalf("orphan %d is running again", orphan)
	}
}

// readPID reads a pid file the job script writes; 0 until it holds one.
func readPID(path string) int {
	b, _ := os.ReadFile(path)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
