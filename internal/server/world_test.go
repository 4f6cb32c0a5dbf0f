package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// world.after applies a plan's placements, preemptions and resizes to the
// workloads it names and to no other, whether the world's workloads are in
// key order (found by binary search) or not (the pass over all of them).
func TestWorldAfter(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	run := func(n int) *workload.Assignment {
		a := &workload.Assignment{Flavor: "A100-80G", Region: "eastus", StartedAt: now.Add(-time.Hour)}
		for i := range n {
			a.Replicas = append(a.Replicas, workload.Replica{Node: "n1", GPUs: []int{i}, Milli: resource.PerGPU})
		}
		return a
	}
	var ws []*store.Workload
	for _, tenant := range []string{"a", "a-b", "b"} {
		for i := range 4 {
			x := &store.Workload{Tenant: tenant, Spec: workload.Spec{Name: workload.ID(fmt.Sprintf("w%d", i)), GPUs: resource.GPUs(1), Replicas: 2}}
			if i%2 == 1 {
				x.Running = run(2)
			}
			ws = append(ws, x)
		}
	}
	slices.SortFunc(ws, func(a, b *store.Workload) int { return strings.Compare(a.Key(), b.Key()) })
	plan := sched.Plan{
		Placements:  []sched.Placement{{Workload: "a-b/w0", Node: "n2", GPUs: []int{0}, Milli: 1000, Flavor: "A100-80G", Region: "eastus"}},
		Preemptions: []sched.Preemption{{Workload: "b/w1"}},
		Resizes:     []sched.Resize{{Workload: "a/w3", From: 2, To: 1}},
	}
	check := func(order string, ws []*store.Workload) {
		w := &world{Workloads: ws}
		got := w.after(plan, now)
		for i, x := range got.Workloads {
			was := ws[i]
			switch k := x.Key(); k {
			case "a-b/w0":
				if x.Running == nil || x.Running.Replicas[0].Node != "n2" || was.Running != nil {
					t.Errorf("%s: %s not placed: %+v", order, k, x.Running)
				}
			case "b/w1":
				if x.Running != nil || x.Spec.Replicas != 2 || was.Running == nil {
					t.Errorf("%s: %s not evicted: %+v", order, k, x.Running)
				}
			case "a/w3":
				if x.Running == nil || len(x.Running.Replicas) != 1 || x.Spec.Replicas != 1 || len(was.Running.Replicas) != 2 {
					t.Errorf("%s: %s not resized to 1: %+v (spec %d)", order, k, x.Running, x.Spec.Replicas)
				}
			default:
				if x != was {
					t.Errorf("%s: %s changed, the plan does not name it", order, k)
				}
			}
		}
	}
	check("key order", ws)
	rev := slices.Clone(ws)
	slices.Reverse(rev)
	check("reversed", rev)
}
