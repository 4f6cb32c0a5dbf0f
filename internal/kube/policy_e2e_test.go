package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func policyObj(name, source string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "arbiter.dev/v1alpha1", "kind": "ArbiterPolicy",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"source": source},
	}}
}

// policyStatusOf reads an ArbiterPolicy's status.
func (e *e2e) policyStatusOf(name string) map[string]any {
	e.t.Helper()
	u, err := e.dyn.Resource(PolicyGVR).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	st, _ := u.Object["status"].(map[string]any)
	return st
}

// TestE2EPolicy: an ArbiterPolicy runs with the server's engine and
// runtime. When the cluster is over 50% used, developer instances are
// capped at 0 GPUs: a dev pod that arrives then stays pending with the
// policy's hold as its condition, the policy's status shows the rule in
// force and its firing, and an Event records it. A policy that does not
// compile says why, naming the field and line, and changes nothing.
func TestE2EPolicy(t *testing.T) {
	e := startE2E(t)
	e.node("n1", 8, "A")
	e.namespace("a")
	e.create(TenantGVR, "", tenantObj("a", "8", "", "a"))
	e.create(PolicyGVR, "", policyObj("protect-training", `
policies:
  - name: training_first
    when: {metric: utilization, of: cluster, above: 50%}
    then:
      - {type: set_limit, target: class:developer_instances, limit: 0}
    cooldown: 1m
`))
	e.create(PolicyGVR, "", policyObj("broken", `
policies:
  - name: typo
    when: {metric: utilisation, of: cluster, above: 50%}
    then: [{type: notify, channel: x, message: y}]
`))
	cycles, _, _ := e.run("r1")
	train := gpuPod("a", "train", 6, nil)
	e.pod(train)
	e.within("training bound", func() bool { return e.get("a", "train").Spec.NodeName == "n1" })
	e.within("rule in force", func() bool {
		st := e.policyStatusOf("protect-training")
		active, _ := st["active"].([]any)
		return st["valid"] == true && len(active) == 1 && active[0] == "training_first"
	})
	dev := gpuPod("a", "dev", 1, nil)
	dev.Labels[LabelClass] = "developer_instances"
	e.pod(dev)
	e.within("dev held by the policy", func() bool {
		c := scheduledCondition(e.get("a", "dev"))
		return c != nil && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "training_first")
	})
	e.cyclesPass(cycles, 3)
	if n := e.get("a", "dev").Spec.NodeName; n != "" {
		t.Fatalf("dev pod bound to %s while the cap of 0 is in force", n)
	}
	st := e.policyStatusOf("protect-training")
	if f, _ := st["firings"].(int64); f < 1 || !strings.Contains(st["lastFiring"].(string), "training_first") {
		t.Errorf("status firings %v, lastFiring %q: want the firing", st["firings"], st["lastFiring"])
	}
	e.within("firing Event", func() bool {
		l, err := e.client.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range l.Items {
			if ev.InvolvedObject.Kind == "ArbiterPolicy" && ev.InvolvedObject.Name == "protect-training" && ev.Reason == "PolicyFired" {
				return true
			}
		}
		return false
	})
	bad := e.policyStatusOf("broken")
	msg, _ := bad["message"].(string)
	if bad["valid"] != false || !strings.Contains(msg, "spec.source") || !strings.Contains(msg, "utilisation") || !strings.Contains(msg, ":4:") {
		t.Errorf("broken policy's status %v: want valid false and a message naming spec.source, the line and the metric", bad)
	}

	// The training finishes: utilization falls to 0, the rule reverts
	// after its cooldown... which the test does not wait for; deleting
	// the policy ends its actions at once and the dev pod binds.
	if err := e.dyn.Resource(PolicyGVR).Delete(e.ctx, "protect-training", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.within("dev bound once the policy is gone", func() bool { return e.get("a", "dev").Spec.NodeName == "n1" })
}
