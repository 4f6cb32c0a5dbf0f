package server

import (
	"slices"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
)

// Shown states (issue 12). A workload the scheduler placed is stored
// Running at once, but on agent-run nodes (label arbiter.io/agent=true)
// its command starts only when the agent has it and its GPUs are free:
// an evicted replica may still hold them for its grace period. Until
// every replica of the current run has been reported started (or has
// exited), the API shows it
//
//   - WaitingForGPUs when the node of a replica not yet started still
//     runs, on any of that replica's GPUs, a replica of another run that
//     its agent reported started and has not reported gone (derived from
//     store.Workload.Started of all workloads), or
//   - Starting otherwise.
//
// Workloads without a command, and replicas on nodes without an agent,
// count as started: nothing will report on them.

// unstarted is a replica of a current run not reported started yet.
type unstarted struct {
	node fleet.NodeID
	gpus []int
}

// shownStates returns the state to show for each of xs, by index.
func shownStates(tx store.ReadTx, xs []*store.Workload) ([]string, error) {
	out := make([]string, len(xs))
	agentRun := map[fleet.NodeID]bool{}
	isAgent := func(id fleet.NodeID) bool {
		v, ok := agentRun[id]
		if !ok {
			n, err := store.Get[store.Node](tx, string(id))
			v = err == nil && n.Labels[LabelAgent] == "true"
			agentRun[id] = v
		}
		return v
	}
	waiting := map[int][]unstarted{}
	for i, x := range xs {
		out[i] = string(x.State)
		if x.State != store.StateRunning || x.Running == nil || x.Command == nil {
			continue
		}
		for r, rep := range x.Running.Replicas {
			if !startedIn(x, r, x.Running.StartedAt) && isAgent(rep.Node) {
				waiting[i] = append(waiting[i], unstarted{rep.Node, rep.GPUs})
			}
		}
		if len(waiting[i]) > 0 {
			out[i] = api.StateStarting
		}
	}
	if len(waiting) == 0 {
		return out, nil
	}
	held, err := heldGPUs(tx)
	if err != nil {
		return nil, err
	}
	for i, us := range waiting {
		for _, u := range us {
			if slices.ContainsFunc(u.gpus, func(g int) bool { return held[u.node][g] }) {
				out[i] = api.StateWaitingForGPUs
			}
		}
	}
	return out, nil
}

// heldGPUs lists, by node, the GPUs of processes agents run for runs that
// are no longer their workload's current one (evicted, cancelled or
// ended, and not yet reported gone).
func heldGPUs(tx store.ReadTx) (map[fleet.NodeID]map[int]bool, error) {
	ws, err := store.List[store.Workload](tx, "")
	if err != nil {
		return nil, err
	}
	held := map[fleet.NodeID]map[int]bool{}
	for _, y := range ws {
		for _, st := range y.Started {
			if st.Gone || y.State == store.StateRunning && y.Running != nil && y.Running.StartedAt.Equal(st.StartedAt) {
				continue
			}
			if held[st.Node] == nil {
				held[st.Node] = map[int]bool{}
			}
			for _, g := range st.GPUs {
				held[st.Node][g] = true
			}
		}
	}
	return held, nil
}

// shownState is shownStates for one workload.
func shownState(tx store.ReadTx, x *store.Workload) (string, error) {
	s, err := shownStates(tx, []*store.Workload{x})
	if err != nil {
		return "", err
	}
	return s[0], nil
}
