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

// shower computes shown states one workload at a time, in one read
// transaction: it looks each node up once and reads the held GPUs (every
// workload) at most once, and only when some workload waits to start.
type shower struct {
	tx       store.ReadTx
	agentRun map[fleet.NodeID]bool
	held     map[fleet.NodeID]map[int]bool // nil until needed
}

func newShower(tx store.ReadTx) *shower {
	return &shower{tx: tx, agentRun: map[fleet.NodeID]bool{}}
}

func (sh *shower) isAgent(id fleet.NodeID) bool {
	v, ok := sh.agentRun[id]
	if !ok {
		n, err := store.Get[store.Node](sh.tx, string(id))
		v = err == nil && n.Labels[LabelAgent] == "true"
		sh.agentRun[id] = v
	}
	return v
}

// show returns the state to show for x.
func (sh *shower) show(x *store.Workload) (string, error) {
	if x.State != store.StateRunning || x.Running == nil || x.Command == nil {
		return string(x.State), nil
	}
	var waiting []unstarted
	for r, rep := range x.Running.Replicas {
		if !startedIn(x, r, x.Running.ReplicaStart(r)) && sh.isAgent(rep.Node) {
			waiting = append(waiting, unstarted{rep.Node, rep.GPUs})
		}
	}
	if len(waiting) == 0 {
		return string(x.State), nil
	}
	if sh.held == nil {
		held, err := heldGPUs(sh.tx)
		if err != nil {
			return "", err
		}
		sh.held = held
	}
	for _, u := range waiting {
		if slices.ContainsFunc(u.gpus, func(g int) bool { return sh.held[u.node][g] }) {
			return api.StateWaitingForGPUs, nil
		}
	}
	return api.StateStarting, nil
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
			if st.Gone || y.State == store.StateRunning && y.Running != nil && y.Running.HasStart(st.StartedAt) {
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

// shownState is the state to show for one workload.
func shownState(tx store.ReadTx, x *store.Workload) (string, error) {
	return newShower(tx).show(x)
}
