package kube

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// The custom resources Arbiter reads (deploy/crds/) and the coscheduling
// plugin's PodGroup.
var (
	TenantGVR      = schema.GroupVersionResource{Group: "arbiter.dev", Version: "v1alpha1", Resource: "arbitertenants"}
	ReservationGVR = schema.GroupVersionResource{Group: "arbiter.dev", Version: "v1alpha1", Resource: "arbiterreservations"}
	PodGroupGVR    = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
)

// ErrSpec is the sentinel of every custom resource spec problem.
var ErrSpec = errors.New("kube: bad custom resource spec")

// SpecError is a problem with one field of a custom resource.
type SpecError struct {
	Kind, Name, Field, Msg string
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("%s %s: %s: %s", e.Kind, e.Name, e.Field, e.Msg)
}

// Is makes errors.Is(err, ErrSpec) true.
func (e *SpecError) Is(target error) bool { return target == ErrSpec }

// Tenant is an ArbiterTenant: a tenant spec and the namespaces it owns.
type Tenant struct {
	Spec       tenancy.TenantSpec
	Namespaces []string
}

// fields reads a custom resource's spec with errors naming the field.
type fields struct {
	kind, name string
	err        error
}

func (f *fields) fail(field, format string, args ...any) {
	if f.err == nil {
		f.err = &SpecError{Kind: f.kind, Name: f.name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
}

func (f *fields) str(m map[string]any, key, field string) string {
	v, ok := m[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		f.fail(field, "want a string, got %T", v)
	}
	return s
}

func (f *fields) strs(m map[string]any, key, field string) []string {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		f.fail(field, "want a list of strings, got %T", v)
		return nil
	}
	out := make([]string, 0, len(l))
	for i, x := range l {
		s, ok := x.(string)
		if !ok {
			f.fail(fmt.Sprintf("%s[%d]", field, i), "want a string, got %T", x)
			return nil
		}
		out = append(out, s)
	}
	return out
}

func (f *fields) integer(m map[string]any, key, field string) int64 {
	switch v := m[key].(type) {
	case nil:
		return 0
	case int64:
		return v
	case float64:
		if v != float64(int64(v)) {
			f.fail(field, "want a whole number, got %v", v)
		}
		return int64(v)
	default:
		f.fail(field, "want a whole number, got %T", v)
		return 0
	}
}

// gpus reads a GPU amount written as a number (8, 0.5) or a string
// ("8", "500m").
func (f *fields) gpus(m map[string]any, key, field string) (resource.MilliGPU, bool) {
	var s string
	switch v := m[key].(type) {
	case nil:
		return 0, false
	case string:
		s = v
	case int64:
		s = strconv.FormatInt(v, 10)
	case float64:
		s = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		f.fail(field, "want a GPU amount (8, 0.5 or 500m), got %T", v)
		return 0, false
	}
	g, err := resource.ParseGPUs(s)
	if err != nil {
		f.fail(field, "%v", err)
		return 0, false
	}
	return g, true
}

func spec(u *unstructured.Unstructured) map[string]any {
	m, _ := u.Object["spec"].(map[string]any)
	return m
}

// ParseTenant reads an ArbiterTenant (cluster-scoped; its name is the
// tenant's).
func ParseTenant(u *unstructured.Unstructured) (*Tenant, error) {
	f := &fields{kind: "ArbiterTenant", name: u.GetName()}
	s := spec(u)
	t := &Tenant{Spec: tenancy.TenantSpec{Name: u.GetName()}}
	t.Spec.Parent = f.str(s, "parent", "spec.parent")
	t.Namespaces = f.strs(s, "namespaces", "spec.namespaces")
	for i, p := range f.strs(s, "allowedPriorities", "spec.allowedPriorities") {
		pr, err := workload.ParsePriority(p)
		if err != nil {
			f.fail(fmt.Sprintf("spec.allowedPriorities[%d]", i), "%v", err)
		}
		t.Spec.AllowedPriorities = append(t.Spec.AllowedPriorities, pr)
	}
	qs, _ := s["quota"].([]any)
	if v, ok := s["quota"]; ok && v != nil && qs == nil {
		f.fail("spec.quota", "want a list, got %T", v)
	}
	if len(qs) > 256 {
		f.fail("spec.quota", "%d entries, at most 256", len(qs))
		qs = nil
	}
	for i, x := range qs {
		field := fmt.Sprintf("spec.quota[%d]", i)
		m, ok := x.(map[string]any)
		if !ok {
			f.fail(field, "want an object, got %T", x)
			break
		}
		q := tenancy.QuotaSpec{
			Flavor: fleet.ModelID(f.str(m, "flavor", field+".flavor")),
			Region: f.str(m, "region", field+".region"),
		}
		if q.Flavor == "" {
			f.fail(field+".flavor", "a quota entry needs a GPU model")
		}
		q.Guaranteed, _ = f.gpus(m, "guaranteed", field+".guaranteed")
		if g, ok := f.gpus(m, "limit", field+".limit"); ok {
			q.Limit = &g
		}
		if g, ok := f.gpus(m, "lendable", field+".lendable"); ok {
			q.Lendable = &g
		}
		if w, ok := m["weight"]; ok {
			switch v := w.(type) {
			case int64:
				q.Weight = float64(v)
			case float64:
				q.Weight = v
			default:
				f.fail(field+".weight", "want a number, got %T", w)
			}
		}
		q.Priority = int(f.integer(m, "priority", field+".priority"))
		t.Spec.Quota = append(t.Spec.Quota, q)
	}
	if f.err != nil {
		return nil, f.err
	}
	return t, nil
}

// Reservation is an ArbiterReservation: Count nodes of one GPU model and
// GPU count held for a tenant, optionally pinned to named nodes.
type Reservation struct {
	tenancy.Reservation
	Model       fleet.ModelID
	GPUsPerNode int
	// Pinned are the nodes the spec names; Bound the nodes its status
	// holds from an earlier cycle.
	Pinned, Bound []fleet.NodeID
}

// ParseReservation reads an ArbiterReservation (cluster-scoped).
func ParseReservation(u *unstructured.Unstructured) (*Reservation, error) {
	f := &fields{kind: "ArbiterReservation", name: u.GetName()}
	s := spec(u)
	r := &Reservation{}
	r.Name = u.GetName()
	r.Owner = f.str(s, "tenant", "spec.tenant")
	r.Region = f.str(s, "region", "spec.region")
	if r.Region == "" {
		r.Region = DefaultRegion
	}
	r.Zone = f.str(s, "zone", "spec.zone")
	r.Model = fleet.ModelID(f.str(s, "model", "spec.model"))
	r.GPUsPerNode = int(f.integer(s, "gpusPerNode", "spec.gpusPerNode"))
	r.Count = int(f.integer(s, "count", "spec.count"))
	for _, k := range []string{"start", "end"} {
		v := f.str(s, k, "spec."+k)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			f.fail("spec."+k, "want an RFC 3339 time, e.g. 2026-01-02T15:04:05Z")
		}
		if k == "start" {
			r.Start = t
		} else {
			r.End = t
		}
	}
	for _, n := range f.strs(s, "nodes", "spec.nodes") {
		r.Pinned = append(r.Pinned, fleet.NodeID(n))
	}
	if st, ok := u.Object["status"].(map[string]any); ok {
		for _, n := range f.strs(st, "nodes", "status.nodes") {
			r.Bound = append(r.Bound, fleet.NodeID(n))
		}
	}
	switch {
	case r.Owner == "":
		f.fail("spec.tenant", "a reservation needs a tenant")
	case r.Model == "":
		f.fail("spec.model", "a reservation needs a GPU model")
	case r.GPUsPerNode < 1 || r.GPUsPerNode > MaxNodeGPUs:
		f.fail("spec.gpusPerNode", "want 1 to %d GPUs per node, got %d", MaxNodeGPUs, r.GPUsPerNode)
	case r.Count < 1 || r.Count > 100_000:
		f.fail("spec.count", "want 1 to 100000 nodes, got %d", r.Count)
	case len(r.Pinned) > 0 && len(r.Pinned) != r.Count:
		f.fail("spec.nodes", "names %d nodes, spec.count is %d", len(r.Pinned), r.Count)
	case !r.End.IsZero() && !r.End.After(r.Start):
		f.fail("spec.end", "must be after spec.start")
	}
	if f.err != nil {
		return nil, f.err
	}
	r.SKU = skuName(r.Model, r.GPUsPerNode)
	return r, nil
}

// PodGroup is the coscheduling plugin's PodGroup: how many of its pods
// must be placed together.
type PodGroup struct {
	Namespace, Name string
	MinMember       int
}

// ParsePodGroup reads a PodGroup (spec.minMember).
func ParsePodGroup(u *unstructured.Unstructured) (*PodGroup, error) {
	f := &fields{kind: "PodGroup", name: u.GetNamespace() + "/" + u.GetName()}
	n := f.integer(spec(u), "minMember", "spec.minMember")
	if f.err == nil && (n < 1 || n > 10_000) {
		f.fail("spec.minMember", "want 1 to 10000 pods, got %d", n)
	}
	if f.err != nil {
		return nil, f.err
	}
	return &PodGroup{Namespace: u.GetNamespace(), Name: u.GetName(), MinMember: int(n)}, nil
}
