package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// proc is one replica's process, run in its own process group.
type proc struct {
	task    api.Task
	cmd     *exec.Cmd
	log     *os.File
	started time.Time
	done    chan struct{} // closed when the process has exited
	code    int
	// stopping is set when the agent decided to stop it.
	stopping chan struct{}
	rec      record
	recMu    sync.Mutex // guards the record file against its removal
	recGone  bool
	// fenced says the fence stopped it (its lease ended): set before done
	// closes, with the fence's mark.
	fenced bool
	mark   fenceMark
}

// record is what the agent keeps on disk about a process it started, so
// that an agent that restarts can stop what a previous one left running.
// The fence reads them too: it stops the process when the lease ends.
type record struct {
	PID       int            `json:"pid"`
	StartTime string         `json:"start_time"` // /proc/PID/stat field 22
	Ref       api.ReplicaRef `json:"ref"`
	// Grace is the replica's grace period: SIGKILL follows SIGTERM after it.
	Grace time.Duration `json:"grace_ns"`
	// Stopping is when the agent sent SIGTERM (monoNow, ns; 0: it did not).
	Stopping int64 `json:"stopping_boottime_ns,omitempty"`
}

func safeName(s string) string {
	return strings.NewReplacer("/", "_", "\\", "_", "..", "_").Replace(s)
}

func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // field 22: start time in clock ticks since boot
}

// alive reports whether the recorded process still runs (the same one:
// its start time matches).
func (r record) alive() bool {
	if r.PID <= 0 {
		return false
	}
	if err := syscall.Kill(r.PID, 0); err != nil {
		return false
	}
	st := procStart(r.PID)
	return st == "" || st == r.StartTime // no /proc: trust the pid
}

// running reports whether the recorded process runs: alive and not a
// zombie (one its stopped agent has not reaped has ended).
func (r record) running() bool { return r.alive() && !zombie(r.PID) }

// writeRecord stores a process record atomically.
func (a *Agent) writeRecord(rec record) {
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	os.MkdirAll(filepath.Dir(a.recordPath(rec.Ref)), 0o700)
	if err := writeAtomic(a.recordPath(rec.Ref), b); err != nil {
		a.log.Error("writing a process record", "err", err)
	}
}

func (a *Agent) recordPath(ref api.ReplicaRef) string {
	return filepath.Join(a.opts.DataDir, "procs", fmt.Sprintf("%s.%d.json", safeName(ref.Workload), ref.Replica))
}

// LogPath is where a replica's output goes.
func (a *Agent) LogPath(workloadKey string, replica int) string {
	return filepath.Join(a.opts.DataDir, "logs", safeName(workloadKey), fmt.Sprintf("replica-%d.log", replica))
}

// WorkDir is a replica's working directory, also its HOME; its command's
// dir is inside it.
func (a *Agent) WorkDir(workloadKey string, replica int) string {
	return filepath.Join(a.opts.DataDir, "work", safeName(workloadKey), fmt.Sprintf("replica-%d", replica))
}

// CheckpointDir is passed to replicas as ARBITER_CHECKPOINT_DIR.
func (a *Agent) CheckpointDir(workloadKey string, replica int) string {
	return filepath.Join(a.opts.CheckpointRoot, safeName(workloadKey), fmt.Sprintf("replica-%d", replica))
}

// start runs a task's command on its GPUs, in the replica's working
// directory, as Options.RunAs, with a clean environment (replicaEnv).
func (a *Agent) start(t api.Task, gpus []api.GPUInfo) (*proc, error) {
	if t.Command == nil || len(t.Command.Argv) == 0 {
		return nil, errors.New("no command")
	}
	if field, msg := t.Command.Validate(); field != "" {
		return nil, fmt.Errorf("%s: %s", field, msg)
	}
	byIndex := map[int]api.GPUInfo{}
	for _, g := range gpus {
		byIndex[g.Index] = g
	}
	idx, uuids := make([]string, len(t.GPUs)), make([]string, len(t.GPUs))
	for i, g := range t.GPUs {
		info, ok := byIndex[g]
		if !ok {
			return nil, fmt.Errorf("assigned GPU %d is not on this node", g)
		}
		idx[i], uuids[i] = strconv.Itoa(g), info.UUID
	}
	if t.MIG != nil {
		// A MIG instance: CUDA sees only its MIG device, named by UUID.
		r, ok := a.opts.Inventory.(MIGResolver)
		if !ok || len(t.GPUs) != 1 {
			return nil, fmt.Errorf("MIG instance %s@%d on GPUs %v: this node's inventory cannot resolve MIG devices", t.MIG.Profile, t.MIG.Start, t.GPUs)
		}
		u, err := r.MIGDevice(t.GPUs[0], t.MIG.Profile, t.MIG.Start)
		if err != nil {
			return nil, err
		}
		idx[0], uuids[0] = u, u
	}
	ckpt, work := a.CheckpointDir(t.Workload, t.Replica), a.WorkDir(t.Workload, t.Replica)
	for _, d := range []string{ckpt, work} {
		if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
			return nil, err
		}
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if err := a.runAs.own(d); err != nil {
			return nil, err
		}
	}
	dir, err := a.commandDir(work, t.Command.Dir)
	if err != nil {
		return nil, err
	}
	logPath := a.LogPath(t.Workload, t.Replica)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(lf, "--- arbiter: replica %d of %s, run placed at %s, started %s on %s (GPUs %s)\n",
		t.Replica, t.Workload, t.StartedAt.UTC().Format(time.RFC3339Nano), time.Now().UTC().Format(time.RFC3339Nano), a.opts.NodeID, strings.Join(idx, ","))
	os.Remove(a.NoticePath(t.Workload, t.Replica)) // an earlier run's
	if err := a.writeReplicas(t); err != nil {
		lf.Close()
		return nil, err
	}
	cmd := exec.Command(t.Command.Argv[0], t.Command.Argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = a.replicaEnv(t, idx, uuids, work, ckpt), dir, lf, lf
	// Its own process group, so that stopping it reaches its children;
	// as the run-as user (the credential is set before the chdir).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: a.runAs.cred}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(lf, "--- arbiter: could not start: %v\n", err)
		lf.Close()
		return nil, err
	}
	p := &proc{task: t, cmd: cmd, log: lf, started: time.Now(), done: make(chan struct{}), stopping: make(chan struct{})}
	p.rec = record{PID: cmd.Process.Pid, StartTime: procStart(cmd.Process.Pid), Ref: t.ReplicaRef, Grace: time.Duration(t.GracePeriod)}
	os.Remove(markPath(a.recordPath(t.ReplicaRef))) // an earlier run's
	a.writeRecord(p.rec)
	go func() {
		cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		if p.code < 0 { // killed by a signal
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.code = 128 + int(ws.Signal())
			}
		}
		fmt.Fprintf(lf, "--- arbiter: exited with code %d at %s\n", p.code, time.Now().UTC().Format(time.RFC3339Nano))
		lf.Close()
		// Whether the fence stopped it, before its record goes.
		p.recMu.Lock()
		p.mark, p.fenced = readMark(a.recordPath(t.ReplicaRef), p.rec.PID, p.rec.StartTime)
		os.Remove(a.recordPath(t.ReplicaRef))
		os.Remove(markPath(a.recordPath(t.ReplicaRef)))
		p.recGone = true
		p.recMu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// commandDir resolves a command's dir inside the replica's working
// directory, making what is missing (for the replica's user). A part that
// is not a directory, a symbolic link above all, is refused: a replica
// cannot point a later run, or the agent, outside its working directory.
func (a *Agent) commandDir(work, dir string) (string, error) {
	cur := work
	for _, el := range strings.Split(filepath.Clean("/"+dir), "/") {
		if el == "" {
			continue
		}
		cur = filepath.Join(cur, el)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := os.Mkdir(cur, 0o755); err != nil {
				return "", err
			}
			if err := a.runAs.own(cur); err != nil {
				return "", err
			}
		case err != nil:
			return "", err
		case !fi.IsDir():
			return "", fmt.Errorf("command.dir: %s is not a directory in the replica's working directory", cur)
		}
	}
	return cur, nil
}

// replicaEnv is a replica's whole environment: a minimal PATH, HOME (its
// working directory), its spec's variables, its GPUs and the ARBITER_*
// variables. Nothing of the agent's own environment (its token above all)
// reaches it.
func (a *Agent) replicaEnv(t api.Task, idx, uuids []string, work, ckpt string) []string {
	var peers []string
	for i, h := range t.Hosts {
		if i != t.Replica {
			peers = append(peers, h)
		}
	}
	m := map[string]string{"PATH": cleanPath, "HOME": work}
	for k, v := range t.Command.Env {
		m[k] = v
	}
	for k, v := range map[string]string{
		"CUDA_VISIBLE_DEVICES":   strings.Join(idx, ","),
		"NVIDIA_VISIBLE_DEVICES": strings.Join(uuids, ","),
		"ARBITER_GPU_UUIDS":      strings.Join(uuids, ","),
		"ARBITER_WORKLOAD":       t.Name,
		"ARBITER_TENANT":         t.Tenant,
		"ARBITER_REPLICA":        strconv.Itoa(t.Replica),
		"ARBITER_GANG_SIZE":      strconv.Itoa(t.GangSize),
		"ARBITER_HOSTS":          strings.Join(t.Hosts, ","),
		"ARBITER_PEERS":          strings.Join(peers, ","),
		"ARBITER_NODE":           a.opts.NodeID,
		"ARBITER_CHECKPOINT_DIR": ckpt,
		"ARBITER_WORK_DIR":       work,
		"ARBITER_PREEMPTIONS":    strconv.Itoa(t.Preemptions),
		"ARBITER_GRACE_PERIOD":   time.Duration(t.GracePeriod).String(),
		"ARBITER_NOTICE_FILE":    a.NoticePath(t.Workload, t.Replica),
		"ARBITER_REPLICAS":       strconv.Itoa(t.GangSize),
		"ARBITER_REPLICAS_FILE":  a.ReplicasPath(t.Workload, t.Replica),
		"ARBITER_EVENTS_URL":     a.eventsURL(t),
	} {
		m[k] = v
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// stop sends SIGTERM to the process group, waits the grace period, then
// SIGKILL. It returns the signal that ended it and how long it took.
func stopGroup(pid int, done <-chan struct{}, grace time.Duration) (string, time.Duration) {
	start := time.Now()
	syscall.Kill(-pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		// The leader exited; make sure nothing of the group lingers.
		syscall.Kill(-pid, syscall.SIGKILL)
		return "SIGTERM", time.Since(start)
	case <-t.C:
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	<-done
	return "SIGKILL", time.Since(start)
}

// cleanupStale stops every process a previous agent on this data dir left
// running (SIGTERM, a short grace, SIGKILL to its group) and returns them.
func (a *Agent) cleanupStale(grace time.Duration) []api.ReplicaReport {
	dir := filepath.Join(a.opts.DataDir, "procs")
	ents, _ := os.ReadDir(dir)
	var out []api.ReplicaReport
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		if !strings.HasSuffix(e.Name(), ".json") {
			os.Remove(path) // fence marks, temporary files
			continue
		}
		b, err := os.ReadFile(path)
		var rec record
		if err != nil || json.Unmarshal(b, &rec) != nil {
			os.Remove(path)
			continue
		}
		if rec.alive() {
			done := make(chan struct{})
			go func() {
				for rec.alive() && !zombie(rec.PID) {
					time.Sleep(20 * time.Millisecond)
				}
				close(done)
			}()
			sig, took := stopGroup(rec.PID, done, grace)
			a.logf("stopped stale process %d of %s replica %d (%s after %v)", rec.PID, rec.Ref.Workload, rec.Ref.Replica, sig, took.Round(time.Millisecond))
			out = append(out, api.ReplicaReport{ReplicaRef: rec.Ref, Kind: api.ReportStopped, Time: time.Now(), Signal: sig,
				Message: fmt.Sprintf("stale process %d left by a previous agent stopped with %s", rec.PID, sig)})
		}
		os.Remove(path)
	}
	return out
}

// zombie reports whether pid is a zombie (exited, not reaped: it is not
// our child, so it lingers until its new parent reaps it).
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] == 'Z'
}
