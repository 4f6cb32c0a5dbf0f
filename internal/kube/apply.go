package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Reason codes Arbiter writes besides the core's.
const (
	// ReasonPreempting: the pod's place is being freed; it is bound once
	// the victims are gone.
	ReasonPreempting = "Preempting"
	// maxMessage bounds a condition or event message.
	maxMessage = 1024
)

// Applier carries a plan out through the API.
type Applier struct {
	Client        kubernetes.Interface
	SchedulerName string
	Log           *slog.Logger
	Assumed       *Assumed
	Now           func() time.Time
	// Events, when set, records Events in the background; without it
	// they are recorded inline.
	Events *EventSink
	// Workers is how many API calls are in flight at once (0:
	// DefaultWorkers).
	Workers int
}

func (a *Applier) workers() int {
	if a.Workers > 0 {
		return a.Workers
	}
	return DefaultWorkers
}

// Result counts what one Apply did.
type Result struct {
	Bound, Evicted, EvictionsRefused, Waiting, Conditions int
	Errors                                                []error
}

// Apply binds the placements whose victims are gone, evicts the
// preemptions' victims, and writes why-pending.
func (a *Applier) Apply(ctx context.Context, c *Cycle, plan *sched.Plan) Result {
	var res Result
	waiting := map[workload.ID]int{}
	for _, pl := range plan.Placements {
		if pl.AfterPreemption {
			waiting[pl.Workload]++
		}
	}
	for _, p := range plan.Preemptions {
		a.evict(ctx, c, p, &res)
	}
	done := map[workload.ID]bool{}
	var binds []bindJob
	var conds []condJob
	for _, pl := range plan.Placements {
		if done[pl.Workload] {
			continue
		}
		done[pl.Workload] = true
		g := c.Groups[pl.Workload]
		if g == nil {
			continue
		}
		if waiting[pl.Workload] > 0 {
			res.Waiting++
			for _, p := range g.Pods {
				conds = append(conds, condJob{p, ReasonPreempting, "waiting for preempted pods to exit before binding"})
			}
			continue
		}
		binds = a.bindJobs(g, plan.Placements, binds)
	}
	a.bindAll(ctx, binds, &res)
	for _, p := range plan.Pending {
		g := c.Groups[p.Workload]
		if g == nil {
			continue
		}
		for _, pod := range g.Pods {
			if pod.Spec.NodeName == "" {
				conds = append(conds, condJob{pod, string(p.Code), p.Reason})
			}
		}
	}
	for _, p := range c.Problems {
		conds = append(conds, condJob{p.Pod, p.Code, p.Msg})
	}
	a.conditionAll(ctx, conds, &res)
	return res
}

// condJob is one pod's pending condition to write.
type condJob struct {
	pod       *corev1.Pod
	code, msg string
}

// conditionAll writes the conditions that changed, Workers at a time.
func (a *Applier) conditionAll(ctx context.Context, jobs []condJob, res *Result) {
	var mu sync.Mutex
	inParallel(a.workers(), jobs, func(j condJob) {
		var r Result
		a.condition(ctx, j.pod, j.code, j.msg, &r)
		mu.Lock()
		res.Conditions += r.Conditions
		res.Errors = append(res.Errors, r.Errors...)
		mu.Unlock()
	})
}

// inParallel calls f on every job, at most workers at a time, and returns
// when all are done.
func inParallel[J any](workers int, jobs []J, f func(J)) {
	var wg sync.WaitGroup
	next := make(chan J)
	for w := 0; w < min(workers, len(jobs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				f(j)
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
}

// ConditionRefresh is how often a pending pod's condition is rewritten
// when only its message's details changed (a count, a free amount): a
// new reason is written at once, with an Event.
const ConditionRefresh = time.Minute

// bindJob is one pod to bind where a placement put it.
type bindJob struct {
	pod *corev1.Pod
	pl  sched.Placement
}

// bindJobs appends one job per replica of one workload's placements.
func (a *Applier) bindJobs(g *Group, pls []sched.Placement, out []bindJob) []bindJob {
	for _, pl := range pls {
		if pl.Workload != g.ID || pl.Replica < 0 || pl.Replica >= len(g.Pods) {
			continue
		}
		if pod := g.Pods[pl.Replica]; pod.Spec.NodeName == "" {
			out = append(out, bindJob{pod, pl})
		}
	}
	return out
}

// bindAll binds the jobs, Workers at a time (the API server answers each
// in a round trip; one at a time would bound a cycle to a few dozen pods a
// second).
func (a *Applier) bindAll(ctx context.Context, jobs []bindJob, res *Result) {
	var mu sync.Mutex
	inParallel(a.workers(), jobs, func(j bindJob) {
		err := a.bind(ctx, j.pod, j.pl)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			res.Errors = append(res.Errors, err)
		} else {
			res.Bound++
		}
	})
}

// bind binds one pod through pods/binding, with the GPU indices chosen in
// its annotations, and remembers the binding until the cache shows it.
func (a *Applier) bind(ctx context.Context, pod *corev1.Pod, pl sched.Placement) error {
	ann := map[string]string{AnnotationGPUIndices: FormatGPUIndices(pl.GPUs)}
	if pl.Milli > 0 && pl.Milli < resource.PerGPU {
		ann[AnnotationMilliGranted] = fmt.Sprint(pl.Milli)
	}
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: ann},
		Target:     corev1.ObjectReference{Kind: "Node", Name: string(pl.Node)},
	}
	if err := a.Client.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bind %s/%s to %s: %w", pod.Namespace, pod.Name, pl.Node, err)
	}
	if a.Assumed != nil {
		a.Assumed.Add(pod.UID, string(pl.Node), ann, a.now())
	}
	a.event(ctx, pod, corev1.EventTypeNormal, "Scheduled", fmt.Sprintf("Arbiter bound %s/%s to %s (GPUs %s)", pod.Namespace, pod.Name, pl.Node, ann[AnnotationGPUIndices]))
	return nil
}

// evict asks the Eviction API to evict a preemption's victims with their
// own grace period; the API enforces PodDisruptionBudgets (429: not now).
// The victims are a claimant's, or a policy's (a cap or a migration in
// force); those on a failed node are left to Kubernetes' node lifecycle.
func (a *Applier) evict(ctx context.Context, c *Cycle, p sched.Preemption, res *Result) {
	g := c.Groups[p.Workload]
	if g == nil || onDownNode(c, g) {
		return
	}
	by := string(p.By)
	if by == "" {
		by = "a policy" // a cap or a migration in force
	}
	for _, pod := range g.Pods {
		if pod.DeletionTimestamp != nil || pod.Spec.SchedulerName != a.SchedulerName {
			continue
		}
		uid := pod.UID
		ev := &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: pod.Spec.TerminationGracePeriodSeconds, Preconditions: &metav1.Preconditions{UID: &uid}},
		}
		err := a.Client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, ev)
		switch {
		case err == nil:
			res.Evicted++
			a.event(ctx, pod, corev1.EventTypeWarning, "Preempted", fmt.Sprintf("evicted by Arbiter for %s: %s", by, p.Reason))
		case apierrors.IsTooManyRequests(err):
			res.EvictionsRefused++
			a.event(ctx, pod, corev1.EventTypeWarning, "EvictionRefused", fmt.Sprintf("Arbiter's eviction for %s refused (PodDisruptionBudget): %v", by, err))
		case apierrors.IsNotFound(err):
		default:
			res.Errors = append(res.Errors, fmt.Errorf("evict %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
}

// condition sets the pod's PodScheduled=False condition to Arbiter's code
// and message, with an Event, when it changed.
func (a *Applier) condition(ctx context.Context, pod *corev1.Pod, code, msg string, res *Result) {
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	sameReason := false
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || c.Reason != code {
			continue
		}
		if c.Message == msg || a.now().Sub(c.LastTransitionTime.Time) < ConditionRefresh {
			return
		}
		sameReason = true
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: code, Message: msg,
		LastTransitionTime: metav1.NewTime(a.now()),
	}}}})
	if _, err := a.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		if !apierrors.IsNotFound(err) {
			res.Errors = append(res.Errors, fmt.Errorf("condition of %s/%s: %w", pod.Namespace, pod.Name, err))
		}
		return
	}
	res.Conditions++
	if !sameReason {
		a.event(ctx, pod, corev1.EventTypeWarning, code, msg)
	}
}

// event records an Event about a pod (best effort).
func (a *Applier) event(ctx context.Context, pod *corev1.Pod, typ, reason, msg string) {
	a.record(ctx, corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, typ, reason, msg)
}

// objectEvent records an Event about a custom resource; those of
// cluster-scoped ones go to the default namespace, as kubectl describe
// looks for them.
func (a *Applier) objectEvent(ctx context.Context, u *unstructured.Unstructured, typ, reason, msg string) {
	a.record(ctx, corev1.ObjectReference{Kind: u.GetKind(), APIVersion: u.GetAPIVersion(), Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID()}, typ, reason, msg)
}

// record records an Event about obj (best effort).
func (a *Applier) record(ctx context.Context, obj corev1.ObjectReference, typ, reason, msg string) {
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	ns := obj.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := metav1.NewTime(a.now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: obj.Name + ".", Namespace: ns},
		InvolvedObject: obj,
		Reason:         reason, Message: msg, Type: typ, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source:              corev1.EventSource{Component: a.SchedulerName},
		ReportingController: "arbiter.dev/" + a.SchedulerName,
	}
	if a.Events != nil {
		a.Events.Post(ev)
		return
	}
	if _, err := a.Client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil && a.Log != nil {
		a.Log.Debug("event not recorded", "object", obj.Kind+" "+obj.Namespace+"/"+obj.Name, "err", err)
	}
}

func (a *Applier) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Assumed remembers the bindings Arbiter made until the pod cache shows
// them, so that a lagging cache never makes a cycle place two pods on the
// same GPUs (as kube-scheduler's assume cache).
type Assumed struct {
	mu  sync.Mutex
	ttl time.Duration
	m   map[types.UID]assumption
}

type assumption struct {
	node  string
	ann   map[string]string
	until time.Time
}

// NewAssumed makes an assume cache whose entries expire after ttl.
func NewAssumed(ttl time.Duration) *Assumed {
	return &Assumed{ttl: ttl, m: map[types.UID]assumption{}}
}

// Add assumes pod uid is bound to node with the annotations.
func (a *Assumed) Add(uid types.UID, node string, ann map[string]string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.m[uid] = assumption{node: node, ann: ann, until: now.Add(a.ttl)}
}

// Overlay returns pods with the assumed bindings applied (copies of the
// pods concerned), forgetting assumptions the cache shows or that expired.
func (a *Assumed) Overlay(pods []*corev1.Pod, now time.Time) []*corev1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.m) == 0 {
		return pods
	}
	seen := map[types.UID]bool{}
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p
		as, ok := a.m[p.UID]
		if !ok {
			continue
		}
		seen[p.UID] = true
		if p.Spec.NodeName != "" || now.After(as.until) {
			delete(a.m, p.UID)
			continue
		}
		c := p.DeepCopy()
		c.Spec.NodeName = as.node
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		for k, v := range as.ann {
			c.Annotations[k] = v
		}
		out[i] = c
	}
	for uid := range a.m {
		if !seen[uid] {
			delete(a.m, uid) // the pod is gone
		}
	}
	return out
}

// onDownNode reports whether any of a group's pods is on a node
// Kubernetes shows down (cordoned or NotReady; not one a policy drains).
func onDownNode(c *Cycle, g *Group) bool {
	for _, pod := range g.Pods {
		if slices.Contains(c.NodesDown, fleet.NodeID(pod.Spec.NodeName)) {
			return true
		}
	}
	return false
}
