package kube

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// Two replicas on one Lease: exactly one leads at a time; when it stops
// (its context ends, the Lease is released) the other takes over.
func TestLeaderElectionOneLeader(t *testing.T) {
	client := fake.NewSimpleClientset()
	var leading, maxLeading atomic.Int32
	leader := make(chan string, 4)
	var wg sync.WaitGroup
	cancels := map[string]context.CancelFunc{}
	for _, id := range []string{"r1", "r2"} {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[id] = cancel
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			l := Lease{Name: "arbiter-kube", Namespace: "arbiter-system", Identity: id,
				Duration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
			_ = RunLeader(ctx, client, l, nil, func(ctx context.Context) {
				n := leading.Add(1)
				for {
					m := maxLeading.Load()
					if n <= m || maxLeading.CompareAndSwap(m, n) {
						break
					}
				}
				leader <- id
				<-ctx.Done()
				leading.Add(-1)
			})
		}(id)
	}
	t.Cleanup(func() {
		for _, c := range cancels {
			c()
		}
		wg.Wait()
	})
	var first string
	select {
	case first = <-leader:
	case <-time.After(10 * time.Second):
		t.Fatal("no leader")
	}
	cancels[first]()
	var second string
	select {
	case second = <-leader:
	case <-time.After(15 * time.Second):
		t.Fatal("no second leader after the first released the Lease")
	}
	if second == first {
		t.Fatalf("%s led twice", first)
	}
	if m := maxLeading.Load(); m != 1 {
		t.Fatalf("%d replicas led at once", m)
	}
}

// A binding the pod cache does not show yet still holds its GPUs: the
// assume cache overlays it until the cache catches up or it expires.
func TestAssumedOverlay(t *testing.T) {
	a := NewAssumed(time.Minute)
	p := gpuPod("a", "p", 2, nil)
	p.UID = types.UID("u1")
	a.Add("u1", "n1", map[string]string{AnnotationGPUIndices: "0,1"}, t0)
	out := a.Overlay([]*corev1.Pod{p}, t0.Add(time.Second))
	if out[0].Spec.NodeName != "n1" || out[0].Annotations[AnnotationGPUIndices] != "0,1" || p.Spec.NodeName != "" {
		t.Fatalf("overlay %+v (cache pod changed: %q)", out[0].Spec.NodeName, p.Spec.NodeName)
	}
	// The core so sees the GPUs held: a second pod goes elsewhere.
	q := gpuPod("a", "q", 8, nil)
	s := &Snapshot{Nodes: []*corev1.Node{gpuNode("n1", 8, "A")}, Pods: append(out, q),
		Namespaces: []*corev1.Namespace{namespace("a", nil)}, Tenants: []*unstructured.Unstructured{tenantObj("a", "16", "")}}
	cy := translate(t, s)
	for _, w := range cy.Input.Workloads {
		if w.Name == "a:p" && w.Running == nil {
			t.Fatal("assumed pod not running")
		}
	}
	if out := a.Overlay([]*corev1.Pod{p}, t0.Add(2*time.Minute)); out[0].Spec.NodeName != "" {
		t.Error("expired assumption still applied")
	}
	a.Add("u1", "n1", nil, t0)
	if out := a.Overlay(nil, t0); len(out) != 0 || len(a.m) != 0 {
		t.Error("assumption of a gone pod kept")
	}
}
