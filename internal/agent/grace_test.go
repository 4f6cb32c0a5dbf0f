package agent

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// stubborn ignores SIGTERM: only SIGKILL ends it.
const stubborn = `#!/bin/sh
trap '' TERM
echo $$ > "$OUTDIR/$ARBITER_WORKLOAD-$ARBITER_REPLICA.pid"
sleep 600 & wait $!
`

// TestClaimantWaitsForGPUs: a borrower with a long grace period that
// ignores SIGTERM holds the GPUs its owner reclaims. The owner's workload
// is placed at once but shown WaitingForGPUs, never Running, while the
// borrower's process lives; once it is gone the owner's process starts
// and the workload shows Running. A grace beyond the server's cap is
// refused at submission.
func TestClaimantWaitsForGPUs(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	e.startAgent("n1")
	e.waitFor("the node", 5*time.Second, func() bool { ns, _ := e.admin.Nodes(e.ctx, ""); return len(ns) == 1 })

	stub := filepath.Join(e.dir, "stubborn.sh")
	if err := os.WriteFile(stub, []byte(stubborn), 0o755); err != nil {
		t.Fatal(err)
	}
	borrower := api.WorkloadSpec{Name: "borrow", GPUs: api.GPUs(resource.GPUs(8)), Priority: "low", Preemptible: true,
		Flavors: []string{"A100-80G"}, Regions: []string{"local"}, GracePeriod: api.Duration(1_000_000 * time.Hour),
		Command: &api.Command{Argv: []string{"/bin/sh", stub}, Env: map[string]string{"OUTDIR": e.out}}}
	if _, err := e.admin.Submit(e.ctx, "team", borrower); apiField(err) != "grace_period" {
		t.Fatalf("a grace of 1,000,000h: %v, want a 400 naming grace_period", err)
	}
	borrower.GracePeriod = api.Duration(5 * time.Minute) // within the default cap of 10m
	if _, err := e.admin.Submit(e.ctx, "team", borrower); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(e.out, "borrow-0.pid")
	var pid int
	e.waitFor("the borrower to run", 10*time.Second, func() bool {
		pid = readPID(pidFile)
		return pid > 0 && e.workload("borrow").State == "Running"
	})

	e.submit("owner", "high", 1, 200*time.Millisecond, "60")
	owner := func() api.Workload {
		w, err := e.admin.Workload(e.ctx, "prod", "owner")
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	e.waitFor("the owner to be placed and wait for the borrower's GPUs", 10*time.Second, func() bool {
		return owner().State == api.StateWaitingForGPUs
	})
	if w := e.workload("borrow"); w.State != "Pending" || w.Preemptions != 1 {
		t.Fatalf("borrower after the reclaim: %s, %d preemptions", w.State, w.Preemptions)
	}
	// While the borrower lives (SIGTERM ignored, 5m of grace left), the
	// owner is never shown Running and its process does not start.
	for range 20 {
		if syscall.Kill(pid, 0) != nil {
			t.Fatal("the borrower died on its own")
		}
		if w := owner(); w.State != api.StateWaitingForGPUs || w.Running == nil {
			t.Fatalf("owner while the borrower holds its GPUs: %s", w.State)
		}
		if exists(filepath.Join(e.out, "owner-0.pid")) {
			t.Fatal("the owner's process started on GPUs the borrower holds")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the owner to run once the borrower is gone", 10*time.Second, func() bool {
		return owner().State == api.StateRunning && readPID(filepath.Join(e.out, "owner-0.pid")) > 0
	})
}

func apiField(err error) string {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Field
	}
	return ""
}
