package sim

import (
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy/effects"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Busy utilization (issue 23 point 4): how busy the simulator says each
// running workload keeps its GPUs, so that a policy keyed to
// busy_utilization (what NVML says on the server) is tested before it
// goes live. The model is a ratio per kind of work, derived from the
// run's own state (no random draw, so the run's streams do not move):
//
//	training   0.90  (data-parallel steps keep the GPUs near saturation)
//	batch      0.80
//	inference  a service replica: its region's queue utilization this
//	           step (serving.StepResult.Utilization, the share of replica
//	           time busy); other inference work 0.60
//	vm         0.20  (interactive and dev machines mostly wait)
//
// GPUs no work holds are idle (0). The run samples busy utilization only
// when its policy reads it (policy.Policy.Reads), so a run without such a
// rule does exactly what it did before.
var busyByKind = map[workload.Kind]float64{
	workload.KindTraining:  0.90,
	workload.KindBatch:     0.80,
	workload.KindInference: 0.60,
	workload.KindVM:        0.20,
}

// busyRatio is how busy a running job keeps its GPUs this step.
func (s *Sim) busyRatio(j *job) float64 {
	if j.w.Kind == workload.KindInference && j.gen < 0 && j.svc >= 0 && j.svc < len(s.services) {
		st := s.services[j.svc]
		if j.region >= 0 && j.region < len(st.results) {
			return min(1, max(0, st.results[j.region].Utilization))
		}
	}
	return busyByKind[j.w.Kind]
}

// busySample is the step's busy_utilization observations: every node's
// GPUs (the work on them at its ratio, the rest idle), and each tenant's
// over the GPUs its work holds.
func (s *Sim) busySample(nodes []effects.Node) []effects.Observation {
	p := s.pol
	if p.nodeIdx == nil {
		p.nodeIdx = make(map[fleet.NodeID]int, len(nodes))
		for i, n := range nodes {
			p.nodeIdx[n.ID] = i
		}
	}
	onNode := make([]float64, len(nodes))
	var bt effects.BusyTotals
	for _, j := range s.jobs {
		if j.done || j.w.Running == nil {
			continue
		}
		reps := j.w.Running.Replicas
		if len(reps) == 0 {
			continue
		}
		r := s.busyRatio(j)
		held := float64(j.gpus()) / resource.PerGPU
		per := held / float64(len(reps)) // replicas are alike
		for _, rep := range reps {
			if i, ok := p.nodeIdx[rep.Node]; ok {
				onNode[i] += per * r
			}
		}
		bt.AddTenant(j.w.Tenant, held*r, held)
	}
	for i, n := range nodes {
		bt.AddNode(n, onNode[i], float64(n.GPUs))
	}
	return bt.Observations(p.tenants)
}
