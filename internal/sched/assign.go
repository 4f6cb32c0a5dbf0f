package sched

import (
	"slices"
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

// Resized is a's assignment after resize r: the highest replicas removed
// (a shrink) or r.Add appended, started at now (a growth). a is not
// changed (a Cache's contract): the result is a new Assignment. Every
// applier resizes through it.
func Resized(a *workload.Assignment, r Resize, now time.Time) *workload.Assignment {
	if a == nil {
		return nil
	}
	c := *a
	n := min(max(r.To, 0), len(a.Replicas))
	if r.Shrink() {
		c.Replicas = slices.Clone(a.Replicas[:n])
		return &c
	}
	c.Replicas = slices.Grow(slices.Clone(a.Replicas), len(r.Add))
	for _, x := range r.Add {
		c.Replicas = append(c.Replicas, workload.Replica{Node: x.Node, GPUs: x.GPUs, Milli: resource.MilliGPU(x.Milli), MIG: x.MIG.Instance(), Since: now})
	}
	return &c
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
