package kube

import (
	"fmt"
	"testing"

	"github.com/arbiterhq/arbiter/internal/sched"
)

// BenchmarkCycle1000Nodes10000Pods measures Arbiter's side of one cycle
// (Translate and Schedule, no API calls) at 1,000 8-GPU nodes in 50 blocks
// and 10,000 pending 1-GPU pods of 10 tenants: the scale.
func BenchmarkCycle1000Nodes10000Pods(b *testing.B) {
	s := &Snapshot{}
	for i := 0; i < 1000; i++ {
		s.Nodes = append(s.Nodes, gpuNode(fmt.Sprintf("n%04d", i), 8, fmt.Sprintf("blk%02d", i%50)))
	}
	for t := 0; t < 10; t++ {
		ns := fmt.Sprintf("t%d", t)
		s.Namespaces = append(s.Namespaces, namespace(ns, nil))
		s.Tenants = append(s.Tenants, tenantObj(ns, "800", ""))
		for i := 0; i < 1000; i++ {
			s.Pods = append(s.Pods, gpuPod(ns, fmt.Sprintf("p%04d", i), 1, nil))
		}
	}
	cfg := testConfig()
	b.ResetTimer()
	var placed int
	for i := 0; i < b.N; i++ {
		c, err := Translate(s, cfg, t0)
		if err != nil {
			b.Fatal(err)
		}
		plan := sched.Schedule(c.Input)
		placed = len(plan.Placements)
	}
	b.ReportMetric(float64(placed)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
}

// BenchmarkCycleBound1000Nodes10000Pods measures the same cycle once
// every pod is bound (with its GPU indices annotated): the steady state a
// cluster cycles in.
func BenchmarkCycleBound1000Nodes10000Pods(b *testing.B) {
	for _, memo := range []bool{false, true} {
		b.Run(fmt.Sprintf("memo=%v", memo), func(b *testing.B) { benchBound(b, memo) })
	}
}

func benchBound(b *testing.B, memo bool) {
	s := &Snapshot{}
	if memo {
		s.Memo = NewSpecMemo()
	}
	for i := 0; i < 1000; i++ {
		s.Nodes = append(s.Nodes, gpuNode(fmt.Sprintf("n%04d", i), 10, fmt.Sprintf("blk%02d", i%50)))
	}
	for t := 0; t < 10; t++ {
		ns := fmt.Sprintf("t%d", t)
		s.Namespaces = append(s.Namespaces, namespace(ns, nil))
		s.Tenants = append(s.Tenants, tenantObj(ns, "1000", ""))
		for i := 0; i < 1000; i++ {
			p := gpuPod(ns, fmt.Sprintf("p%04d", i), 1, nil)
			p.Spec.NodeName = fmt.Sprintf("n%04d", (t*1000+i)/10)
			p.Annotations = map[string]string{AnnotationGPUIndices: fmt.Sprint(i % 10)}
			p.ResourceVersion = "1"
			s.Pods = append(s.Pods, p)
		}
	}
	cfg := testConfig()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := Translate(s, cfg, t0)
		if err != nil {
			b.Fatal(err)
		}
		if len(c.Input.Workloads) != 10000 {
			b.Fatalf("%d workloads", len(c.Input.Workloads))
		}
		sched.Schedule(c.Input)
	}
}
