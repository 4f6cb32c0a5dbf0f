package kubetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var (
	crdGVR    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgetGVR = schema.GroupVersionResource{Group: "kubetest.arbiter.example", Version: "v1", Resource: "widgets"}
)

// widgetCRD is a namespaced CRD with an OpenAPI schema (spec.gpus >= 0) and a
// status subresource, the shape of Arbiter's own CRDs.
func widgetCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "widgets.kubetest.arbiter.example"},
		"spec": map[string]any{
			"group": "kubetest.arbiter.example",
			"scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{"type": "object", "properties": map[string]any{
							"gpus": map[string]any{"type": "integer", "minimum": int64(0)},
						}},
						"status": map[string]any{"type": "object", "properties": map[string]any{
							"used": map[string]any{"type": "integer"},
						}},
					},
				}},
			}},
		},
	}}
}

func widget(name string, gpus int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubetest.arbiter.example/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"gpus": gpus},
	}}
}

// established reports whether the CRD's Established condition is True.
func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" {
			return m["status"] == "True"
		}
	}
	return false
}

func TestCRDEstablishedWithSchemaAndStatus(t *testing.T) {
	const ns = "team-c"
	s, _ := setup(t, ns)
	ctx := ctxT(t)
	dyn, err := dynamic.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := dyn.Resource(crdGVR).Create(ctx, widgetCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	waitFor(t, 30*time.Second, "the CRD to become Established", func(ctx context.Context) error {
		crd, err := dyn.Resource(crdGVR).Get(ctx, "widgets.kubetest.arbiter.example", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !established(crd) {
			return fmt.Errorf("conditions %v", crd.Object["status"])
		}
		return nil
	})
	widgets := dyn.Resource(widgetGVR).Namespace(ns)
	// Established can come a moment before the new endpoint serves.
	waitFor(t, 30*time.Second, "creating a custom object", func(ctx context.Context) error {
		_, err := widgets.Create(ctx, widget("w1", 4), metav1.CreateOptions{})
		return err
	})
	t.Logf("CRD established and serving %v after create", time.Since(began))

	// The schema is enforced.
	if _, err := widgets.Create(ctx, widget("w2", -1), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("create with spec.gpus -1: %v, want Invalid", err)
	}
	// status through the status subresource only.
	w, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(w.Object, int64(2), "status", "used"); err != nil {
		t.Fatal(err)
	}
	w, err = widgets.UpdateStatus(ctx, w, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if err := unstructured.SetNestedField(w.Object, int64(9), "status", "used"); err != nil {
		t.Fatal(err)
	}
	w, err = widgets.Update(ctx, w, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if used, _, _ := unstructured.NestedInt64(w.Object, "status", "used"); used != 2 {
		t.Errorf("status.used after a main-resource update = %d, want 2 (set through /status)", used)
	}
}
