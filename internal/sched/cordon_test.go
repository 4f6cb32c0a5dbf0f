package sched

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/fleet"
)

// TestCordoned: a cordoned node takes no new replica, and the work running
// on it is not evicted for being there (as on a down node it would be). On
// random worlds, a node with running work is cordoned; the same world with
// it down evicts that work, which shows the test can fail.
func TestCordoned(t *testing.T) {
	checked := 0
	for seed := uint64(0); seed < 80; seed++ {
		in, _ := propertyCase(seed)
		in.Down = nil
		var node fleet.NodeID
		onNode := map[string]bool{}
		for _, w := range in.Workloads {
			if w.Running == nil {
				continue
			}
			for _, r := range w.Running.Replicas {
				if node == "" {
					node = r.Node
				}
				if r.Node == node {
					onNode[string(w.Name)] = true
				}
			}
		}
		if node == "" {
			continue
		}
		checked++
		in.Cordoned = []fleet.NodeID{node}
		plan := Schedule(in)
		for _, p := range plan.Placements {
			if p.Node == node {
				t.Fatalf("seed %d: %s replica %d placed on cordoned node %s", seed, p.Workload, p.Replica, node)
			}
		}
		for _, p := range plan.Preemptions {
			if strings.Contains(p.Reason, "is down") {
				t.Fatalf("seed %d: %s evicted from cordoned node %s as if down: %s", seed, p.Workload, node, p.Reason)
			}
		}
		in.Cordoned, in.Down = nil, []fleet.NodeID{node}
		down := Schedule(in)
		evicted := map[string]bool{}
		for _, p := range down.Preemptions {
			evicted[string(p.Workload)] = true
		}
		for name := range onNode {
			if !evicted[name] {
				t.Fatalf("seed %d: %s on down node %s was not evicted", seed, name, node)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d worlds had running work to cordon", checked)
	}
}
