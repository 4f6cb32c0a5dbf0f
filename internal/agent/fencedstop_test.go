package agent

import (
	"log/slog"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestStopAfterFence: a replica the fence had stopped while the agent was
// itself stopped is reported fenced when the server's stop comes first,
// whichever of the two the agent sees first once it runs again (the race
// TestPartitionNoDuplicate/sigstop lost under load).
func TestStopAfterFence(t *testing.T) {
	for _, exited := range []bool{false, true} {
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{task: api.Task{ReplicaRef: api.ReplicaRef{Workload: "team/job"}, GracePeriod: api.Duration(1e9)},
			cmd: cmd, done: make(chan struct{}), stopping: make(chan struct{}), recGone: true}
		go func() {
			// As the process's waiter does: the fence's mark is read,
			// then done closes.
			cmd.Wait()
			p.fenced = true
			close(p.done)
		}()
		if exited {
			cmd.Process.Signal(syscall.SIGTERM) // the fence acted and the exit was seen before the stop
			<-p.done
		}
		a := &Agent{log: slog.New(slog.DiscardHandler), procs: map[api.ReplicaRef]*proc{}, ended: map[api.ReplicaRef]bool{}}
		a.stop(p)
		if len(a.reports) != 1 || a.reports[0].Kind != api.ReportStopped || !strings.HasPrefix(a.reports[0].Message, "fenced: ") {
			t.Errorf("exited before the stop %v: reports %+v, want one stopped report saying fenced", exited, a.reports)
		}
	}
}
