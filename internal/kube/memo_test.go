package kube

import (
	corev1 "k8s.io/api/core/v1"
	"reflect"
	"testing"
)

// TestSpecMemo: a cycle with the memo translates to exactly what a cycle
// without it does, and a pod's new resourceVersion or its namespace's new
// tenant is translated afresh.
func TestSpecMemo(t *testing.T) {
	snap := func() *Snapshot {
		s := &Snapshot{Nodes: []*corev1.Node{gpuNode("n1", 8, "b1")}}
		s.Namespaces = append(s.Namespaces, namespace("a", nil), namespace("b", nil))
		s.Tenants = append(s.Tenants, tenantObj("a", "4", "", "a"), tenantObj("b", "4", "", "b"))
		for _, ns := range []string{"a", "b"} {
			p := gpuPod(ns, "p", 1, map[string]string{AnnotationPriority: "high"})
			p.ResourceVersion = "1"
			s.Pods = append(s.Pods, p)
		}
		return s
	}
	cfg := testConfig()
	memo := NewSpecMemo()
	for round := 0; round < 3; round++ {
		plain, memoed := snap(), snap()
		memoed.Memo = memo
		switch round {
		case 1: // the pod changed: a new resourceVersion, a new priority
			for _, s := range []*Snapshot{plain, memoed} {
				s.Pods[0].ResourceVersion, s.Pods[0].Annotations[AnnotationPriority] = "2", "low"
			}
		case 2: // namespace b now belongs to tenant a
			for _, s := range []*Snapshot{plain, memoed} {
				s.Tenants = s.Tenants[:1]
				s.Tenants[0] = tenantObj("a", "4", "", "a", "b")
			}
		}
		want, err := Translate(plain, cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Translate(memoed, cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Input.Workloads, want.Input.Workloads) {
			t.Fatalf("round %d: with the memo\n%+v\nwithout\n%+v", round, got.Input.Workloads, want.Input.Workloads)
		}
		if memo.Len() != 2 {
			t.Fatalf("round %d: memo holds %d specs, want the 2 pods'", round, memo.Len())
		}
	}
}
