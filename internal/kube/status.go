package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
)

// TenantUsage is what an ArbiterTenant's status shows.
type TenantUsage struct {
	Guaranteed, Used, Borrowed resource.MilliGPU
	Pending                    int
}

// Usage sums each tenant's guarantee, running GPUs and borrowing (per GPU
// model: what runs above the guarantee of that model) and its pending
// workloads.
func Usage(c *Cycle, plan *sched.Plan) map[string]TenantUsage {
	used := map[string]map[fleet.ModelID]resource.MilliGPU{}
	for _, w := range c.Input.Workloads {
		if w.Running == nil || w.Running.OnReservation {
			continue
		}
		if used[w.Tenant] == nil {
			used[w.Tenant] = map[fleet.ModelID]resource.MilliGPU{}
		}
		used[w.Tenant][w.Running.Flavor] = used[w.Tenant][w.Running.Flavor].Add(w.TotalGPUs())
	}
	pending := map[string]int{}
	byID := map[string]string{}
	for _, w := range c.Input.Workloads {
		byID[string(w.Name)] = w.Tenant
	}
	for _, p := range plan.Pending {
		pending[byID[string(p.Workload)]]++
	}
	out := map[string]TenantUsage{}
	for name, t := range c.Tenants {
		guar := map[fleet.ModelID]resource.MilliGPU{}
		var u TenantUsage
		for _, q := range t.Spec.Quota {
			guar[q.Flavor] = guar[q.Flavor].Add(q.Guaranteed)
			u.Guaranteed = u.Guaranteed.Add(q.Guaranteed)
		}
		for m, g := range used[name] {
			u.Used = u.Used.Add(g)
			u.Borrowed = u.Borrowed.Add(g.Sub(guar[m]))
		}
		u.Pending = pending[name]
		out[name] = u
	}
	return out
}

// tenantStatus is an ArbiterTenant's status object.
func tenantStatus(u TenantUsage, problem error) map[string]any {
	st := map[string]any{
		"guaranteed": u.Guaranteed.String(), "used": u.Used.String(), "borrowed": u.Borrowed.String(),
		"pending": int64(u.Pending), "message": "",
	}
	if problem != nil {
		st["message"] = problem.Error()
	}
	return st
}

// reservationStatus is an ArbiterReservation's status object.
func reservationStatus(r *Reservation, problem error) map[string]any {
	st := map[string]any{"phase": "Pending", "nodes": []any{}, "message": ""}
	if r != nil {
		nodes := make([]any, len(r.Nodes))
		for i, n := range r.Nodes {
			nodes[i] = string(n)
		}
		st["phase"], st["nodes"] = "Bound", nodes
	}
	if problem != nil {
		st["message"] = problem.Error()
	}
	return st
}

// WriteStatus writes the status subresource of every ArbiterTenant and
// ArbiterReservation whose status changed.
func WriteStatus(ctx context.Context, dyn dynamic.Interface, s *Snapshot, c *Cycle, plan *sched.Plan) []error {
	var errs []error
	usage := Usage(c, plan)
	for _, u := range s.Tenants {
		want := tenantStatus(usage[u.GetName()], c.TenantProblems[u.GetName()])
		if err := updateStatus(ctx, dyn.Resource(TenantGVR), u, want); err != nil {
			errs = append(errs, err)
		}
	}
	bound := map[string]*Reservation{}
	for _, r := range c.Reservations {
		bound[r.Name] = r
	}
	for _, u := range s.Reservations {
		want := reservationStatus(bound[u.GetName()], c.ReservationProblems[u.GetName()])
		if err := updateStatus(ctx, dyn.Resource(ReservationGVR), u, want); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// updateStatus writes want as u's status unless it is already.
func updateStatus(ctx context.Context, ri dynamic.NamespaceableResourceInterface, u *unstructured.Unstructured, want map[string]any) error {
	if have, ok := u.Object["status"].(map[string]any); ok && reflect.DeepEqual(normalize(have), normalize(want)) {
		return nil
	}
	// A merge patch of the status alone: no resourceVersion, so a cache a
	// write behind (our own last status) never makes it conflict.
	patch, err := json.Marshal(map[string]any{"status": want})
	if err != nil {
		return err
	}
	if _, err := ri.Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("status of %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// normalize makes JSON-decoded and built status objects comparable.
func normalize(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		switch x := v.(type) {
		case []string:
			l := make([]any, len(x))
			for i := range x {
				l[i] = x[i]
			}
			v = l
		case float64:
			v = int64(x)
		case int:
			v = int64(x)
		}
		out[k] = v
	}
	return out
}
