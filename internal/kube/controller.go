package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/arbiterhq/arbiter/internal/sched"
)

// ErrCRDsMissing is returned when the cluster lacks Arbiter's CRDs.
var ErrCRDsMissing = errors.New("kube: Arbiter's CRDs are not installed (kubectl apply -f deploy/crds/)")

// Controller runs Arbiter's cycles against a cluster.
type Controller struct {
	cfg     Config
	client  kubernetes.Interface
	dyn     dynamic.Interface
	log     *slog.Logger
	applier *Applier
	wake    chan struct{}
	memo    *SpecMemo

	nodes, pods, namespaces cache.SharedIndexInformer
	tenants, reservations   cache.SharedIndexInformer
	podGroups               cache.SharedIndexInformer // nil without the PodGroup CRD
	policyInf               cache.SharedIndexInformer // nil without the ArbiterPolicy CRD
	policies                *Policies
	synced                  []cache.InformerSynced
	factory                 informers.SharedInformerFactory
	dfactory                dynamicinformer.DynamicSharedInformerFactory

	// OnCycle, when set, is called after each cycle (tests, metrics).
	OnCycle func(CycleReport)
}

// CycleReport is what one cycle did.
type CycleReport struct {
	Pending, Problems int
	Result            Result
	Took              time.Duration
	Err               error
}

// NewController makes a controller; Run starts it. It checks that the
// CRDs are served and whether the PodGroup CRD is.
func NewController(cfg Config, client kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger) (*Controller, error) {
	cfg.Defaults()
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{cfg: cfg, client: client, dyn: dyn, log: log, wake: make(chan struct{}, 1), memo: NewSpecMemo(), policies: NewPolicies()}
	c.applier = &Applier{Client: client, SchedulerName: cfg.SchedulerName, Log: log, Assumed: NewAssumed(cfg.AssumeTTL), Workers: cfg.Workers}
	if !served(client, TenantGVR) || !served(client, ReservationGVR) {
		return nil, ErrCRDsMissing
	}
	c.factory = informers.NewSharedInformerFactory(client, 0)
	c.nodes = c.factory.Core().V1().Nodes().Informer()
	c.pods = c.factory.Core().V1().Pods().Informer()
	c.namespaces = c.factory.Core().V1().Namespaces().Informer()
	c.dfactory = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	c.tenants = c.dfactory.ForResource(TenantGVR).Informer()
	c.reservations = c.dfactory.ForResource(ReservationGVR).Informer()
	infs := []cache.SharedIndexInformer{c.nodes, c.pods, c.namespaces, c.tenants, c.reservations}
	if served(client, PolicyGVR) {
		c.policyInf = c.dfactory.ForResource(PolicyGVR).Informer()
		infs = append(infs, c.policyInf)
	} else {
		log.Info("ArbiterPolicy CRD not served: no policies run (kubectl apply -f deploy/crds/)")
	}
	if served(client, PodGroupGVR) {
		c.podGroups = c.dfactory.ForResource(PodGroupGVR).Informer()
		infs = append(infs, c.podGroups)
	} else {
		log.Info("PodGroup CRD not served: pods with the pod-group label wait", "group", PodGroupGVR.GroupVersion())
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.poke() },
		UpdateFunc: func(any, any) { c.poke() },
		DeleteFunc: func(any) { c.poke() },
	}
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(h); err != nil {
			return nil, err
		}
		c.synced = append(c.synced, inf.HasSynced)
	}
	return c, nil
}

// served reports whether the API server serves a resource.
func served(client kubernetes.Interface, gvr schema.GroupVersionResource) bool {
	l, err := client.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, r := range l.APIResources {
		if r.Name == gvr.Resource {
			return true
		}
	}
	return false
}

func (c *Controller) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run starts the informers and runs cycles until ctx ends: every
// interval, and soon after any watched object changes.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.Start(ctx); err != nil {
		return err
	}
	c.log.Info("arbiter kube: caches synced; scheduling", "scheduler", c.cfg.SchedulerName)
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		r := c.Cycle(ctx)
		if c.OnCycle != nil {
			c.OnCycle(r)
		}
		if r.Err != nil {
			c.log.Error("cycle", "err", r.Err)
		}
		for _, err := range r.Result.Errors {
			c.log.Warn("apply", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.wake:
		}
	}
}

// Start starts the informers and waits for their caches to sync.
func (c *Controller) Start(ctx context.Context) error {
	c.applier.Events = NewEventSink(ctx, c.client, c.log)
	c.factory.Start(ctx.Done())
	c.dfactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("kube: informer caches did not sync: %w", ctx.Err())
	}
	return nil
}

// Snapshot reads the informer caches.
func (c *Controller) Snapshot() *Snapshot {
	s := &Snapshot{Memo: c.memo}
	for _, o := range c.nodes.GetStore().List() {
		s.Nodes = append(s.Nodes, o.(*corev1.Node))
	}
	for _, o := range c.pods.GetStore().List() {
		s.Pods = append(s.Pods, o.(*corev1.Pod))
	}
	for _, o := range c.namespaces.GetStore().List() {
		s.Namespaces = append(s.Namespaces, o.(*corev1.Namespace))
	}
	s.Tenants = unstructuredList(c.tenants)
	s.Reservations = unstructuredList(c.reservations)
	if c.podGroups != nil {
		s.PodGroups = unstructuredList(c.podGroups)
	}
	if c.policyInf != nil {
		s.Policies = unstructuredList(c.policyInf)
	}
	sortByName(s)
	s.Pods = c.applier.Assumed.Overlay(s.Pods, time.Now())
	return s
}

func unstructuredList(inf cache.SharedIndexInformer) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range inf.GetStore().List() {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out
}

// Cycle runs one scheduling cycle: snapshot, translate, schedule, apply,
// write status.
func (c *Controller) Cycle(ctx context.Context) CycleReport {
	start := time.Now()
	s := c.Snapshot()
	cy, err := Translate(s, &c.cfg, start)
	if err != nil {
		return CycleReport{Err: err, Took: time.Since(start)}
	}
	for _, e := range cy.NodeProblems {
		c.log.Debug("node left out", "err", e)
	}
	pol := c.policies.Run(cy, s.Policies, start)
	plan := sched.Schedule(cy.Input)
	plan.Pending = append(plan.Pending, pol.Held...)
	res := c.applier.Apply(ctx, cy, &plan)
	res.Errors = append(res.Errors, WriteStatus(ctx, c.dyn, s, cy, &plan)...)
	res.Errors = append(res.Errors, c.policyStatus(ctx, s, pol)...)
	return CycleReport{Pending: len(plan.Pending), Problems: len(cy.Problems), Result: res, Took: time.Since(start)}
}

// policyStatus writes each ArbiterPolicy's status when it changed, and an
// Event for each firing and revert.
func (c *Controller) policyStatus(ctx context.Context, s *Snapshot, pol PolicyResult) []error {
	var errs []error
	for _, u := range s.Policies {
		want := c.policies.policyStatus(u.GetName())
		if want == nil {
			continue
		}
		if err := updateStatus(ctx, c.dyn.Resource(PolicyGVR), u, want); err != nil {
			errs = append(errs, err)
		}
	}
	byName := map[string]*unstructured.Unstructured{}
	for _, u := range s.Policies {
		byName[u.GetName()] = u
	}
	for _, f := range pol.Firings {
		if u := byName[f.Policy]; u != nil {
			c.applier.objectEvent(ctx, u, corev1.EventTypeNormal, "Policy"+strings.ToUpper(f.Event.String()[:1])+f.Event.String()[1:], f.Text)
		}
		c.log.Info("policy firing", "policy", f.Policy, "event", f.Event, "text", f.Text)
	}
	return errs
}
