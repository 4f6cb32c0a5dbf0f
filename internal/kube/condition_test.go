package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestConditionRefresh: a new reason is written at once with an Event; a
// message that changes only in its details under the same reason is
// rewritten at most once every ConditionRefresh, without an Event.
func TestConditionRefresh(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"}}
	cs := fake.NewSimpleClientset(pod)
	a := &Applier{Client: cs, SchedulerName: "arbiter", Now: func() time.Time { return now }}
	ctx := context.Background()
	writes := func() (patches, events int) {
		for _, act := range cs.Actions() {
			switch {
			case act.GetVerb() == "patch" && act.GetSubresource() == "status":
				patches++
			case act.GetVerb() == "create" && act.GetResource().Resource == "events":
				events++
			}
		}
		return
	}
	cond := func(reason, msg string, age time.Duration) *corev1.Pod {
		p := pod.DeepCopy()
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: msg,
			LastTransitionTime: metav1.NewTime(now.Add(-age))}}
		return p
	}
	var res Result
	a.condition(ctx, pod, "QuotaLimit", "used 7 of 8", &res) // no condition yet
	if p, e := writes(); p != 1 || e != 1 {
		t.Fatalf("first reason: %d patches, %d events, want 1 and 1", p, e)
	}
	a.condition(ctx, cond("QuotaLimit", "used 7 of 8", 10*time.Second), "QuotaLimit", "used 6 of 8", &res)
	if p, e := writes(); p != 1 || e != 1 {
		t.Errorf("details changed 10s after the last write: %d patches, %d events, want no new write", p, e)
	}
	a.condition(ctx, cond("QuotaLimit", "used 7 of 8", 2*ConditionRefresh), "QuotaLimit", "used 6 of 8", &res)
	if p, e := writes(); p != 2 || e != 1 {
		t.Errorf("details changed after the refresh interval: %d patches, %d events, want a patch and no event", p, e)
	}
	a.condition(ctx, cond("QuotaLimit", "used 7 of 8", time.Second), "Capacity", "no node fits", &res)
	if p, e := writes(); p != 3 || e != 2 {
		t.Errorf("a new reason: %d patches, %d events, want it written at once with an event", p, e)
	}
}
