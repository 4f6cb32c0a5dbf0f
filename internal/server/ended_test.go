package server

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestEndedWorkloadKeepsItsRun (issue 22, point 4): a workload that ends
// keeps when, on which node(s), with which exit codes and why; a running
// one shows none of it, and a cancelled one says who cancelled it.
func TestEndedWorkloadKeepsItsRun(t *testing.T) {
	f := newAgentFleet(t, Options{})
	c := f.tenant("contoso")
	at := f.place("job", "n1", []int{0, 1, 2, 3, 4, 5, 6, 7}, time.Second)
	w, err := c.Workload(f.ctx, "contoso", "job")
	if err != nil {
		t.Fatal(err)
	}
	if !w.EndedAt.IsZero() || w.EndNodes != nil || w.ExitCodes != nil || w.EndReason != "" {
		t.Fatalf("a running workload shows an end: %+v", w)
	}
	ref := api.ReplicaRef{Workload: "contoso/job", Replica: 0, StartedAt: at}
	if _, err := f.beat("n1", api.Heartbeat{Reports: []api.ReplicaReport{{ReplicaRef: ref, Kind: api.ReportStarted}, {ReplicaRef: ref, Kind: api.ReportExited, Code: 3}}}); err != nil {
		t.Fatal(err)
	}
	w, err = c.Workload(f.ctx, "contoso", "job")
	if err != nil {
		t.Fatal(err)
	}
	if w.State != "Failed" || w.EndedAt.IsZero() || w.Running != nil {
		t.Fatalf("after exit 3: %+v", w)
	}
	if d := cmp.Diff([]string{"n1"}, w.EndNodes); d != "" {
		t.Errorf("end nodes (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]api.ReplicaExit{{Replica: 0, Code: 3}}, w.ExitCodes); d != "" {
		t.Errorf("exit codes (-want +got):\n%s", d)
	}
	if !strings.Contains(w.EndReason, "exited with code 3") {
		t.Errorf("end reason %q: want the exit", w.EndReason)
	}
	// Listed the same.
	ws, err := c.Workloads(f.ctx, "contoso", "Failed")
	if err != nil || len(ws) != 1 || ws[0].EndReason != w.EndReason || len(ws[0].EndNodes) != 1 {
		t.Fatalf("list: %+v %v", ws, err)
	}

	// Cancelled while running: the nodes of the run it left, no exit.
	f.place("other", "n2", []int{0, 1}, time.Second)
	w, err = c.Cancel(f.ctx, "contoso", "other")
	if err != nil {
		t.Fatal(err)
	}
	if w.State != "Cancelled" || w.EndedAt.IsZero() || w.EndReason != "cancelled by tenant contoso" || w.ExitCodes != nil {
		t.Fatalf("cancelled: %+v", w)
	}
	if d := cmp.Diff([]string{"n2"}, w.EndNodes); d != "" {
		t.Errorf("cancelled end nodes (-want +got):\n%s", d)
	}
	// why says the same.
	for name, want := range map[string]string{"other": "cancelled by tenant contoso", "job": "exited with code 3"} {
		why, err := c.Why(f.ctx, "contoso", name)
		if err != nil || !strings.Contains(why.Reason, want) || !strings.Contains(why.Reason, "ended at ") {
			t.Errorf("why %s: %q %v, want %q", name, why.Reason, err, want)
		}
	}
}
