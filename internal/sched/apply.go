package sched

import (
	"time"

	"github.com/arbiterhq/arbiter/internal/workload"
)

// Apply is the reference applier: it commits a plan instantly, as the
// simulator does. Victims are requeued as pending (their Running cleared, an
// elastic one's replicas back to its min), placed workloads become running
// from now, resized ones take their new size (Resized). Workloads are copied, never
// modified, and keep their order. Victims of a placement with
// AfterPreemption exit at once here; a real applier waits for them.
func Apply(ws []*workload.Workload, p Plan, now time.Time) []*workload.Workload {
	evicted := make(map[workload.ID]bool, len(p.Preemptions))
	for _, x := range p.Preemptions {
		evicted[x.Workload] = true
	}
	placed := make(map[workload.ID][]Placement, len(p.Placements))
	for _, x := range p.Placed() {
		placed[x.Workload] = x.Placements
	}
	resized := make(map[workload.ID]Resize, len(p.Resizes))
	for _, x := range p.Resizes {
		resized[x.Workload] = x
	}
	out := make([]*workload.Workload, len(ws))
	for i, w := range ws {
		c := *w
		if evicted[w.Name] {
			c.Running = nil
			c.Replicas = c.MinReplicas()
		}
		if x, ok := resized[w.Name]; ok && c.Running != nil {
			c.Running, c.Replicas = Resized(c.Running, x, now), x.To
		}
		if ps, ok := placed[w.Name]; ok {
			c.Running = Assignment(ps, now)
		}
		out[i] = &c
	}
	return out
}
