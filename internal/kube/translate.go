package kube

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// UnmanagedTenant owns the GPUs that pods of other schedulers hold (and
// Arbiter's own running pods whose tenant is gone): they take capacity,
// Arbiter never evicts them.
const UnmanagedTenant = "(unmanaged)"

// Snapshot is what the informer caches hold at the start of a cycle.
type Snapshot struct {
	Nodes        []*corev1.Node
	Pods         []*corev1.Pod
	Namespaces   []*corev1.Namespace
	Tenants      []*unstructured.Unstructured
	Reservations []*unstructured.Unstructured
	PodGroups    []*unstructured.Unstructured
	Policies     []*unstructured.Unstructured
	// Memo, when set, carries pods' translated specs from one cycle to
	// the next (nil: every pod is translated afresh).
	Memo *SpecMemo
}

// Reason codes of pods Arbiter does not give to the core; the core's own
// (sched.ReasonCode) are used otherwise.
const (
	ReasonWaitingForGang = "WaitingForGang"
)

// PodProblem is a pod left pending before the core: a bad spec or an
// incomplete gang.
type PodProblem struct {
	Pod  *corev1.Pod
	Code string
	Msg  string
}

// Group is the pods of one workload: a single pod, or a gang's pods in
// replica order.
type Group struct {
	ID   workload.ID
	Pods []*corev1.Pod
}

// Cycle is one translated snapshot.
type Cycle struct {
	Input sched.Input
	// Groups are the pods of each pending or running workload.
	Groups map[workload.ID]*Group
	// Problems are pods not given to the core.
	Problems []PodProblem
	// NodeProblems are GPU nodes left out of the fleet.
	NodeProblems []error
	// NodesDown are the nodes Kubernetes shows cordoned or NotReady
	// (Input.Down may add the nodes a policy drains).
	NodesDown []fleet.NodeID
	// TenantProblems and ReservationProblems are custom resources left out,
	// by name.
	TenantProblems      map[string]error
	ReservationProblems map[string]error
	// Tenants are the tenants used (by name), Reservations the bound ones.
	Tenants      map[string]*Tenant
	Reservations []*Reservation
}

// translator holds what a cycle's translation looks things up in.
type translator struct {
	cfg      *Config
	cycle    *Cycle
	fleet    *fleet.Fleet
	tree     *tenancy.Tree
	nsTenant map[string]string
	groups   map[string]*PodGroup // "ns/name"
	models   []fleet.ModelID      // the fleet's models, catalog order
	// free is each node's free milli-GPU per GPU index while running pods
	// are read.
	free map[fleet.NodeID][]int64
	// memo and memoCtx: see SpecMemo.
	memo    *SpecMemo
	memoCtx string
}

// Translate turns a snapshot into the core's input. It never fails on one
// bad object (see the problems in Cycle); it returns an error only when
// the tenants as a whole do not form a tree.
func Translate(s *Snapshot, cfg *Config, now time.Time) (*Cycle, error) {
	c := &Cycle{Groups: map[workload.ID]*Group{}, TenantProblems: map[string]error{},
		ReservationProblems: map[string]error{}, Tenants: map[string]*Tenant{}}
	t := &translator{cfg: cfg, cycle: c, groups: map[string]*PodGroup{}, free: map[fleet.NodeID][]int64{}}
	f, down, probs, err := buildFleet(s.Nodes, cfg)
	if err != nil {
		return nil, err
	}
	c.NodeProblems, t.fleet = probs, f
	for _, n := range f.Nodes {
		t.free[n.ID] = make([]int64, n.GPUs)
		for i := range t.free[n.ID] {
			t.free[n.ID][i] = resource.PerGPU
		}
	}
	for _, m := range f.Catalog.ModelNames() {
		if f.Capacity(m, "") > 0 {
			t.models = append(t.models, m)
		}
	}
	if err := t.tenants(s); err != nil {
		return nil, err
	}
	for _, u := range s.PodGroups {
		pg, err := ParsePodGroup(u)
		if err != nil {
			t.groups[u.GetNamespace()+"/"+u.GetName()] = &PodGroup{Namespace: u.GetNamespace(), Name: u.GetName(), MinMember: -1}
			continue
		}
		t.groups[pg.Namespace+"/"+pg.Name] = pg
	}
	if s.Memo != nil {
		t.memo, t.memoCtx = s.Memo, memoContext(t.models, f.Regions)
		defer s.Memo.rotate()
	}
	// A tenant's pods are decided as the server decides its workloads:
	// its first sched.DefaultTenantBound each cycle.
	c.Input = sched.Input{Now: now, Fleet: f, Tenants: t.tree, Down: down, Options: sched.Options{TenantBound: sched.DefaultTenantBound}}
	c.NodesDown = down
	running, pending := t.splitPods(s.Pods)
	t.running(running)
	t.pending(pending)
	t.reservations(s.Reservations, down)
	sort.Slice(c.Input.Workloads, func(i, j int) bool { return c.Input.Workloads[i].Name < c.Input.Workloads[j].Name })
	return c, nil
}

// tenants builds the tree from the ArbiterTenants that parse, plus the
// unmanaged tenant, and the namespace → tenant map.
func (t *translator) tenants(s *Snapshot) error {
	specs := []tenancy.TenantSpec{{Name: UnmanagedTenant, AllowedPriorities: []workload.Priority{workload.PriorityCritical}}}
	byNS := map[string]string{}
	for _, u := range s.Tenants {
		ten, err := ParseTenant(u)
		if err == nil && ten.Spec.Name == UnmanagedTenant {
			err = &SpecError{Kind: "ArbiterTenant", Name: u.GetName(), Field: "metadata.name", Msg: "reserved name"}
		}
		if err != nil {
			t.cycle.TenantProblems[u.GetName()] = err
			continue
		}
		t.cycle.Tenants[ten.Spec.Name] = ten
		specs = append(specs, ten.Spec)
		for _, ns := range ten.Namespaces {
			if _, dup := byNS[ns]; !dup {
				byNS[ns] = ten.Spec.Name
			}
		}
	}
	// Parents first, as tenancy.NewTree wants them.
	sort.SliceStable(specs, func(i, j int) bool { return depth(specs, i) < depth(specs, j) })
	tree, err := tenancy.NewTree(specs)
	if err != nil {
		return fmt.Errorf("kube: ArbiterTenants: %w", err)
	}
	t.tree = tree
	t.nsTenant = map[string]string{}
	for _, ns := range s.Namespaces {
		switch {
		case t.cfg.TenantMapping[ns.Name] != "":
			t.nsTenant[ns.Name] = t.cfg.TenantMapping[ns.Name]
		case byNS[ns.Name] != "":
			t.nsTenant[ns.Name] = byNS[ns.Name]
		case ns.Labels[t.cfg.TenantLabel] != "":
			t.nsTenant[ns.Name] = ns.Labels[t.cfg.TenantLabel]
		default:
			t.nsTenant[ns.Name] = ns.Name
		}
	}
	return nil
}

// depth is a spec's depth in the tree (0 for a root; bounded on cycles,
// which NewTree reports).
func depth(specs []tenancy.TenantSpec, i int) int {
	d, p := 0, specs[i].Parent
	for p != "" && d <= len(specs) {
		d++
		next := ""
		for _, s := range specs {
			if s.Name == p {
				next = s.Parent
				break
			}
		}
		p = next
	}
	return d
}

// tenantOf is a namespace's tenant.
func (t *translator) tenantOf(ns string) string {
	if x, ok := t.nsTenant[ns]; ok {
		return x
	}
	if x := t.cfg.TenantMapping[ns]; x != "" {
		return x
	}
	return ns
}

// splitPods returns the pods holding GPUs on fleet nodes (any scheduler),
// and Arbiter's pods waiting for a node.
func (t *translator) splitPods(pods []*corev1.Pod) (running, pending []*corev1.Pod) {
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.NodeName != "" {
			if _, ok := t.fleet.Node(fleet.NodeID(p.Spec.NodeName)); ok {
				running = append(running, p)
			}
			continue
		}
		if p.Spec.SchedulerName == t.cfg.SchedulerName && p.DeletionTimestamp == nil {
			pending = append(pending, p)
		}
	}
	sort.Slice(running, func(i, j int) bool { return podLess(running[i], running[j]) })
	sort.Slice(pending, func(i, j int) bool { return podLess(pending[i], pending[j]) })
	return running, pending
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// podLess orders pods as their podKeys, without building them.
func podLess(a, b *corev1.Pod) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// podID names a pod's workload "namespace:name" (workload names take no
// slash; neither namespaces nor pod names take a colon).
func podID(p *corev1.Pod) workload.ID { return workload.ID(p.Namespace + ":" + p.Name) }

// gpusOf is the pod's GPU ask: whole GPUs from resources.limits (or
// requests) of its containers, or the milli-GPU annotation.
func gpusOf(p *corev1.Pod) (resource.MilliGPU, error) {
	var whole int64
	for i, c := range p.Spec.Containers {
		q, ok := c.Resources.Limits[ResourceGPU]
		if !ok {
			q, ok = c.Resources.Requests[ResourceGPU]
		}
		if !ok {
			continue
		}
		if q.Sign() < 0 || q.MilliValue()%1000 != 0 || q.Value() > 1<<20 {
			return 0, fmt.Errorf("spec.containers[%d].resources.limits[%s] = %s: want a whole number of GPUs", i, ResourceGPU, q.String())
		}
		whole += q.Value()
	}
	v, ok := p.Annotations[AnnotationMilliGPU]
	if !ok {
		return resource.GPUs(int(min(whole, 1<<20))), nil
	}
	m, err := ParseMilliGPU(v)
	if err != nil {
		return 0, err
	}
	if whole > 1 {
		return 0, annErr(AnnotationMilliGPU, v, "a share of one GPU, but the pod's limits ask for %d whole GPUs", whole)
	}
	return resource.MilliGPU(m), nil
}

// podSpec is one pod's workload spec (one replica).
func (t *translator) podSpec(p *corev1.Pod, id workload.ID) (workload.Spec, error) {
	if t.memo == nil {
		return t.translatePod(p, id)
	}
	k := memoKey{uid: p.UID, rv: p.ResourceVersion, id: id, tenant: t.tenantOf(p.Namespace), ctx: t.memoCtx}
	if e, ok := t.memo.get(k); ok {
		return e.spec, e.err
	}
	s, err := t.translatePod(p, id)
	t.memo.put(k, memoEntry{spec: s, err: err})
	return s, err
}

// translatePod reads a pod's workload spec from its fields and annotations.
func (t *translator) translatePod(p *corev1.Pod, id workload.ID) (workload.Spec, error) {
	s := workload.Spec{Name: id, Tenant: t.tenantOf(p.Namespace), Replicas: 1,
		Priority: t.cfg.PriorityOf(p.Spec.PriorityClassName), Labels: podLabels(p.Labels)}
	var err error
	if s.GPUs, err = gpusOf(p); err != nil {
		return s, err
	}
	a := p.Annotations
	if v, ok := a[AnnotationPriority]; ok {
		if s.Priority, err = ParsePriority(v); err != nil {
			return s, err
		}
	}
	if v, ok := a[AnnotationPreemptible]; ok {
		if s.Preemptible, err = ParsePreemptible(v); err != nil {
			return s, err
		}
	}
	s.Flavors = t.models
	if v, ok := a[AnnotationFlavors]; ok {
		if s.Flavors, err = ParseFlavors(v, t.fleet.Catalog); err != nil {
			return s, err
		}
	}
	s.Regions = t.fleet.Regions
	if v, ok := a[AnnotationRegions]; ok {
		if s.Regions, err = ParseList(AnnotationRegions, v); err != nil {
			return s, err
		}
	}
	if v, ok := a[AnnotationReservation]; ok {
		s.Reservation = strings.TrimSpace(v)
	}
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil && *g > 0 {
		s.GracePeriod = time.Duration(min(*g, 86400)) * time.Second
	}
	for _, c := range p.Spec.Containers {
		s.CPU += resource.MilliCPU(c.Resources.Requests.Cpu().MilliValue())
		s.Memory += resource.MiB(c.Resources.Requests.Memory().Value() >> 20)
	}
	if len(s.Flavors) == 0 {
		s.Flavors = []fleet.ModelID{"none"} // no GPU node at all: the core says NoFlavor
	}
	if len(s.Regions) == 0 {
		s.Regions = []string{DefaultRegion}
	}
	if fe := s.Validate(); len(fe) > 0 {
		return s, fmt.Errorf("%s: %s", fe[0].Field, fe[0].Msg)
	}
	return s, nil
}

// problem leaves a pod pending before the core.
func (t *translator) problem(p *corev1.Pod, code, format string, args ...any) {
	t.cycle.Problems = append(t.cycle.Problems, PodProblem{Pod: p, Code: code, Msg: fmt.Sprintf(format, args...)})
}

// groupOf is the pod group a pod belongs to ("" for none).
func groupOf(p *corev1.Pod) string {
	if g := p.Labels[LabelPodGroup]; g != "" {
		return p.Namespace + "/" + g
	}
	return ""
}

// pending adds Arbiter's waiting pods: one workload per pod, one gang
// workload (topology same-block) per complete pod group.
func (t *translator) pending(pods []*corev1.Pod) {
	gangs := map[string][]*corev1.Pod{}
	var order []string
	for _, p := range pods {
		if g := groupOf(p); g != "" {
			if _, ok := gangs[g]; !ok {
				order = append(order, g)
			}
			gangs[g] = append(gangs[g], p)
			continue
		}
		id := podID(p)
		s, err := t.podSpec(p, id)
		if err != nil {
			t.problem(p, string(sched.ReasonInvalid), "%v", err)
			continue
		}
		t.add(&workload.Workload{Spec: s, SubmittedAt: p.CreationTimestamp.Time}, []*corev1.Pod{p})
	}
	for _, g := range order {
		t.gang(g, gangs[g])
	}
}

// gangID names a pod group's workload "namespace:pg:group" (no pod is
// named so: pod names take no colon); a group part of which runs already
// has its waiting rest named apart.
func gangID(g string) workload.ID { return workload.ID(strings.Replace(g, "/", ":pg:", 1)) }

// gang adds one pod group's waiting pods as a gang.
func (t *translator) gang(g string, pods []*corev1.Pod) {
	pg, ok := t.groups[g]
	switch {
	case !ok:
		for _, p := range pods {
			t.problem(p, ReasonWaitingForGang, "PodGroup %s not found (label %s; is the coscheduling PodGroup CRD installed?)", g, LabelPodGroup)
		}
		return
	case pg.MinMember < 1:
		for _, p := range pods {
			t.problem(p, string(sched.ReasonInvalid), "PodGroup %s: spec.minMember must be 1 to 10000", g)
		}
		return
	case len(pods) < pg.MinMember:
		for _, p := range pods {
			t.problem(p, ReasonWaitingForGang, "pod group %s has %d of its minMember %d pods", g, len(pods), pg.MinMember)
		}
		return
	}
	id := gangID(g)
	if _, taken := t.cycle.Groups[id]; taken {
		id += ":rest"
	}
	s, err := t.podSpec(pods[0], id)
	for _, p := range pods[1:] {
		if err != nil {
			break
		}
		var o workload.Spec
		if o, err = t.podSpec(p, id); err == nil && (o.GPUs != s.GPUs || o.Priority != s.Priority || o.Preemptible != s.Preemptible) {
			err = fmt.Errorf("pods of pod group %s ask for different GPUs or priorities (%s: %v %v, %s: %v %v)", g, pods[0].Name, s.GPUs, s.Priority, p.Name, o.GPUs, o.Priority)
		}
	}
	if err != nil {
		for _, p := range pods {
			t.problem(p, string(sched.ReasonInvalid), "%v", err)
		}
		return
	}
	s.Replicas, s.Topology = len(pods), workload.TopologySameBlock
	if fe := s.Validate(); len(fe) > 0 {
		for _, p := range pods {
			t.problem(p, string(sched.ReasonInvalid), "%s: %s", fe[0].Field, fe[0].Msg)
		}
		return
	}
	at := pods[0].CreationTimestamp.Time
	for _, p := range pods {
		if p.CreationTimestamp.Time.Before(at) {
			at = p.CreationTimestamp.Time
		}
	}
	t.add(&workload.Workload{Spec: s, SubmittedAt: at}, pods)
}

// add records a workload and its pods.
func (t *translator) add(w *workload.Workload, pods []*corev1.Pod) {
	t.cycle.Input.Workloads = append(t.cycle.Input.Workloads, w)
	t.cycle.Groups[w.Name] = &Group{ID: w.Name, Pods: pods}
}

// running adds the pods holding GPUs on fleet nodes as running workloads:
// Arbiter's pods (a pod group's bound pods as one gang), and other
// schedulers' pods under the unmanaged tenant. Their GPU indices are the
// annotation Arbiter wrote when it is valid and free, else the lowest free.
func (t *translator) running(pods []*corev1.Pod) {
	type run struct {
		w    *workload.Workload
		pods []*corev1.Pod
	}
	var runs []*run
	gangs := map[workload.ID]*run{}
	for _, p := range pods {
		node, _ := t.fleet.Node(fleet.NodeID(p.Spec.NodeName))
		ours := p.Spec.SchedulerName == t.cfg.SchedulerName
		id := podID(p)
		var s workload.Spec
		var err error
		if ours {
			if g := groupOf(p); g != "" {
				id = gangID(g)
			}
			s, err = t.podSpec(p, id)
			if _, known := t.tree.Lookup(s.Tenant); !known {
				err = errors.New("tenant gone")
			}
		}
		if !ours || err != nil {
			g, gerr := gpusOf(p)
			if gerr != nil || g == 0 {
				continue
			}
			s = workload.Spec{Name: id, Tenant: UnmanagedTenant, Priority: workload.PriorityCritical, GPUs: g, Replicas: 1,
				Flavors: []fleet.ModelID{node.Model}, Regions: []string{node.Region}}
		}
		if s.GPUs <= 0 {
			continue
		}
		if r, ok := gangs[id]; ok && s.Tenant != UnmanagedTenant {
			r.pods = append(r.pods, p)
			r.w.Replicas++
			continue
		}
		w := &workload.Workload{Spec: s, SubmittedAt: p.CreationTimestamp.Time,
			Running: &workload.Assignment{Flavor: node.Model, Region: node.Region, StartedAt: p.CreationTimestamp.Time}}
		if p.Status.StartTime != nil {
			w.Running.StartedAt = p.Status.StartTime.Time
		}
		if s.Reservation != "" {
			w.Running.OnReservation = true
		}
		r := &run{w: w, pods: []*corev1.Pod{p}}
		runs = append(runs, r)
		if s.Gang() || groupOf(p) != "" {
			w.Topology = workload.TopologySameBlock
			gangs[id] = r
		}
	}
	// Indices: valid annotations first, then the lowest free GPUs.
	// An annotation is the pod's to edit: where two name the same GPU, the
	// pod created first keeps it.
	type podAsk struct {
		p   *corev1.Pod
		ask resource.MilliGPU
	}
	var asks []podAsk
	for _, r := range runs {
		for _, p := range r.pods {
			asks = append(asks, podAsk{p, r.w.GPUs})
		}
	}
	sort.SliceStable(asks, func(i, j int) bool {
		return asks[i].p.CreationTimestamp.Time.Before(asks[j].p.CreationTimestamp.Time)
	})
	idx := map[*corev1.Pod][]int{}
	for _, a := range asks {
		if g, ok := t.claimAnnotated(a.p, a.ask); ok {
			idx[a.p] = g
		}
	}
	for _, r := range runs {
		for _, p := range r.pods {
			g, ok := idx[p]
			if !ok {
				g = t.claimLowest(fleet.NodeID(p.Spec.NodeName), r.w.GPUs)
			}
			milli := resource.MilliGPU(min(int64(r.w.GPUs), resource.PerGPU))
			r.w.Running.Replicas = append(r.w.Running.Replicas, workload.Replica{Node: fleet.NodeID(p.Spec.NodeName), GPUs: g, Milli: milli})
		}
		t.add(r.w, r.pods)
	}
}

// claimAnnotated takes the GPUs a pod's annotation names when they are
// valid and free.
func (t *translator) claimAnnotated(p *corev1.Pod, ask resource.MilliGPU) ([]int, bool) {
	v, ok := p.Annotations[AnnotationGPUIndices]
	free := t.free[fleet.NodeID(p.Spec.NodeName)]
	if !ok {
		return nil, false
	}
	g, err := ParseGPUIndices(v, len(free))
	if err != nil {
		return nil, false
	}
	per, want := perGPU(ask)
	if len(g) != want {
		return nil, false
	}
	for _, i := range g {
		if free[i] < per {
			return nil, false
		}
	}
	for _, i := range g {
		free[i] -= per
	}
	return g, true
}

// claimLowest takes the lowest-numbered GPUs with room; a node
// over-committed by others gets its lowest GPUs named anyway (the core
// reports the conflict and ignores the workload).
func (t *translator) claimLowest(n fleet.NodeID, ask resource.MilliGPU) []int {
	free := t.free[n]
	per, want := perGPU(ask)
	var g []int
	for i := range free {
		if len(g) < want && free[i] >= per {
			g = append(g, i)
		}
	}
	for i := 0; len(g) < want && i < len(free); i++ {
		g = append(g, i)
	}
	for _, i := range g {
		free[i] -= per
	}
	return g
}

// perGPU is the milli-GPU taken on each GPU and the GPU count of an ask.
func perGPU(ask resource.MilliGPU) (int64, int) {
	if ask < resource.PerGPU {
		return int64(ask), 1
	}
	return resource.PerGPU, ask.WholeGPUs()
}

// reservations binds the ArbiterReservations that parse: to the nodes its
// status holds when they still match, else the nodes its spec names, else
// nodes tenancy.Bind chooses. Workloads name reservations by their name.
func (t *translator) reservations(us []*unstructured.Unstructured, down []fleet.NodeID) {
	var rs []*Reservation
	for _, u := range us {
		r, err := ParseReservation(u)
		if err != nil {
			t.cycle.ReservationProblems[u.GetName()] = err
			continue
		}
		if _, ok := t.tree.Lookup(r.Owner); !ok {
			t.cycle.ReservationProblems[r.Name] = &SpecError{Kind: "ArbiterReservation", Name: r.Name, Field: "spec.tenant", Msg: fmt.Sprintf("unknown tenant %q", r.Owner)}
			continue
		}
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
	reserved := map[fleet.NodeID]bool{}
	keep := func(r *Reservation, nodes []fleet.NodeID) bool {
		if len(nodes) != r.Count {
			return false
		}
		for _, id := range nodes {
			n, ok := t.fleet.Node(id)
			if !ok || reserved[id] || !r.Matches(n) {
				return false
			}
		}
		return true
	}
	var unbound []*Reservation
	for _, r := range rs {
		switch {
		case len(r.Pinned) > 0 && keep(r, r.Pinned):
			r.Nodes = r.Pinned
		case len(r.Pinned) == 0 && keep(r, r.Bound):
			r.Nodes = r.Bound
		case len(r.Pinned) > 0:
			t.cycle.ReservationProblems[r.Name] = &SpecError{Kind: "ArbiterReservation", Name: r.Name, Field: "spec.nodes",
				Msg: fmt.Sprintf("every node must exist with %d × %s in region %s and be held by no other reservation", r.GPUsPerNode, r.Model, r.Region)}
			continue
		default:
			unbound = append(unbound, r)
			continue
		}
		for _, id := range r.Nodes {
			reserved[id] = true
		}
		t.bound(r)
	}
	isDown := map[fleet.NodeID]bool{}
	for _, id := range down {
		isDown[id] = true
	}
	use := t.nodeUse()
	for _, r := range unbound {
		nodes, err := tenancy.Bind(&r.Reservation, t.fleet, func(n *fleet.Node) tenancy.NodeUse {
			u := use(n, r.Owner)
			u.Reserved, u.Down = reserved[n.ID], isDown[n.ID]
			return u
		})
		if err != nil {
			t.cycle.ReservationProblems[r.Name] = err
			continue
		}
		r.Nodes = nodes
		for _, id := range nodes {
			reserved[id] = true
		}
		t.bound(r)
	}
}

func (t *translator) bound(r *Reservation) {
	t.cycle.Reservations = append(t.cycle.Reservations, r)
	t.cycle.Input.Reservations = append(t.cycle.Input.Reservations, r.Reservation)
}

// nodeUse is how running work uses each node, for reservation binding.
func (t *translator) nodeUse() func(n *fleet.Node, owner string) tenancy.NodeUse {
	busy := map[fleet.NodeID]bool{}
	blocking := map[fleet.NodeID]map[string]bool{} // node → tenants with unevictable work
	for _, w := range t.cycle.Input.Workloads {
		if w.Running == nil {
			continue
		}
		for _, r := range w.Running.Replicas {
			busy[r.Node] = true
			if !w.Preemptible {
				if blocking[r.Node] == nil {
					blocking[r.Node] = map[string]bool{}
				}
				blocking[r.Node][w.Tenant] = true
			}
		}
	}
	return func(n *fleet.Node, owner string) tenancy.NodeUse {
		b := false
		for ten := range blocking[n.ID] {
			b = b || ten != owner
		}
		return tenancy.NodeUse{Busy: busy[n.ID], Blocking: b}
	}
}
