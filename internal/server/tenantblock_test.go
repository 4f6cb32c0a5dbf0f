package server

import (
	"errors"
	"maps"
	"net/http"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestTenantDeleteBlocker: deleting a tenant is refused with the first
// object that depends on it (children, live workloads, reservations,
// partitions, in that order), as a typed error, without HTTP; other
// tenants' objects and ended workloads do not block.
func TestTenantDeleteBlocker(t *testing.T) {
	wl := func(tenant, name string, st store.State) *store.Workload {
		return &store.Workload{Tenant: tenant, Spec: workload.Spec{Name: workload.ID(name)}, State: st}
	}
	others := tenantDependents{
		Tenants:      []*store.Tenant{{Name: "acme"}, {Name: "other"}, {Name: "kid", Parent: "other"}},
		Workloads:    []*store.Workload{wl("other", "w", store.StateRunning), wl("acme", "done", store.StateSucceeded), wl("acme", "gone", store.StateCancelled)},
		Reservations: []*store.Reservation{{Tenant: "other", Name: "r"}},
		Partitions:   []*store.Partition{{Tenant: "other", Name: "p"}},
	}
	with := func(f func(d *tenantDependents)) tenantDependents {
		d := others
		d.Tenants = append([]*store.Tenant(nil), d.Tenants...)
		d.Workloads = append([]*store.Workload(nil), d.Workloads...)
		d.Reservations = append([]*store.Reservation(nil), d.Reservations...)
		d.Partitions = append([]*store.Partition(nil), d.Partitions...)
		f(&d)
		return d
	}
	child := func(d *tenantDependents) { d.Tenants = append(d.Tenants, &store.Tenant{Name: "team", Parent: "acme"}) }
	pending := func(d *tenantDependents) { d.Workloads = append(d.Workloads, wl("acme", "train", store.StatePending)) }
	running := func(d *tenantDependents) { d.Workloads = append(d.Workloads, wl("acme", "serve", store.StateRunning)) }
	res := func(d *tenantDependents) {
		d.Reservations = append(d.Reservations, &store.Reservation{Tenant: "acme", Name: "r1"})
	}
	part := func(d *tenantDependents) {
		d.Partitions = append(d.Partitions, &store.Partition{Tenant: "acme", Name: "p1"})
	}
	all := func(d *tenantDependents) { part(d); res(d); running(d); child(d) }
	cases := []struct {
		name string
		d    tenantDependents
		kind BlockerKind // "": nothing blocks
		obj  string
		msg  string
	}{
		{"nothing of its own", others, "", "", ""},
		{"a child tenant", with(child), BlockerChild, "team", `tenant "acme" has child tenant "team"; delete it first`},
		{"a pending workload", with(pending), BlockerWorkload, "train", `tenant "acme" has live workload "train"; cancel it first`},
		{"a running workload", with(running), BlockerWorkload, "serve", `tenant "acme" has live workload "serve"; cancel it first`},
		{"a reservation", with(res), BlockerReservation, "r1", `tenant "acme" owns reservation "r1"; delete it first`},
		{"a partition", with(part), BlockerPartition, "p1", `tenant "acme" owns partition "p1"; delete it first`},
		{"all of them: the child first", with(all), BlockerChild, "team", `tenant "acme" has child tenant "team"; delete it first`},
		{"workload before reservation", with(func(d *tenantDependents) { part(d); res(d); running(d) }), BlockerWorkload, "serve", ""},
		{"reservation before partition", with(func(d *tenantDependents) { part(d); res(d) }), BlockerReservation, "r1", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := tenantDeleteBlocker("acme", c.d)
			if c.kind == "" {
				if err != nil {
					t.Fatalf("blocked: %v", err)
				}
				return
			}
			var e *TenantInUseError
			if !errors.As(err, &e) || !errors.Is(err, ErrTenantInUse) {
				t.Fatalf("error %v (%T), want a *TenantInUseError", err, err)
			}
			if e.Tenant != "acme" || e.Kind != c.kind || e.Name != c.obj {
				t.Fatalf("blocker %+v, want %s %q", e, c.kind, c.obj)
			}
			if c.msg != "" && e.Error() != c.msg {
				t.Fatalf("message %q, want %q", e.Error(), c.msg)
			}
		})
	}
}

// TestTenantInUseAnswer: the API answers a blocked delete with 409
// Conflict and the blocker in the message.
func TestTenantInUseAnswer(t *testing.T) {
	s := &Server{}
	ae := s.toAPIError(&TenantInUseError{Tenant: "acme", Kind: BlockerReservation, Name: "r1"})
	if ae.Status != http.StatusConflict || ae.Code != api.CodeConflict || ae.Message != `tenant "acme" owns reservation "r1"; delete it first` {
		t.Fatalf("answer %+v", ae)
	}
}

// TestReservationUse: a shrink weighs each machine by the GPUs the
// reservation's own running work holds there, not other reservations'
// or other tenants' work, nor pending work.
func TestReservationUse(t *testing.T) {
	run := func(tenant, res string, reps ...workload.Replica) *store.Workload {
		return &store.Workload{Tenant: tenant, Spec: workload.Spec{Reservation: res}, State: store.StateRunning, Running: &workload.Assignment{Replicas: reps}}
	}
	rep := func(node string, gpus int) workload.Replica {
		return workload.Replica{Node: fleet.NodeID(node), GPUs: make([]int, gpus)}
	}
	ws := []*store.Workload{
		run("acme", "r1", rep("n1", 8), rep("n2", 2)),
		run("acme", "r1", rep("n2", 4)),
		run("acme", "r2", rep("n3", 8)),
		run("other", "r1", rep("n3", 8)),
		{Tenant: "acme", Spec: workload.Spec{Reservation: "r1"}, State: store.StatePending},
	}
	got := reservationUse(ws, "acme", "r1")
	want := map[fleet.NodeID]int{"n1": 8, "n2": 6}
	if !maps.Equal(got, want) {
		t.Fatalf("use %v, want %v", got, want)
	}
}
