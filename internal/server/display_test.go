package server

import (
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestShownStates: a workload placed on an agent-run node is shown
// Starting until its agent reports the replica started, WaitingForGPUs
// while that node still runs an evicted replica on its GPUs, and Running
// once started; the state filter of list endpoints follows what is shown.
func TestShownStates(t *testing.T) {
	f := newAgentFleet(t, Options{})
	tenant := f.tenant("contoso")
	shown := func(name string) string {
		t.Helper()
		w, err := tenant.Workload(f.ctx, "contoso", name)
		if err != nil {
			t.Fatal(err)
		}
		return w.State
	}
	listed := func(state string) []string {
		t.Helper()
		ws, err := tenant.Workloads(f.ctx, "contoso", state)
		if err != nil {
			t.Fatalf("list state=%s: %v", state, err)
		}
		var names []string
		for _, w := range ws {
			names = append(names, w.Name)
		}
		return names
	}
	borrowed := f.place("borrower", "n1", []int{0, 1, 2, 3}, time.Minute)
	if s := shown("borrower"); s != api.StateStarting {
		t.Fatalf("placed, not reported started: %s, want Starting", s)
	}
	bref := api.ReplicaRef{Workload: "contoso/borrower", Replica: 0, StartedAt: borrowed}
	if _, err := f.beat("n1", api.Heartbeat{Reports: []api.ReplicaReport{{ReplicaRef: bref, Kind: api.ReportStarted}}}); err != nil {
		t.Fatal(err)
	}
	if s := shown("borrower"); s != api.StateRunning {
		t.Fatalf("reported started: %s, want Running", s)
	}
	// The borrower is evicted (its process holds GPUs 0-3 in its grace);
	// the owner is placed on GPUs 2-5 and another on 6-7.
	f.evict("borrower")
	owned := f.place("owner", "n1", []int{2, 3, 4, 5}, time.Second)
	f.place("beside", "n1", []int{6, 7}, time.Second)
	if s := shown("owner"); s != api.StateWaitingForGPUs {
		t.Errorf("owner on GPUs the evicted borrower holds: %s, want WaitingForGPUs", s)
	}
	if s := shown("beside"); s != api.StateStarting {
		t.Errorf("beside, on free GPUs: %s, want Starting", s)
	}
	if got := listed(api.StateWaitingForGPUs); len(got) != 1 || got[0] != "owner" {
		t.Errorf("state=WaitingForGPUs lists %v", got)
	}
	if got := listed(api.StateRunning); len(got) != 0 {
		t.Errorf("state=Running lists %v, want none", got)
	}
	if _, err := tenant.Workloads(f.ctx, "contoso", "Bogus"); apiField(err) != "state" {
		t.Errorf("state=Bogus: %v, want a 400 naming state", err)
	}
	// The borrower's process is gone: the owner starts.
	if _, err := f.beat("n1", api.Heartbeat{Reports: []api.ReplicaReport{{ReplicaRef: bref, Kind: api.ReportStopped, Signal: "SIGKILL", Message: "killed"}}}); err != nil {
		t.Fatal(err)
	}
	if s := shown("owner"); s != api.StateStarting {
		t.Errorf("owner once the borrower is gone: %s, want Starting", s)
	}
	oref := api.ReplicaRef{Workload: "contoso/owner", Replica: 0, StartedAt: owned}
	if _, err := f.beat("n1", api.Heartbeat{Reports: []api.ReplicaReport{{ReplicaRef: oref, Kind: api.ReportStarted}}}); err != nil {
		t.Fatal(err)
	}
	if s := shown("owner"); s != api.StateRunning {
		t.Errorf("owner reported started: %s, want Running", s)
	}
	if got := listed(api.StateRunning); len(got) != 1 || got[0] != "owner" {
		t.Errorf("state=Running lists %v, want [owner]", got)
	}
}
