package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
)

// Reports (issue 12): a node reports only on replica runs the server gave
// it. A report names a run (workload, replica, StartedAt); it is applied
// when that run is the workload's current one and the replica is assigned
// to the reporting node, or when the reporting node earlier reported that
// run started and has not reported it gone (store.Workload.Started). Any
// other report is ignored and counted: it never fails, ends or writes
// event text into a workload the node does not run. The same holds for
// the admin acting for a node: the node in the path is the reporter.

// errNotAssigned marks a report on a run the reporting node was not given.
var errNotAssigned = errors.New("server: report on a replica run not assigned to this node")

// maxReportMessage bounds the text of a report kept in events.
const maxReportMessage = 512

// checkReports refuses malformed reports and makes their messages safe
// to keep: at most maxReportMessage bytes of valid UTF-8 without control
// characters.
func checkReports(reps []api.ReplicaReport) error {
	for i := range reps {
		rep := &reps[i]
		switch rep.Kind {
		case api.ReportStarted, api.ReportExited, api.ReportStopped:
		default:
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "reports.kind", "kind must be Started, Exited or Stopped, got %q", clip(rep.Kind, 64))
		}
		switch rep.Signal {
		case "", "SIGTERM", "SIGKILL":
		default:
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "reports.signal", "signal must be SIGTERM or SIGKILL, got %q", clip(rep.Signal, 64))
		}
		if len(rep.Workload) > 300 {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "reports.workload", "a workload key has at most 300 characters")
		}
		rep.Message = sanitizeMessage(rep.Message)
	}
	return nil
}

// sanitizeMessage keeps a report message printable and short: invalid
// UTF-8 and control characters (newlines included) become spaces or
// U+FFFD, and it is cut to maxReportMessage bytes on a rune boundary.
func sanitizeMessage(m string) string {
	m = strings.ToValidUTF8(m, "\uFFFD")
	m = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, m)
	return clip(m, maxReportMessage)
}

// clip cuts s to at most n bytes without splitting a rune.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// reportedRun finds the run a report names among those of node id: cur
// when it is the workload's current run and the replica is assigned to
// id; idx, the index in x.Started of the process id reported started for
// it and not yet gone (-1: none).
func reportedRun(x *store.Workload, id fleet.NodeID, ref api.ReplicaRef) (cur bool, idx int) {
	a := x.Running
	// A replica is known by its own start (an elastic workload's growth
	// starts after its run): a replica given back and grown again is
	// another process.
	cur = x.State == store.StateRunning && a != nil && ref.Replica >= 0 && ref.Replica < len(a.Replicas) &&
		a.ReplicaStart(ref.Replica).Equal(ref.StartedAt) && a.Replicas[ref.Replica].Node == id
	idx = -1
	for i, st := range x.Started {
		if st.Replica == ref.Replica && st.Node == id && st.StartedAt.Equal(ref.StartedAt) && !st.Gone {
			idx = i
		}
	}
	return cur, idx
}

// applyReport records one report of node id; it returns errNotAssigned,
// changing nothing, for a run the server did not give the node.
func (s *Server) applyReport(tx store.WriteTx, id fleet.NodeID, rep api.ReplicaReport, now time.Time) (bool, error) {
	x, err := store.Get[store.Workload](tx, rep.Workload)
	if err != nil {
		return false, errNotAssigned // gone or never there: nothing of the node's
	}
	cur, idx := reportedRun(x, id, rep.ReplicaRef)
	obj := store.WorkloadObject(x.Key())
	switch {
	case rep.Kind == api.ReportStarted && cur:
		if idx >= 0 || startedIn(x, rep.Replica, x.Running.ReplicaStart(rep.Replica)) {
			return false, nil // reported twice
		}
		x.Started = append(x.Started, store.Start{Replica: rep.Replica, StartedAt: x.Running.ReplicaStart(rep.Replica), Node: id, GPUs: x.Running.Replicas[rep.Replica].GPUs})
		pruneStarts(x)
		if err := store.Put(tx, x, x.Meta.Revision); err != nil {
			return false, err
		}
		return false, store.AppendEvent(tx, &store.Event{Time: now, Type: store.EventReplicaStarted, Object: obj, Tenant: x.Tenant,
			Message: fmt.Sprintf("replica %d started on %s", rep.Replica, id)})
	case rep.Kind == api.ReportStarted:
		if idx >= 0 {
			return false, nil // reported twice
		}
		// A run evicted before its start reached us is not on record:
		// nothing proves the node was given it.
		return false, errNotAssigned
	case !cur && idx < 0:
		return false, errNotAssigned
	}
	if idx >= 0 {
		x.Started[idx].Gone = true // its process is gone
		pruneStarts(x)
	}
	if rep.Kind == api.ReportStopped {
		msg := fmt.Sprintf("replica %d on %s: %s", rep.Replica, id, rep.Message)
		x.LastStop = msg
		if err := store.Put(tx, x, x.Meta.Revision); err != nil {
			return false, err
		}
		return false, store.AppendEvent(tx, &store.Event{Time: now, Type: store.EventReplicaStopped, Object: obj, Tenant: x.Tenant, Message: msg})
	}
	// Exited on its own.
	msg := fmt.Sprintf("replica %d on %s exited with code %d", rep.Replica, id, rep.Code)
	if !cur {
		if err := store.Put(tx, x, x.Meta.Revision); err != nil {
			return false, err
		}
		return false, store.AppendEvent(tx, &store.Event{Time: now, Type: store.EventReplicaExited, Object: obj, Tenant: x.Tenant, Message: msg + " (an earlier run)"})
	}
	for _, e := range x.Exits {
		if e.Replica == rep.Replica && e.StartedAt.Equal(rep.StartedAt) {
			return false, nil // reported twice (the first marked it gone)
		}
	}
	x.Exits = append(x.Exits, store.Exit{Replica: rep.Replica, Code: rep.Code, StartedAt: x.Running.ReplicaStart(rep.Replica)})
	done, failed := 0, false
	for _, e := range x.Exits {
		if e.Replica < len(x.Running.Replicas) && e.StartedAt.Equal(x.Running.ReplicaStart(e.Replica)) {
			done++
			failed = failed || e.Code != 0
		}
	}
	ended := failed || done >= x.Spec.Replicas
	if ended {
		st, reason := store.StateSucceeded, fmt.Sprintf("all %d replica(s) exited with code 0", x.Spec.Replicas)
		if failed {
			st, reason = store.StateFailed, msg
		}
		if err := store.EndRun(tx, x, st, now, reason); err != nil {
			return false, err
		}
	}
	if err := store.Put(tx, x, x.Meta.Revision); err != nil {
		return false, err
	}
	if err := store.AppendEvent(tx, &store.Event{Time: now, Type: store.EventReplicaExited, Object: obj, Tenant: x.Tenant, Message: msg}); err != nil {
		return false, err
	}
	if ended {
		return true, store.AppendEvent(tx, &store.Event{Time: now, Type: store.WorkloadStateEvent(x.State), Object: obj, Tenant: x.Tenant, Message: msg})
	}
	return false, nil
}

// startedIn reports whether replica i of the run at t was reported
// started (its process may be gone since) or exited.
func startedIn(x *store.Workload, i int, t time.Time) bool {
	for _, st := range x.Started {
		if st.Replica == i && st.StartedAt.Equal(t) {
			return true
		}
	}
	for _, e := range x.Exits {
		if e.Replica == i && e.StartedAt.Equal(t) {
			return true
		}
	}
	return false
}

// pruneStarts bounds x.Started: processes not yet gone are kept, and of
// the gone ones only each replica's latest (its logs' node); past a
// bound the oldest entries go first.
func pruneStarts(x *store.Workload) {
	latest := map[int]int{}
	for i, st := range x.Started {
		if j, ok := latest[st.Replica]; !ok || !st.StartedAt.Before(x.Started[j].StartedAt) {
			latest[st.Replica] = i
		}
	}
	keep := x.Started[:0:0]
	for i, st := range x.Started {
		if !st.Gone || latest[st.Replica] == i {
			keep = append(keep, st)
		}
	}
	if limit := 2*x.Spec.Replicas + 64; len(keep) > limit {
		keep = keep[len(keep)-limit:]
	}
	x.Started = keep
}

// lastNode is the node replica i last ran on, as its agent reported: the
// node of its newest recorded start.
func lastNode(x *store.Workload, i int) fleet.NodeID {
	var node fleet.NodeID
	var at time.Time
	for _, st := range x.Started {
		if st.Replica == i && (node == "" || !st.StartedAt.Before(at)) {
			node, at = st.Node, st.StartedAt
		}
	}
	return node
}
