package kube

import (
	corev1 "k8s.io/api/core/v1"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestPolicyStateCarriesToNextLeader: a rule in force, whose state the
// policy's status carries, stays in force under a new runner (a new
// leader) without firing again; a new generation of the policy starts
// fresh.
func TestPolicyStateCarriesToNextLeader(t *testing.T) {
	s := &Snapshot{Nodes: []*corev1.Node{gpuNode("n1", 8, "A")}}
	s.Namespaces = append(s.Namespaces, namespace("a", nil))
	s.Tenants = append(s.Tenants, tenantObj("a", "8", "", "a"))
	p := gpuPod("a", "train", 6, nil)
	p.Spec.NodeName = "n1"
	s.Pods = append(s.Pods, p)
	pol := policyObj("p", `
policies:
  - name: busy
    when: {metric: utilization, of: cluster, above: 50%}
    then: [{type: set_limit, target: class:dev, limit: 0}]
    cooldown: 10m
`)
	pol.SetGeneration(1)
	cycle := func(r *Policies, u *unstructured.Unstructured, now time.Time) PolicyResult {
		c, err := Translate(s, testConfig(), now)
		if err != nil {
			t.Fatal(err)
		}
		return r.Run(c, []*unstructured.Unstructured{u}, now)
	}
	first := NewPolicies()
	if res := cycle(first, pol, t0); len(res.Firings) != 1 {
		t.Fatalf("first leader: %d firings, want 1", len(res.Firings))
	}
	st := first.policyStatus("p")
	if a := st["active"].([]any); len(a) != 1 || st["firings"] != int64(1) {
		t.Fatalf("status %v: want busy in force, 1 firing", st)
	}
	pol.Object["status"] = st

	next := NewPolicies()
	if res := cycle(next, pol, t0.Add(time.Minute)); len(res.Firings) != 0 {
		t.Fatalf("next leader fired again: %v", res.Firings)
	}
	if a := next.policyStatus("p")["active"].([]any); len(a) != 1 {
		t.Fatal("next leader: the rule in force was lost")
	}
	if f := next.policyStatus("p")["firings"]; f != int64(1) {
		t.Errorf("next leader: firings %v, want the 1 carried", f)
	}

	pol.SetGeneration(2) // edited: its rules start fresh
	fresh := NewPolicies()
	if res := cycle(fresh, pol, t0.Add(2*time.Minute)); len(res.Firings) != 1 {
		t.Fatalf("new generation: %d firings, want a fresh firing", len(res.Firings))
	}
}
