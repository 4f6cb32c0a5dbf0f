package sched

import (
	"time"

	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Placed is one workload's placements in a plan, one per replica, in plan
// order.
type Placed struct {
	Workload   workload.ID
	Placements []Placement
}

// Placed groups the plan's placements by workload, in the order the plan
// first places each. Every applier (Apply, the simulator, the store) reads
// a plan's placements through it.
func (p Plan) Placed() []Placed {
	var out []Placed
	at := make(map[workload.ID]int, len(p.Placements))
	for _, x := range p.Placements {
		i, ok := at[x.Workload]
		if !ok {
			i = len(out)
			at[x.Workload] = i
			out = append(out, Placed{Workload: x.Workload})
		}
		out[i].Placements = append(out[i].Placements, x)
	}
	return out
}

// Assignment is what a workload placed by ps runs under from start: the
// one conversion of a plan's placements into a workload's assignment.
// It is nil when ps is empty.
func Assignment(ps []Placement, start time.Time) *workload.Assignment {
	if len(ps) == 0 {
		return nil
	}
	a := &workload.Assignment{Flavor: ps[0].Flavor, Region: ps[0].Region, OnReservation: ps[0].OnReservation,
		Within: ps[0].Within, StartedAt: start, Replicas: make([]workload.Replica, 0, len(ps))}
	for _, x := range ps {
		a.Replicas = append(a.Replicas, workload.Replica{Node: x.Node, GPUs: x.GPUs, Milli: resource.MilliGPU(x.Milli), MIG: x.MIG.Instance()})
	}
	return a
}
