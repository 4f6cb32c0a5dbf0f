package kube

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/arbiterhq/arbiter/internal/kubetest"
)

// e2e is a real kube-apiserver with Arbiter's CRDs and the PodGroup CRD.
type e2e struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	dyn    dynamic.Interface
	bound  atomic.Int64 // bindings made, all replicas
	// onCycle, when set, sees every cycle's report (the perf test logs them).
	onCycle func(CycleReport)
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func startE2E(t *testing.T) *e2e {
	t.Helper()
	s := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &e2e{t: t, ctx: ctx, client: s.Client(t)}
	var err error
	if e.dyn, err = dynamic.NewForConfig(s.Config()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"../../deploy/crds/arbitertenants.yaml", "../../deploy/crds/arbiterreservations.yaml", "../../deploy/crds/arbiterpolicies.yaml", "testdata/podgroup-crd.yaml"} {
		e.apply(crdGVR, "", f)
	}
	for _, gvr := range []schema.GroupVersionResource{TenantGVR, ReservationGVR, PolicyGVR, PodGroupGVR} {
		e.within("CRD "+gvr.Resource+" served", func() bool { return served(e.client, gvr) })
	}
	return e
}

// apply creates the object of a YAML file.
func (e *e2e) apply(gvr schema.GroupVersionResource, ns, file string) {
	e.t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		e.t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		e.t.Fatal(err)
	}
	e.create(gvr, ns, &unstructured.Unstructured{Object: obj})
}

func (e *e2e) create(gvr schema.GroupVersionResource, ns string, u *unstructured.Unstructured) {
	e.t.Helper()
	var err error
	if ns == "" {
		_, err = e.dyn.Resource(gvr).Create(e.ctx, u, metav1.CreateOptions{})
	} else {
		_, err = e.dyn.Resource(gvr).Namespace(ns).Create(e.ctx, u, metav1.CreateOptions{})
	}
	if err != nil {
		e.t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
}

func (e *e2e) within(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// node creates a Ready GPU node (status written as a kubelet would).
func (e *e2e) node(name string, gpus int, block string) {
	e.t.Helper()
	n := gpuNode(name, gpus, block)
	st := n.Status
	c, err := e.client.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	c.Status = st
	c.Status.Capacity = st.Allocatable
	if _, err := e.client.CoreV1().Nodes().UpdateStatus(e.ctx, c, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *e2e) namespace(name string) {
	e.t.Helper()
	if _, err := e.client.CoreV1().Namespaces().Create(e.ctx, namespace(name, nil), metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *e2e) pod(p *corev1.Pod) {
	e.t.Helper()
	p.UID, p.CreationTimestamp = "", metav1.Time{}
	p.Spec.Containers[0].Image = "registry.k8s.io/pause:3.10"
	if _, err := e.client.CoreV1().Pods(p.Namespace).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *e2e) get(ns, name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.client.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// run starts an arbiter kube replica (Lease arbiter-system/arbiter-kube);
// cycles counts its cycles; led is set when it leads.
func (e *e2e) run(id string) (cycles *atomic.Int64, led *atomic.Bool, stop context.CancelFunc) {
	e.t.Helper()
	cycles, led = &atomic.Int64{}, &atomic.Bool{}
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = RunLeader(ctx, e.client, Lease{Name: "arbiter-kube", Namespace: "default", Identity: id,
			Duration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}, nil,
			func(ctx context.Context) {
				led.Store(true)
				c, err := NewController(Config{Interval: 100 * time.Millisecond}, e.client, e.dyn, nil)
				if err != nil {
					e.t.Error(err)
					return
				}
				c.OnCycle = func(r CycleReport) {
					cycles.Add(1)
					e.bound.Add(int64(r.Result.Bound))
					if e.onCycle != nil {
						e.onCycle(r)
					}
					for _, err := range r.Result.Errors {
						if ctx.Err() == nil { // not the shutdown's cancelled calls
							e.t.Errorf("replica %s: %v", id, err)
						}
					}
				}
				_ = c.Run(ctx)
			})
	}()
	stop = func() { cancel(); wg.Wait() }
	e.t.Cleanup(stop)
	return cycles, led, stop
}

// cyclesPass waits for n more cycles of a replica (state settles with
// cycles, not with time).
func (e *e2e) cyclesPass(c *atomic.Int64, n int64) {
	e.t.Helper()
	want := c.Load() + n
	e.within("cycles", func() bool { return c.Load() >= want })
}

func TestE2EGangBindsWholeInOneBlock(t *testing.T) {
	e := startE2E(t)
	e.node("a1", 4, "A")
	e.node("a2", 4, "A")
	e.node("b1", 4, "B")
	e.node("b2", 2, "B")
	e.namespace("a")
	e.create(TenantGVR, "", tenantObj("a", "16", "", "a"))
	e.create(PodGroupGVR, "a", podGroupObj("a", "fits", 4))
	e.create(PodGroupGVR, "a", podGroupObj("a", "toobig", 4))
	cycles, _, _ := e.run("r1")
	fits, tooBig := gang("a", "fits", 4, 2), gang("a", "toobig", 4, 4)
	for _, p := range append(fits, tooBig...) {
		e.pod(p)
	}
	e.within("gang fits bound", func() bool {
		for _, p := range fits {
			if e.get("a", p.Name).Spec.NodeName == "" {
				return false
			}
		}
		return true
	})
	for _, p := range fits {
		if n := e.get("a", p.Name).Spec.NodeName; n != "a1" && n != "a2" {
			t.Errorf("%s on %s, want block A", p.Name, n)
		}
	}
	e.within("toobig's reason", func() bool {
		c := scheduledCondition(e.get("a", tooBig[3].Name))
		return c != nil && c.Status == corev1.ConditionFalse && c.Message != ""
	})
	e.cyclesPass(cycles, 3)
	for _, p := range tooBig {
		if n := e.get("a", p.Name).Spec.NodeName; n != "" {
			t.Errorf("%s of the gang that fits no block bound to %s", p.Name, n)
		}
	}
}

func TestE2EPreemptionEvictsBorrowerThenBinds(t *testing.T) {
	e := startE2E(t)
	e.node("n1", 8, "A")
	e.namespace("owner")
	e.namespace("borrower")
	e.create(TenantGVR, "", tenantObj("owner", "8", "", "owner"))
	e.create(TenantGVR, "", tenantObj("borrower", "0", "", "borrower"))
	cycles, _, _ := e.run("r1")
	victim := gpuPod("borrower", "victim", 8, map[string]string{AnnotationPreemptible: "true"})
	grace := int64(30)
	victim.Spec.TerminationGracePeriodSeconds = &grace
	e.pod(victim)
	e.within("borrower bound", func() bool { return e.get("borrower", "victim").Spec.NodeName == "n1" })
	v := e.get("borrower", "victim")
	v.Status.Phase = corev1.PodRunning // the kubelet's part
	if _, err := e.client.CoreV1().Pods("borrower").UpdateStatus(e.ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.pod(gpuPod("owner", "claimant", 8, map[string]string{AnnotationPriority: "high"}))
	e.within("victim evicted (deletionTimestamp)", func() bool { return e.get("borrower", "victim").DeletionTimestamp != nil })
	if g := e.get("borrower", "victim").DeletionGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("eviction grace %v, want the victim's 30 s", g)
	}
	e.cyclesPass(cycles, 3)
	if n := e.get("owner", "claimant").Spec.NodeName; n != "" {
		t.Fatalf("claimant bound to %s while its victim terminates", n)
	}
	zero := int64(0)
	if err := e.client.CoreV1().Pods("borrower").Delete(e.ctx, "victim", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	e.within("claimant bound after the victim is gone", func() bool { return e.get("owner", "claimant").Spec.NodeName == "n1" })
}

func TestE2EQuotaCondition(t *testing.T) {
	e := startE2E(t)
	e.node("n1", 8, "A")
	e.namespace("a")
	e.create(TenantGVR, "", tenantObj("a", "0", "2", "a"))
	e.run("r1")
	e.pod(gpuPod("a", "big", 4, nil))
	e.within("QuotaLimit condition", func() bool {
		c := scheduledCondition(e.get("a", "big"))
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == "QuotaLimit" && strings.Contains(c.Message, "limit")
	})
	e.within("QuotaLimit event", func() bool {
		l, err := e.client.CoreV1().Events("a").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, ev := range l.Items {
			if ev.InvolvedObject.Name == "big" && ev.Reason == "QuotaLimit" {
				return true
			}
		}
		return false
	})
	e.within("tenant status", func() bool {
		u, err := e.dyn.Resource(TenantGVR).Get(e.ctx, "a", metav1.GetOptions{})
		st, _ := u.Object["status"].(map[string]any)
		return err == nil && st["used"] == "0" && st["pending"] == int64(1)
	})
}

func TestE2EReservationHoldsItsNodes(t *testing.T) {
	e := startE2E(t)
	e.node("n1", 8, "A")
	e.node("n2", 8, "A")
	e.namespace("other")
	e.create(TenantGVR, "", tenantObj("res", "0", ""))
	e.create(TenantGVR, "", tenantObj("other", "0", "", "other"))
	e.create(ReservationGVR, "", reservationObj("hold", "res", 1))
	cycles, _, _ := e.run("r1")
	var held []string
	e.within("reservation bound", func() bool {
		u, err := e.dyn.Resource(ReservationGVR).Get(e.ctx, "hold", metav1.GetOptions{})
		if err != nil {
			return false
		}
		held, _, _ = unstructured.NestedStringSlice(u.Object, "status", "nodes")
		return len(held) == 1
	})
	e.pod(gpuPod("other", "p1", 8, nil))
	e.pod(gpuPod("other", "p2", 8, nil))
	e.within("one pod bound", func() bool {
		return e.get("other", "p1").Spec.NodeName != "" || e.get("other", "p2").Spec.NodeName != ""
	})
	e.cyclesPass(cycles, 3)
	bound := 0
	for _, name := range []string{"p1", "p2"} {
		if n := e.get("other", name).Spec.NodeName; n != "" {
			bound++
			if n == held[0] {
				t.Errorf("%s bound to the reserved node %s", name, n)
			}
		}
	}
	if bound != 1 {
		t.Errorf("%d pods bound, want 1 (the other node is held)", bound)
	}
}

func TestE2ETwoReplicasOneLeader(t *testing.T) {
	e := startE2E(t)
	e.node("n1", 8, "A")
	e.node("n2", 8, "A")
	e.namespace("a")
	e.create(TenantGVR, "", tenantObj("a", "16", "", "a"))
	c1, led1, stop1 := e.run("r1")
	c2, led2, _ := e.run("r2")
	e.within("a leader", func() bool { return led1.Load() || led2.Load() })
	for i := 0; i < 16; i++ {
		e.pod(gpuPod("a", "p"+string(rune('a'+i)), 1, nil))
	}
	e.within("16 pods bound", func() bool {
		l, err := e.client.CoreV1().Pods("a").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		n := 0
		for _, p := range l.Items {
			if p.Spec.NodeName != "" {
				n++
			}
		}
		return n == 16
	})
	if led1.Load() == led2.Load() {
		t.Fatalf("leaders: r1 %v r2 %v, want exactly one", led1.Load(), led2.Load())
	}
	// Every pod bound once: 16 bindings, none more in later cycles of
	// either replica.
	e.within("16 bindings reported", func() bool { return e.bound.Load() >= 16 })
	if led1.Load() {
		e.cyclesPass(c1, 3)
	} else {
		e.cyclesPass(c2, 3)
	}
	if b := e.bound.Load(); b != 16 {
		t.Errorf("%d bindings made for 16 pods", b)
	}
	lease, err := e.client.CoordinationV1().Leases("default").Get(e.ctx, "arbiter-kube", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("lease %v %v", lease, err)
	}
	if led1.Load() && *lease.Spec.HolderIdentity != "r1" || led2.Load() && *lease.Spec.HolderIdentity != "r2" {
		t.Errorf("lease held by %s", *lease.Spec.HolderIdentity)
	}
	// The leader goes; the other takes over.
	if led1.Load() {
		stop1()
		e.within("r2 leads", led2.Load)
	}
}
