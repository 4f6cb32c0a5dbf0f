package agent

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestBackoffSchedule: the reconnection backoff starts small, doubles,
// never exceeds its cap once jittered, and the default cap plus the
// answer timeout keeps a node's return within 2s of the server's.
func TestBackoffSchedule(t *testing.T) {
	for _, cap := range []time.Duration{time.Second, 200 * time.Millisecond, 50 * time.Millisecond, 30 * time.Second} {
		d := firstBackoff(cap)
		if d > cap || d <= 0 {
			t.Fatalf("cap %v: first backoff %v", cap, d)
		}
		reached := false
		for i := range 200 {
			j := jitter(d)
			if j > cap || j < d/2 {
				t.Fatalf("cap %v, step %d: waited %v for a backoff of %v", cap, i, j, d)
			}
			next := nextBackoff(d, cap)
			if next > cap || next < d {
				t.Fatalf("cap %v: backoff went from %v to %v", cap, d, next)
			}
			d = next
			reached = reached || d == cap
		}
		if !reached {
			t.Errorf("cap %v: never reached", cap)
		}
	}
	a, err := New(Options{Server: "http://127.0.0.1:1", Token: "t", NodeID: "n", Inventory: Fake("n", 1, "A100-80G"), DataDir: t.TempDir(), AllowRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	if worst := a.opts.MaxBackoff + replyTimeout; worst > 2*time.Second {
		t.Errorf("default backoff %v + answer timeout %v: a node may take %v to come back", a.opts.MaxBackoff, replyTimeout, worst)
	}
}

// TestLeaseMath: the agent's lease ends before the server's, and the
// heartbeats the server holds leave time to renew it.
func TestLeaseMath(t *testing.T) {
	if leaseDeadline(time.Second, 0) != noLease {
		t.Errorf("no lease granted must never end")
	}
	for _, lease := range []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond, 30 * time.Second, 10 * time.Minute} {
		m := leaseMargin(lease)
		if m <= 0 || m >= lease {
			t.Errorf("lease %v: margin %v", lease, m)
		}
		sent := 5 * time.Second
		if d := time.Duration(leaseDeadline(sent, lease)); d >= sent+lease || d <= sent {
			t.Errorf("lease %v: deadline %v after the send", lease, d-sent)
		}
		// A held heartbeat and the next one must both fit in the lease.
		if w := leaseWait(time.Hour, lease); 2*w+m >= lease {
			t.Errorf("lease %v: wait %v twice and margin %v do not fit", lease, w, m)
		}
	}
}

// fenceFixture is a data dir with a lease file and one recorded process.
type fenceFixture struct {
	dir, rec string
	cmd      *exec.Cmd
	done     chan struct{}
}

func newFenceFixture(t *testing.T, script string, grace time.Duration, deadline int64, owner string) *fenceFixture {
	t.Helper()
	f := &fenceFixture{dir: t.TempDir(), done: make(chan struct{})}
	if owner != "" {
		if err := writeLease(f.dir, leaseFile{Owner: owner, Deadline: deadline}); err != nil {
			t.Fatal(err)
		}
	}
	ready := filepath.Join(f.dir, "ready")
	f.cmd = exec.Command("/bin/sh", "-c", script)
	f.cmd.Env = []string{"PATH=" + cleanPath, "READY=" + ready}
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { f.cmd.Wait(); close(f.done) }()
	for end := time.Now().Add(5 * time.Second); !exists(ready); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the process did not start")
		}
	}
	t.Cleanup(func() { syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL); <-f.done })
	pid := f.cmd.Process.Pid
	rec := record{PID: pid, StartTime: procStart(pid), Ref: api.ReplicaRef{Workload: "t/w", Replica: 0}, Grace: grace}
	a := &Agent{opts: Options{DataDir: f.dir}}
	a.writeRecord(rec)
	f.rec = a.recordPath(rec.Ref)
	return f
}

func (f *fenceFixture) exited(t *testing.T) bool {
	t.Helper()
	select {
	case <-f.done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// TestFenceOnce: the fence leaves processes alone while the lease holds,
// then sends SIGTERM to the process group (marking it fenced) and SIGKILL
// once the grace is over; a missing lease file counts as ended; a newer
// owner of the data dir supersedes it.
func TestFenceOnce(t *testing.T) {
	noop := func(string, ...any) {}
	const grace = time.Second
	const deadline = int64(100 * time.Second)
	// A process that ignores SIGTERM (and so does its child).
	f := newFenceFixture(t, `trap "" TERM; touch "$READY"; sleep 60 & wait`, grace, deadline, "me")
	if live, sup := fenceOnce(f.dir, "me", time.Duration(deadline)-1, noop); live != 1 || sup {
		t.Fatalf("before the deadline: live %d, superseded %v", live, sup)
	}
	if _, err := os.Stat(markPath(f.rec)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("fenced before the deadline")
	}
	if _, sup := fenceOnce(f.dir, "someone else", time.Duration(deadline)+time.Hour, noop); !sup {
		t.Fatalf("a fence of another owner was not superseded")
	}
	fenceOnce(f.dir, "me", time.Duration(deadline), noop)
	pid := f.cmd.Process.Pid
	m, ok := readMark(f.rec, pid, procStart(pid))
	if !ok || m.Term != deadline || m.Killed {
		t.Fatalf("after the deadline: mark %+v %v, want SIGTERM at the deadline", m, ok)
	}
	fenceOnce(f.dir, "me", time.Duration(deadline)+grace-1, noop)
	if m, _ := readMark(f.rec, pid, procStart(pid)); m.Killed {
		t.Fatalf("killed before the grace was over")
	}
	fenceOnce(f.dir, "me", time.Duration(deadline)+grace, noop)
	if !f.exited(t) {
		t.Fatalf("the process outlived its grace")
	}
	if ws := f.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("ended by %v, want SIGKILL", f.cmd.ProcessState)
	}

	// No lease file: nothing may run; a replica that takes SIGTERM ends.
	g := newFenceFixture(t, `touch "$READY"; sleep 60 & wait`, grace, 0, "")
	if live, _ := fenceOnce(g.dir, "me", time.Second, noop); live != 1 {
		t.Fatalf("live %d", live)
	}
	if !g.exited(t) {
		t.Fatalf("the process outlived the missing lease")
	}
	if ws := g.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("ended by %v, want SIGTERM", g.cmd.ProcessState)
	}
	if live, _ := fenceOnce(g.dir, "me", 2*time.Second, noop); live != 0 {
		t.Errorf("an ended process still counts as live")
	}

	// The agent already sent SIGTERM (Stopping): the fence only kills.
	h := newFenceFixture(t, `trap "" TERM; touch "$READY"; sleep 60 & wait`, grace, 0, "me")
	b, _ := os.ReadFile(h.rec)
	h.cmd.Process.Signal(syscall.SIGTERM)
	rec := record{PID: h.cmd.Process.Pid, StartTime: procStart(h.cmd.Process.Pid), Ref: api.ReplicaRef{Workload: "t/w"}, Grace: grace, Stopping: int64(10 * time.Second)}
	(&Agent{opts: Options{DataDir: h.dir}}).writeRecord(rec)
	fenceOnce(h.dir, "me", 10*time.Second+grace-1, noop)
	if _, ok := readMark(h.rec, rec.PID, rec.StartTime); ok {
		t.Errorf("the fence sent SIGTERM again to a process the agent stops (record %s)", b)
	}
	fenceOnce(h.dir, "me", 10*time.Second+grace, noop)
	if !h.exited(t) {
		t.Fatalf("the stopping process outlived its grace")
	}
	if !strings.HasSuffix(markPath(h.rec), ".fenced") || filepath.Dir(h.rec) != filepath.Join(h.dir, "procs") {
		t.Errorf("record %s, mark %s", h.rec, markPath(h.rec))
	}
}
