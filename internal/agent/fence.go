package agent

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// fenceTick is how often the fence reads the lease and the records.
const fenceTick = 20 * time.Millisecond

// fenceMark is DATA/procs/NAME.fenced: the fence wrote it just before it
// sent the process SIGTERM, so that the agent reports the exit as a stop
// (the node's lease ended), not as the replica's own.
type fenceMark struct {
	PID       int    `json:"pid"`
	StartTime string `json:"start_time"`
	// Term is when SIGTERM was sent (monoNow, ns); Killed says SIGKILL
	// followed after the grace period.
	Term   int64 `json:"term_boottime_ns"`
	Killed bool  `json:"killed,omitempty"`
}

func markPath(recordPath string) string { return strings.TrimSuffix(recordPath, ".json") + ".fenced" }

// readMark returns the fence's mark for this process, if it has one.
func readMark(recordPath string, pid int, start string) (fenceMark, bool) {
	b, err := os.ReadFile(markPath(recordPath))
	if err != nil {
		return fenceMark{}, false
	}
	var m fenceMark
	if json.Unmarshal(b, &m) != nil || m.PID != pid || m.StartTime != start {
		return fenceMark{}, false
	}
	return m, true
}

// FenceOptions configure a fence (see RunFence).
type FenceOptions struct {
	DataDir string
	// Owner is the agent instance whose lease the fence enforces; a lease
	// file with another owner means a newer agent took the data dir over.
	Owner string
	// AgentAlive reports whether the agent still runs; once it does not
	// and none of its replicas runs, the fence exits.
	AgentAlive func() bool
	Logf       func(format string, args ...any)
}

// RunFence enforces the agent's lease until ctx ends, the agent is gone
// and nothing it started still runs, or a newer agent owns the data dir:
// when the deadline in DATA/lease.json has passed (or the file is
// missing), every process recorded in DATA/procs gets SIGTERM to its
// process group and, after its grace period, SIGKILL. It is what
// `arbiter agent fence` runs, in a process of its own, so that it acts
// while the agent is stopped (SIGSTOP) or stuck.
func RunFence(ctx context.Context, o FenceOptions) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	t := time.NewTicker(fenceTick)
	defer t.Stop()
	for {
		live, superseded := fenceOnce(o.DataDir, o.Owner, monoNow(), o.Logf)
		if superseded || live == 0 && !o.AgentAlive() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fenceOnce does one round of the fence at now: it returns how many
// recorded processes still run, and whether another agent owns the lease.
func fenceOnce(dataDir, owner string, now time.Duration, logf func(string, ...any)) (live int, superseded bool) {
	deadline := int64(0) // no lease file: nothing may run
	if lf, err := readLease(dataDir); err == nil {
		if lf.Owner != owner {
			return 0, true
		}
		deadline = lf.Deadline
	}
	expired := int64(now) >= deadline
	dir := filepath.Join(dataDir, "procs")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		var rec record
		if err != nil || json.Unmarshal(b, &rec) != nil || !rec.running() {
			continue
		}
		live++
		if expired {
			fenceRecord(path, rec, now, logf)
		}
	}
	return live, false
}

// fenceRecord stops one running process whose lease has ended: SIGTERM
// (unless the agent already sent it), then SIGKILL once its grace is over.
func fenceRecord(path string, rec record, now time.Duration, logf func(string, ...any)) {
	m, marked := readMark(path, rec.PID, rec.StartTime)
	term := m.Term
	switch {
	case marked:
	case rec.Stopping > 0:
		term = rec.Stopping // the agent is stopping it: only its SIGKILL may be missing
	default:
		m = fenceMark{PID: rec.PID, StartTime: rec.StartTime, Term: int64(now)}
		if b, err := json.Marshal(m); err == nil {
			writeAtomic(markPath(path), b)
		}
		syscall.Kill(-rec.PID, syscall.SIGTERM)
		logf("lease expired: SIGTERM to process group %d of %s replica %d (grace %v)", rec.PID, rec.Ref.Workload, rec.Ref.Replica, time.Duration(rec.Grace))
		return
	}
	if int64(now) < term+int64(rec.Grace) {
		return
	}
	syscall.Kill(-rec.PID, syscall.SIGKILL)
	if marked && !m.Killed {
		m.Killed = true
		if b, err := json.Marshal(m); err == nil {
			writeAtomic(markPath(path), b)
		}
		logf("lease expired: SIGKILL to process group %d of %s replica %d after its grace of %v", rec.PID, rec.Ref.Workload, rec.Ref.Replica, time.Duration(rec.Grace))
	}
}

// startFence runs the agent's fence: the watchdog process of
// Options.FenceCommand, restarted if it dies while the agent runs, or, with
// no command (agents embedded in tests), a goroutine. It returns at once.
func (a *Agent) startFence() {
	if len(a.opts.FenceCommand) == 0 {
		go RunFence(context.Background(), FenceOptions{DataDir: a.opts.DataDir, Owner: a.id, AgentAlive: a.running.Load, Logf: a.logf})
		return
	}
	go func() {
		for a.running.Load() {
			err := a.runWatchdog()
			if !a.running.Load() {
				return
			}
			a.log.Error("the fence watchdog exited; restarting it", "err", err)
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

// runWatchdog starts the watchdog process and waits for it. It runs in a
// process group of its own (a terminal's Ctrl-C or a SIGSTOP of the
// agent's group does not reach it) and writes to DATA/fence.log, not to
// the agent's output, which may vanish with the agent.
func (a *Agent) runWatchdog() error {
	argv := append(slicesClone(a.opts.FenceCommand), "--data", a.opts.DataDir, "--owner", a.id, "--agent-pid", strconv.Itoa(os.Getpid()))
	lf, err := os.OpenFile(filepath.Join(a.opts.DataDir, "fence.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = []string{"PATH=" + cleanPath}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	a.log.Info("fence watchdog started", "pid", cmd.Process.Pid)
	return cmd.Wait()
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// ProcessAlive reports whether pid runs (exists and is not a zombie).
func ProcessAlive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil && !zombie(pid)
}
