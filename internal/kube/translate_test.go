package kube

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

func TestTranslateNode(t *testing.T) {
	cases := []struct {
		name     string
		edit     func(n *corev1.Node)
		wantNil  bool
		wantErr  string
		wantDown bool
		check    func(t *testing.T, n *fleet.Node)
	}{
		{name: "H100 node", check: func(t *testing.T, n *fleet.Node) {
			if n.Model != "H100-80G" || n.GPUs != 8 || n.Region != "eastus" || n.Zone != "eastus-1" || n.Block != "b1" {
				t.Errorf("got %+v", n)
			}
		}},
		{name: "no GPUs is not Arbiter's", edit: func(n *corev1.Node) { delete(n.Status.Allocatable, ResourceGPU) }, wantNil: true},
		{name: "absurd GPU count", edit: func(n *corev1.Node) {
			n.Status.Allocatable[ResourceGPU] = *resource.NewQuantity(1<<40, resource.DecimalSI)
		}, wantErr: "at most 64"},
		{name: "negative GPU count", edit: func(n *corev1.Node) {
			n.Status.Allocatable[ResourceGPU] = *resource.NewQuantity(-3, resource.DecimalSI)
		}, wantErr: "whole number"},
		{name: "fractional GPU count", edit: func(n *corev1.Node) { n.Status.Allocatable[ResourceGPU] = resource.MustParse("1500m") }, wantErr: "whole number"},
		{name: "unknown product", edit: func(n *corev1.Node) { n.Labels[LabelGPUProduct] = "Voodoo-5" }, wantErr: "--gpu-model-map"},
		{name: "cordoned is down", edit: func(n *corev1.Node) { n.Spec.Unschedulable = true }, wantDown: true},
		{name: "NotReady is down", edit: func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, wantDown: true},
		{name: "no Ready condition is down", edit: func(n *corev1.Node) { n.Status.Conditions = nil }, wantDown: true},
		{name: "no labels: default region, own block", edit: func(n *corev1.Node) {
			delete(n.Labels, LabelRegion)
			delete(n.Labels, "arbiter.dev/block")
		}, check: func(t *testing.T, n *fleet.Node) {
			if n.Region != DefaultRegion || n.Block != "node:n1" {
				t.Errorf("region %q block %q", n.Region, n.Block)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := gpuNode("n1", 8, "b1")
			if c.edit != nil {
				c.edit(n)
			}
			fn, down, err := translateNode(n, testConfig())
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.Is(err, ErrNode) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.wantNil != (fn == nil) {
				t.Fatalf("node = %+v, want nil %v", fn, c.wantNil)
			}
			if down != c.wantDown {
				t.Errorf("down = %v, want %v", down, c.wantDown)
			}
			if c.check != nil {
				c.check(t, fn)
			}
		})
	}
}

func TestModelTable(t *testing.T) {
	cases := []struct {
		product, memory string
		want            fleet.ModelID
	}{
		{"NVIDIA-H100-80GB-HBM3", "81559", "H100-80G"},
		{"NVIDIA-H200", "", "H200-141G"},
		{"NVIDIA-A100-SXM4-80GB", "81920", "A100-80G"},
		{"NVIDIA-A100-SXM4-80GB", "", "A100-80G"},
		{"NVIDIA-A100-SXM4-40GB", "40960", "A100-40G"},
		{"NVIDIA-A10G", "23028", "A10"},
		{"Tesla-T4", "15360", "T4"},
		{"nvidia-h100-pcie", "x", "H100-80G"},
		{"", "", ""},
	}
	tab := DefaultModels()
	for _, c := range cases {
		got, ok := tab.Lookup(c.product, c.memory)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("Lookup(%q, %q) = %q %v, want %q", c.product, c.memory, got, ok, c.want)
		}
	}
	over, err := ParseModelMap("Voodoo-5=T4", fleet.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := over.Lookup("Voodoo-5", ""); got != "T4" {
		t.Errorf("override: %q", got)
	}
	if _, err := ParseModelMap("Voodoo-5=Nope", fleet.Builtin()); err == nil {
		t.Error("unknown model accepted")
	}
}

// translate runs Translate on a snapshot with the standard tenants.
func translate(t *testing.T, s *Snapshot) *Cycle {
	t.Helper()
	c, err := Translate(s, testConfig(), t0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func problemOf(c *Cycle, pod string) *PodProblem {
	for i := range c.Problems {
		if c.Problems[i].Pod.Name == pod {
			return &c.Problems[i]
		}
	}
	return nil
}

func TestTranslatePodHostile(t *testing.T) {
	absurd := gpuPod("a", "absurd", 0, nil)
	absurd.Spec.Containers[0].Resources.Limits[ResourceGPU] = *resource.NewQuantity(1<<50, resource.DecimalSI)
	negative := gpuPod("a", "negative", 0, nil)
	negative.Spec.Containers[0].Resources.Limits[ResourceGPU] = *resource.NewQuantity(-1, resource.DecimalSI)
	cases := []struct {
		pod  *corev1.Pod
		want string // in the message; "" = translated fine
	}{
		{gpuPod("a", "ok", 2, nil), ""},
		{gpuPod("a", "badprio", 1, map[string]string{AnnotationPriority: "urgent!!"}), AnnotationPriority},
		{gpuPod("a", "badpreempt", 1, map[string]string{AnnotationPreemptible: "yes"}), AnnotationPreemptible},
		{gpuPod("a", "badmilli", 0, map[string]string{AnnotationMilliGPU: "1500"}), AnnotationMilliGPU},
		{gpuPod("a", "milliwhole", 4, map[string]string{AnnotationMilliGPU: "250"}), "whole GPUs"},
		{gpuPod("a", "badflavor", 1, map[string]string{AnnotationFlavors: "H100-80G,Voodoo"}), "unknown GPU model"},
		{gpuPod("a", "dupregion", 1, map[string]string{AnnotationRegions: "eastus,eastus"}), "listed twice"},
		{gpuPod("a", "longlist", 1, map[string]string{AnnotationRegions: strings.Repeat("r,", 2000)}), "longer than"},
		{gpuPod("a", "toomany", 100, nil), "gpus"},
		{absurd, "limits[nvidia.com/gpu]"},
		{negative, "whole number"},
		{gpuPod("a", "nogpu", 0, nil), "gpus"},
	}
	s := &Snapshot{Nodes: []*corev1.Node{gpuNode("n1", 8, "b1")}, Namespaces: []*corev1.Namespace{namespace("a", nil)},
		Tenants: []*unstructured.Unstructured{tenantObj("a", "8", "")}}
	for _, c := range cases {
		s.Pods = append(s.Pods, c.pod)
	}
	cy := translate(t, s)
	for _, c := range cases {
		p := problemOf(cy, c.pod.Name)
		if c.want == "" {
			if p != nil {
				t.Errorf("%s: problem %v", c.pod.Name, p.Msg)
			}
			continue
		}
		if p == nil || p.Code != string(sched.ReasonInvalid) || !strings.Contains(p.Msg, c.want) {
			t.Errorf("%s: problem %+v, want Invalid naming %q", c.pod.Name, p, c.want)
		}
	}
}

func TestTranslatePodFields(t *testing.T) {
	p := gpuPod("a", "p", 0, map[string]string{AnnotationMilliGPU: "250", AnnotationPreemptible: "true",
		AnnotationPriority: "low", AnnotationReservation: "r1"})
	g := int64(45)
	p.Spec.TerminationGracePeriodSeconds = &g
	hp := gpuPod("a", "hp", 1, nil)
	hp.Spec.PriorityClassName = "arbiter-high"
	s := &Snapshot{Nodes: []*corev1.Node{gpuNode("n1", 8, "b1")}, Pods: []*corev1.Pod{p, hp},
		Namespaces: []*corev1.Namespace{namespace("a", nil)}, Tenants: []*unstructured.Unstructured{tenantObj("a", "8", "")}}
	cy := translate(t, s)
	ws := map[workload.ID]*workload.Workload{}
	for _, w := range cy.Input.Workloads {
		ws[w.Name] = w
	}
	w := ws["a:p"]
	if w == nil || w.GPUs != 250 || !w.Preemptible || w.Priority != workload.PriorityLow || w.Reservation != "r1" || w.GracePeriod.Seconds() != 45 || w.Tenant != "a" {
		t.Errorf("a/p = %+v", w)
	}
	if w := ws["a:hp"]; w == nil || w.Priority != workload.PriorityHigh || w.Flavors[0] != "H100-80G" || w.Regions[0] != "eastus" {
		t.Errorf("a/hp = %+v", w)
	}
}

func TestTenantOfNamespace(t *testing.T) {
	cfg := testConfig()
	cfg.TenantMapping = map[string]string{"mapped": "t-flag"}
	s := &Snapshot{
		Namespaces: []*corev1.Namespace{namespace("mapped", map[string]string{"arbiter.dev/tenant": "t-label"}),
			namespace("listed", map[string]string{"arbiter.dev/tenant": "t-label"}),
			namespace("labelled", map[string]string{"arbiter.dev/tenant": "t-label"}), namespace("plain", nil)},
		Tenants: []*unstructured.Unstructured{tenantObj("t-spec", "", "", "listed")},
	}
	c, err := Translate(s, cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	_ = c
	tr := &translator{cfg: cfg, cycle: c, groups: map[string]*PodGroup{}}
	if err := tr.tenants(s); err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]string{"mapped": "t-flag", "listed": "t-spec", "labelled": "t-label", "plain": "plain"} {
		if got := tr.tenantOf(ns); got != want {
			t.Errorf("tenantOf(%s) = %q, want %q", ns, got, want)
		}
	}
}

func TestTranslateGangs(t *testing.T) {
	pods := append(gang("a", "g4", 4, 2), gang("a", "short", 2, 1)...)
	pods = append(pods, gang("a", "orphan", 2, 1)...)
	mixed := gang("a", "mixed", 2, 1)
	mixed[1].Spec.Containers[0].Resources.Limits[ResourceGPU] = *resource.NewQuantity(3, resource.DecimalSI)
	pods = append(pods, mixed...)
	s := &Snapshot{Nodes: []*corev1.Node{gpuNode("n1", 8, "b1")}, Pods: pods,
		Namespaces: []*corev1.Namespace{namespace("a", nil)}, Tenants: []*unstructured.Unstructured{tenantObj("a", "8", "")},
		PodGroups: []*unstructured.Unstructured{podGroupObj("a", "g4", 4), podGroupObj("a", "short", 3), podGroupObj("a", "mixed", 2)}}
	cy := translate(t, s)
	g := cy.Groups["a:pg:g4"]
	if g == nil || len(g.Pods) != 4 {
		t.Fatalf("gang g4 = %+v", g)
	}
	for _, w := range cy.Input.Workloads {
		if w.Name == "a:pg:g4" && (w.Replicas != 4 || !w.Gang() || w.GPUs != 2000) {
			t.Errorf("gang workload %+v", w.Spec)
		}
	}
	if p := problemOf(cy, "short-0"); p == nil || p.Code != ReasonWaitingForGang || !strings.Contains(p.Msg, "2 of its minMember 3") {
		t.Errorf("short gang: %+v", p)
	}
	if p := problemOf(cy, "orphan-1"); p == nil || p.Code != ReasonWaitingForGang || !strings.Contains(p.Msg, "not found") {
		t.Errorf("orphan gang: %+v", p)
	}
	if p := problemOf(cy, "mixed-0"); p == nil || p.Code != string(sched.ReasonInvalid) {
		t.Errorf("mixed gang: %+v", p)
	}
}

func TestTranslateRunning(t *testing.T) {
	ours := gpuPod("a", "ours", 2, map[string]string{AnnotationGPUIndices: "4,5"})
	ours.Spec.NodeName = "n1"
	foreign := gpuPod("kube-system", "foreign", 3, nil)
	foreign.Spec.SchedulerName = "default-scheduler"
	foreign.Spec.NodeName = "n1"
	forged := gpuPod("a", "forged", 1, map[string]string{AnnotationGPUIndices: "5"}) // taken by ours
	forged.Spec.NodeName = "n1"
	forged.CreationTimestamp.Time = t0.Add(time.Minute)
	done := gpuPod("a", "done", 8, nil)
	done.Spec.NodeName = "n1"
	done.Status.Phase = corev1.PodSucceeded
	s := &Snapshot{Nodes: []*corev1.Node{gpuNode("n1", 8, "b1")}, Pods: []*corev1.Pod{ours, foreign, forged, done},
		Namespaces: []*corev1.Namespace{namespace("a", nil), namespace("kube-system", nil)}, Tenants: []*unstructured.Unstructured{tenantObj("a", "8", "")}}
	cy := translate(t, s)
	got := map[workload.ID]*workload.Workload{}
	for _, w := range cy.Input.Workloads {
		got[w.Name] = w
	}
	if w := got["a:ours"]; w == nil || w.Running == nil || FormatGPUIndices(w.Running.Replicas[0].GPUs) != "4,5" {
		t.Errorf("ours: %+v", w)
	}
	if w := got["kube-system:foreign"]; w == nil || w.Tenant != UnmanagedTenant || FormatGPUIndices(w.Running.Replicas[0].GPUs) != "1,2,3" {
		t.Errorf("foreign: %+v", w)
	}
	if w := got["a:forged"]; w == nil || FormatGPUIndices(w.Running.Replicas[0].GPUs) != "0" {
		t.Errorf("forged index not reassigned: %+v", w.Running)
	}
	if got["a:done"] != nil {
		t.Error("a finished pod holds GPUs")
	}
	// The core sees no conflict: every GPU is held once.
	plan := sched.Schedule(cy.Input)
	if len(plan.Preemptions) != 0 {
		t.Errorf("preemptions %+v", plan.Preemptions)
	}
}

func TestTranslateBadCRDs(t *testing.T) {
	bad := tenantObj("bad", "lots", "")
	loop1 := tenantObj("x", "", "")
	loop1.Object["spec"].(map[string]any)["parent"] = 7
	badRes := reservationObj("r-bad", "a", 0)
	unknownTenant := reservationObj("r-who", "nobody", 1)
	s := &Snapshot{Nodes: []*corev1.Node{gpuNode("n1", 8, "b1")}, Namespaces: []*corev1.Namespace{namespace("a", nil)},
		Tenants:      []*unstructured.Unstructured{tenantObj("a", "8", ""), bad, loop1},
		Reservations: []*unstructured.Unstructured{badRes, unknownTenant}}
	cy := translate(t, s)
	for name, field := range map[string]string{"bad": "spec.quota[0].guaranteed", "x": "spec.parent"} {
		if err := cy.TenantProblems[name]; err == nil || !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), field) {
			t.Errorf("tenant %s: %v, want field %s", name, err, field)
		}
	}
	for name, field := range map[string]string{"r-bad": "spec.count", "r-who": "spec.tenant"} {
		if err := cy.ReservationProblems[name]; err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("reservation %s: %v, want field %s", name, err, field)
		}
	}
}
