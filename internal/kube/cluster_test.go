package kube

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// cluster is a fake API server (client-go's fake clientset) that binds
// pods/binding and answers the Eviction API: a pod labelled pdb=block is
// refused with 429 as a PodDisruptionBudget would; others get a
// deletionTimestamp (terminating) and stay until the test deletes them.
type cluster struct {
	t       *testing.T
	client  *fake.Clientset
	dyn     *dynamicfake.FakeDynamicClient
	ctl     *Controller
	mu      sync.Mutex
	evicted []string
}

func newCluster(t *testing.T, core []runtime.Object, custom []runtime.Object) *cluster {
	t.Helper()
	cl := &cluster{t: t, client: fake.NewSimpleClientset(core...)}
	cl.client.Resources = []*metav1.APIResourceList{
		{GroupVersion: TenantGVR.GroupVersion().String(), APIResources: []metav1.APIResource{{Name: TenantGVR.Resource}, {Name: ReservationGVR.Resource}}},
		{GroupVersion: PodGroupGVR.GroupVersion().String(), APIResources: []metav1.APIResource{{Name: PodGroupGVR.Resource}}},
	}
	cl.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		TenantGVR: "ArbiterTenantList", ReservationGVR: "ArbiterReservationList", PodGroupGVR: "PodGroupList",
	}, custom...)
	tracker := cl.client.Tracker()
	podsGVR := corev1.SchemeGroupVersion.WithResource("pods")
	cl.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		switch ca.GetSubresource() {
		case "binding":
			b := ca.GetObject().(*corev1.Binding)
			o, err := tracker.Get(podsGVR, b.Namespace, b.Name)
			if err != nil {
				return true, nil, err
			}
			p := o.(*corev1.Pod).DeepCopy()
			if p.Spec.NodeName != "" {
				return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), p.Name, nil)
			}
			p.Spec.NodeName = b.Target.Name
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			for k, v := range b.Annotations {
				p.Annotations[k] = v
			}
			return true, b, tracker.Update(podsGVR, p, p.Namespace)
		case "eviction":
			ev := ca.GetObject().(*policyv1.Eviction)
			o, err := tracker.Get(podsGVR, ev.Namespace, ev.Name)
			if err != nil {
				return true, nil, err
			}
			p := o.(*corev1.Pod).DeepCopy()
			if p.Labels["pdb"] == "block" {
				return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
			}
			cl.mu.Lock()
			cl.evicted = append(cl.evicted, ev.Namespace+"/"+ev.Name)
			cl.mu.Unlock()
			now := metav1.Now()
			p.DeletionTimestamp = &now
			p.DeletionGracePeriodSeconds = ev.DeleteOptions.GracePeriodSeconds
			return true, ev, tracker.Update(podsGVR, p, p.Namespace)
		}
		return false, nil, nil
	})
	ctl, err := NewController(Config{}, cl.client, cl.dyn, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl.ctl = ctl
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := ctl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return cl
}

// within waits for cond with a deadline (no fixed sleeps).
func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// synced waits until the pod cache agrees with the fake API server.
func (cl *cluster) synced() {
	cl.t.Helper()
	within(cl.t, "pod cache", func() bool {
		l, err := cl.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		// The fake tracker keeps no resource versions: compare whole pods.
		want := map[string]*corev1.Pod{}
		for i := range l.Items {
			want[podKey(&l.Items[i])] = &l.Items[i]
		}
		have := cl.ctl.pods.GetStore().List()
		if len(have) != len(want) {
			return false
		}
		for _, o := range have {
			p := o.(*corev1.Pod)
			if w := want[podKey(p)]; w == nil || !apiequality.Semantic.DeepEqual(w, p) {
				return false
			}
		}
		return true
	})
}

// cycle runs one cycle on a synced cache.
func (cl *cluster) cycle() CycleReport {
	cl.t.Helper()
	cl.synced()
	r := cl.ctl.Cycle(context.Background())
	if r.Err != nil {
		cl.t.Fatal(r.Err)
	}
	for _, err := range r.Result.Errors {
		cl.t.Errorf("apply: %v", err)
	}
	return r
}

func (cl *cluster) pod(ns, name string) *corev1.Pod {
	cl.t.Helper()
	p, err := cl.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		cl.t.Fatal(err)
	}
	return p
}

func scheduledCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func (cl *cluster) events(ns string) []corev1.Event {
	cl.t.Helper()
	// Events are recorded in the background: wait until every Event posted
	// so far reached the API server.
	within(cl.t, "events recorded", func() bool { return cl.ctl.applier.Events.Pending() == 0 })
	l, err := cl.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		cl.t.Fatal(err)
	}
	return l.Items
}

func objs[T runtime.Object](l ...T) []runtime.Object {
	out := make([]runtime.Object, len(l))
	for i, o := range l {
		out[i] = o
	}
	return out
}

func TestClusterGangBindsWholeInOneBlock(t *testing.T) {
	core := objs(gpuNode("a1", 4, "A"), gpuNode("a2", 4, "A"), gpuNode("b1", 4, "B"), gpuNode("b2", 2, "B"))
	core = append(core, namespace("a", nil))
	fits, tooBig := gang("a", "fits", 4, 2), gang("a", "toobig", 4, 4)
	core = append(append(core, objs(fits...)...), objs(tooBig...)...)
	cl := newCluster(t, core, []runtime.Object{tenantObj("a", "16", ""), podGroupObj("a", "fits", 4), podGroupObj("a", "toobig", 4)})
	r := cl.cycle()
	if r.Result.Bound != 4 {
		t.Fatalf("bound %d pods, want the 4 of gang fits", r.Result.Bound)
	}
	for _, p := range fits {
		got := cl.pod("a", p.Name)
		if got.Spec.NodeName != "a1" && got.Spec.NodeName != "a2" {
			t.Errorf("%s on %q, want block A", p.Name, got.Spec.NodeName)
		}
		if got.Annotations[AnnotationGPUIndices] == "" {
			t.Errorf("%s: no %s annotation", p.Name, AnnotationGPUIndices)
		}
	}
	for _, p := range tooBig {
		got := cl.pod("a", p.Name)
		c := scheduledCondition(got)
		if got.Spec.NodeName != "" || c == nil || c.Status != corev1.ConditionFalse || c.Message == "" {
			t.Errorf("%s: node %q condition %+v, want unbound with a reason", p.Name, got.Spec.NodeName, c)
		}
	}
	// The next cycle sees the binding and binds nothing twice.
	if r := cl.cycle(); r.Result.Bound != 0 {
		t.Errorf("second cycle bound %d", r.Result.Bound)
	}
}

func TestClusterQuotaCondition(t *testing.T) {
	core := objs(gpuNode("n1", 8, "A"))
	core = append(core, namespace("a", nil), gpuPod("a", "big", 4, nil))
	cl := newCluster(t, core, []runtime.Object{tenantObj("a", "0", "2")})
	cl.cycle()
	p := cl.pod("a", "big")
	c := scheduledCondition(p)
	if p.Spec.NodeName != "" || c == nil || c.Status != corev1.ConditionFalse || c.Reason != "QuotaLimit" || !strings.Contains(c.Message, "limit") {
		t.Fatalf("condition %+v, want PodScheduled=False QuotaLimit", c)
	}
	found := false
	for _, e := range cl.events("a") {
		found = found || e.InvolvedObject.Name == "big" && e.Reason == "QuotaLimit" && e.Message == c.Message
	}
	if !found {
		t.Errorf("no QuotaLimit event: %+v", cl.events("a"))
	}
	// Unchanged reason: no new condition write, no new event.
	n := len(cl.events("a"))
	if r := cl.cycle(); r.Result.Conditions != 0 || len(cl.events("a")) != n {
		t.Errorf("second cycle rewrote the condition (%d) or evented again", r.Result.Conditions)
	}
}

func TestClusterBadAnnotationIsAReason(t *testing.T) {
	core := objs(gpuNode("n1", 8, "A"))
	core = append(core, namespace("a", nil), gpuPod("a", "bad", 1, map[string]string{AnnotationMilliGPU: "lots"}))
	cl := newCluster(t, core, []runtime.Object{tenantObj("a", "8", "")})
	cl.cycle()
	c := scheduledCondition(cl.pod("a", "bad"))
	if c == nil || c.Reason != "Invalid" || !strings.Contains(c.Message, AnnotationMilliGPU) {
		t.Fatalf("condition %+v, want Invalid naming %s", c, AnnotationMilliGPU)
	}
}

// borrowerSetup: tenant owner guarantees 8 H100s and runs nothing; tenant
// borrower runs a preemptible 8-GPU pod on the only node; owner's pod
// comes.
func borrowerSetup(t *testing.T, victimLabels map[string]string) *cluster {
	victim := gpuPod("borrower", "victim", 8, map[string]string{AnnotationPreemptible: "true", AnnotationGPUIndices: "0,1,2,3,4,5,6,7"})
	victim.Spec.NodeName = "n1"
	victim.Status.Phase = corev1.PodRunning
	for k, v := range victimLabels {
		victim.Labels[k] = v
	}
	grace := int64(30)
	victim.Spec.TerminationGracePeriodSeconds = &grace
	core := objs(gpuNode("n1", 8, "A"))
	core = append(core, namespace("owner", nil), namespace("borrower", nil), victim, gpuPod("owner", "claimant", 8, nil))
	return newCluster(t, core, []runtime.Object{tenantObj("owner", "8", ""), tenantObj("borrower", "0", "")})
}

func TestClusterPreemptionBindsAfterVictimsGone(t *testing.T) {
	cl := borrowerSetup(t, nil)
	r := cl.cycle()
	if r.Result.Evicted != 1 || r.Result.Bound != 0 {
		t.Fatalf("cycle 1: %+v, want 1 eviction and no binding", r.Result)
	}
	var evict *policyv1.Eviction
	for _, a := range cl.client.Actions() {
		if ca, ok := a.(k8stesting.CreateAction); ok && ca.GetSubresource() == "eviction" {
			evict = ca.GetObject().(*policyv1.Eviction)
		}
	}
	if evict == nil || evict.Name != "victim" || evict.DeleteOptions.GracePeriodSeconds == nil || *evict.DeleteOptions.GracePeriodSeconds != 30 {
		t.Fatalf("eviction %+v, want victim with its 30 s grace period", evict)
	}
	if c := scheduledCondition(cl.pod("owner", "claimant")); c == nil || c.Reason != ReasonPreempting {
		t.Errorf("claimant condition %+v, want %s", c, ReasonPreempting)
	}
	// Terminating: still holding the GPUs; not evicted again, claimant waits.
	r = cl.cycle()
	if r.Result.Bound != 0 || r.Result.Evicted != 0 {
		t.Fatalf("cycle 2 (victim terminating): %+v", r.Result)
	}
	if err := cl.client.CoreV1().Pods("borrower").Delete(context.Background(), "victim", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r = cl.cycle()
	if r.Result.Bound != 1 || cl.pod("owner", "claimant").Spec.NodeName != "n1" {
		t.Fatalf("cycle 3 (victim gone): %+v, claimant on %q", r.Result, cl.pod("owner", "claimant").Spec.NodeName)
	}
}

func TestClusterPDBRefusesEviction(t *testing.T) {
	cl := borrowerSetup(t, map[string]string{"pdb": "block"})
	r := cl.cycle()
	if r.Result.EvictionsRefused != 1 || r.Result.Evicted != 0 || r.Result.Bound != 0 {
		t.Fatalf("%+v, want the eviction refused and nothing bound", r.Result)
	}
	refused := false
	for _, e := range cl.events("borrower") {
		refused = refused || e.Reason == "EvictionRefused"
	}
	if !refused {
		t.Error("no EvictionRefused event")
	}
	if p := cl.pod("owner", "claimant"); p.Spec.NodeName != "" {
		t.Errorf("claimant bound to %s while the victim runs", p.Spec.NodeName)
	}
}

func TestClusterReservationHoldsItsNodes(t *testing.T) {
	core := objs(gpuNode("n1", 8, "A"), gpuNode("n2", 8, "A"))
	core = append(core, namespace("other", nil), gpuPod("other", "p1", 8, nil), gpuPod("other", "p2", 8, nil))
	cl := newCluster(t, core, []runtime.Object{tenantObj("res", "0", ""), tenantObj("other", "0", ""), reservationObj("hold", "res", 1)})
	r := cl.cycle()
	if r.Result.Bound != 1 {
		t.Fatalf("bound %d, want 1 (the other node is reserved)", r.Result.Bound)
	}
	u, err := cl.dyn.Resource(ReservationGVR).Get(context.Background(), "hold", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, _, _ := unstructured.NestedStringSlice(u.Object, "status", "nodes")
	if len(nodes) != 1 {
		t.Fatalf("reservation status %+v", u.Object["status"])
	}
	for _, name := range []string{"p1", "p2"} {
		if p := cl.pod("other", name); p.Spec.NodeName == nodes[0] {
			t.Errorf("%s bound to reserved node %s", name, nodes[0])
		}
	}
}

func TestClusterTenantStatus(t *testing.T) {
	core := objs(gpuNode("n1", 8, "A"))
	core = append(core, namespace("a", nil), gpuPod("a", "p", 6, nil))
	cl := newCluster(t, core, []runtime.Object{tenantObj("a", "4", "")})
	cl.cycle() // binds
	cl.synced()
	cl.cycle() // sees it running
	u, err := cl.dyn.Resource(TenantGVR).Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := u.Object["status"].(map[string]any)
	if st["guaranteed"] != "4" || st["used"] != "6" || st["borrowed"] != "2" {
		t.Fatalf("status %+v, want guaranteed 4 used 6 borrowed 2", st)
	}
}
