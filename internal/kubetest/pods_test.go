package kubetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// gpuPod is a pending Pod for the arbiter scheduler asking for n GPUs.
func gpuPod(name string, n, grace int64, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName:                 "arbiter",
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:  "train",
				Image: "example.invalid/train:1",
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{gpu: *resource.NewQuantity(n, resource.DecimalSI)},
				},
			}},
		},
	}
}

// setup starts a server with namespace ns and a Ready 8-GPU node "gpu-1".
func setup(t *testing.T, ns string) (*APIServer, kubernetes.Interface) {
	t.Helper()
	s := Start(t)
	c := s.Client(t)
	ctx := ctxT(t)
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	if _, err := c.CoreV1().Nodes().Create(ctx, gpuNode("gpu-1", 8), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	return s, c
}

// bind binds pod to node through the pods/binding subresource.
func bind(ctx context.Context, c kubernetes.Interface, ns, pod, node string) error {
	return c.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
}

// evict asks the Eviction API (policy/v1) to evict pod, once. client-go's
// EvictV1 retries a 429 that carries Retry-After (the server sends 10 s for a
// budget its controller has not observed) up to 10 times, blocking for about
// 100 s; this makes the request as EvictV1 does but without retries, so the
// refusal is seen at once.
func evict(ctx context.Context, c kubernetes.Interface, ns, pod string) error {
	return c.CoreV1().RESTClient().Post().
		AbsPath("/api/v1/namespaces", ns, "pods", pod, "eviction").
		Body(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}}).
		MaxRetries(0).Do(ctx).Error()
}

func TestPodBindThenEvictWithoutKubelet(t *testing.T) {
	const ns = "team-a"
	_, c := setup(t, ns)
	ctx := ctxT(t)
	pods := c.CoreV1().Pods(ns)

	// A pod in a namespace that does not exist is refused (NamespaceLifecycle).
	if _, err := c.CoreV1().Pods("no-such-ns").Create(ctx, gpuPod("p0", 1, 30, nil), metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("create a pod in a missing namespace: %v, want NotFound", err)
	}

	if _, err := pods.Create(ctx, gpuPod("p1", 2, 30, nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod (no ServiceAccount controller runs): %v", err)
	}
	if err := bind(ctx, c, ns, "p1", "gpu-1"); err != nil {
		t.Fatalf("bind: %v", err)
	}
	p, err := pods.Get(ctx, "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "gpu-1" {
		t.Fatalf("spec.nodeName after binding = %q, want gpu-1", p.Spec.NodeName)
	}
	if !hasCondition(p, corev1.PodScheduled, corev1.ConditionTrue) {
		t.Errorf("PodScheduled after binding: %v, want True", p.Status.Conditions)
	}
	// A second binding of a bound pod is a conflict: two binders cannot both win.
	if err := bind(ctx, c, ns, "p1", "gpu-2"); !apierrors.IsConflict(err) {
		t.Errorf("second binding: %v, want Conflict", err)
	}

	// Evicting a bound pod marks it deleted with its grace period; with no
	// kubelet to stop it, it stays until deleted with grace 0.
	if err := evict(ctx, c, ns, "p1"); err != nil {
		t.Fatalf("evict: %v", err)
	}
	p, err = pods.Get(ctx, "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the evicted bound pod: %v (want it still there, terminating)", err)
	}
	if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("evicted bound pod: deletionTimestamp %v, deletionGracePeriodSeconds %v; want set and 30",
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds)
	}
	t.Logf("evicted bound pod: deletionTimestamp %v (grace %ds), phase %q, conditions %v",
		p.DeletionTimestamp, *p.DeletionGracePeriodSeconds, p.Status.Phase, p.Status.Conditions)
	// Evicting it again is accepted and changes nothing.
	if err := evict(ctx, c, ns, "p1"); err != nil {
		t.Errorf("second eviction of a terminating pod: %v", err)
	}
	zero := int64(0)
	if err := pods.Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete with grace 0 (the kubelet's part): %v", err)
	}
	if _, err := pods.Get(ctx, "p1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete with grace 0: %v, want NotFound", err)
	}

	// An unbound pod has nothing to stop: eviction deletes it at once.
	if _, err := pods.Create(ctx, gpuPod("p2", 1, 30, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := evict(ctx, c, ns, "p2"); err != nil {
		t.Fatalf("evict an unbound pod: %v", err)
	}
	if _, err := pods.Get(ctx, "p2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("unbound pod after eviction: %v, want NotFound", err)
	}
}

func hasCondition(p *corev1.Pod, typ corev1.PodConditionType, st corev1.ConditionStatus) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status == st
		}
	}
	return false
}

func TestEvictionHonoursPodDisruptionBudget(t *testing.T) {
	const ns = "team-b"
	_, c := setup(t, ns)
	ctx := ctxT(t)
	labels := map[string]string{"app": "train"}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, gpuPod("p1", 1, 5, labels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := bind(ctx, c, ns, "p1", "gpu-1"); err != nil {
		t.Fatal(err)
	}
	// A Pending pod ignores disruption budgets (the eviction API lets it go
	// at once), and without a kubelet a bound pod stays Pending: so the test
	// does the kubelet's part and reports it Running and Ready.
	running(ctx, t, c, ns, "p1")
	one := intstr.FromInt32(1)
	pdbs := c.PolicyV1().PodDisruptionBudgets(ns)
	pdb, err := pdbs.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No disruption controller runs, so the budget's status is unobserved and
	// the API server refuses the eviction (429).
	if err := evict(ctx, c, ns, "p1"); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evict under a budget no controller has observed: %v, want TooManyRequests", err)
	}
	// The status a disruption controller would write, allowing none...
	setPDBStatus := func(allowed int32) {
		t.Helper()
		cur, err := pdbs.Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status = policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: pdb.Generation, DisruptionsAllowed: allowed,
			CurrentHealthy: 1, DesiredHealthy: 1 - allowed, ExpectedPods: 1,
		}
		if _, err := pdbs.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update PDB status: %v", err)
		}
	}
	setPDBStatus(0)
	if err := evict(ctx, c, ns, "p1"); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evict with disruptionsAllowed 0: %v, want TooManyRequests", err)
	}
	// ...and then allowing one: the eviction goes through and is charged.
	setPDBStatus(1)
	if err := evict(ctx, c, ns, "p1"); err != nil {
		t.Fatalf("evict with disruptionsAllowed 1: %v", err)
	}
	got, err := pdbs.Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, recorded := got.Status.DisruptedPods["p1"]; got.Status.DisruptionsAllowed != 0 || !recorded {
		t.Errorf("PDB after an eviction: disruptionsAllowed %d, disruptedPods %v; want 0 and p1 recorded",
			got.Status.DisruptionsAllowed, got.Status.DisruptedPods)
	}
	p, err := c.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("evicted pod: %v, deletionTimestamp %v; want terminating", err, p.GetDeletionTimestamp())
	}
}

func TestEventsAndLeases(t *testing.T) {
	const ns = "arbiter-system"
	_, c := setup(t, ns)
	ctx := ctxT(t)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "p1.pending", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p1"},
		Reason:         "QuotaExceeded", Message: "tenant over quota", Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: "arbiter"}, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
	}
	if _, err := c.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create event: %v", err)
	}
	leases := c.CoordinationV1().Leases(ns)
	holder, dur := "replica-gone", int32(15)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Create(ctx, &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "arbiter-kube"},
		Spec:       coordv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create lease: %v", err)
	}
	// Two replicas take over the lease from the same resourceVersion: the
	// second write is a conflict, which is what keeps both from leading.
	a, b := l.DeepCopy(), l.DeepCopy()
	ha, hb := "replica-a", "replica-b"
	a.Spec.HolderIdentity, b.Spec.HolderIdentity = &ha, &hb
	if _, err := leases.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("first update: %v", err)
	}
	if _, err := leases.Update(ctx, b, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("second update on the same resourceVersion: %v, want Conflict", err)
	}
	got, err := leases.Get(ctx, "arbiter-kube", metav1.GetOptions{})
	if err != nil || *got.Spec.HolderIdentity != "replica-a" {
		t.Fatalf("lease holder %v (%v), want replica-a", fmt.Sprint(got.Spec.HolderIdentity), err)
	}
}

// running sets pod's status to Running and Ready, as its kubelet would.
func running(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, pod string) {
	t.Helper()
	p, err := c.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set pod %s Running: %v", pod, err)
	}
}

func TestEvictingAPendingPodIgnoresPodDisruptionBudget(t *testing.T) {
	const ns = "team-d"
	_, c := setup(t, ns)
	ctx := ctxT(t)
	labels := map[string]string{"app": "train"}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, gpuPod("p1", 1, 5, labels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := bind(ctx, c, ns, "p1", "gpu-1"); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	if _, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := evict(ctx, c, ns, "p1"); err != nil {
		t.Fatalf("evict a bound but Pending pod under a budget: %v, want it allowed", err)
	}
	p, err := c.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("evicted pending pod: %v, deletionTimestamp %v; want terminating", err, p.GetDeletionTimestamp())
	}
}
