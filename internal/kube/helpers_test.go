package kube

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// gpuNode is a Ready node with gpus H100s in block (label arbiter.dev/block).
func gpuNode(name string, gpus int, block string) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", LabelGPUMemory: "81559",
			LabelRegion: "eastus", LabelZone: "eastus-1",
		}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	if block != "" {
		n.Labels["arbiter.dev/block"] = block
	}
	return n
}

// gpuPod is a pending pod of Arbiter's asking for gpus whole GPUs.
func gpuPod(ns, name string, gpus int, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Annotations: ann,
			CreationTimestamp: metav1.NewTime(t0), Labels: map[string]string{}},
		Spec: corev1.PodSpec{SchedulerName: "arbiter", Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// tenantObj is an ArbiterTenant with quota entries of H100-80G: guaranteed
// and limit ("" for none).
func tenantObj(name, guaranteed, limit string, namespaces ...string) *unstructured.Unstructured {
	q := map[string]any{"flavor": "H100-80G"}
	if guaranteed != "" {
		q["guaranteed"] = guaranteed
	}
	if limit != "" {
		q["limit"] = limit
	}
	ns := []any{}
	for _, n := range namespaces {
		ns = append(ns, n)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "arbiter.dev/v1alpha1", "kind": "ArbiterTenant",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"quota": []any{q}, "namespaces": ns},
	}}
	return u
}

func podGroupObj(ns, name string, min int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"minMember": min},
	}}
}

func reservationObj(name, tenant string, count int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "arbiter.dev/v1alpha1", "kind": "ArbiterReservation",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"tenant": tenant, "region": "eastus", "model": "H100-80G",
			"gpusPerNode": int64(8), "count": count},
	}}
}

func gang(ns, group string, n, gpus int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		p := gpuPod(ns, fmt.Sprintf("%s-%d", group, i), gpus, nil)
		p.Labels[LabelPodGroup] = group
		out = append(out, p)
	}
	return out
}

func testConfig() *Config {
	c := &Config{}
	c.Defaults()
	return c
}
