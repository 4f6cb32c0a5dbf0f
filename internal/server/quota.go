package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// runningLedger charges the running work outside reservations to the
// quota entries the scheduler charges (tenancy.Tree.Charged).
func runningLedger(wd *world) tenancy.Ledger { return runningLedgerAt(wd, time.Time{}) }

// runningLedgerAt is runningLedger for a window opening at (zero: now):
// running work expected to end by then (started_at + expected_runtime ≤
// at) is left out, as it will have released its quota; work without an
// expected runtime counts.
func runningLedgerAt(wd *world, at time.Time) tenancy.Ledger {
	l := tenancy.NewLedger(wd.Tree)
	for _, x := range wd.Workloads {
		if x.Running == nil || x.Running.OnReservation {
			continue
		}
		if rt := x.Spec.ExpectedRuntime; !at.IsZero() && rt > 0 && !x.Running.StartedAt.Add(rt).After(at) {
			continue
		}
		wd.Tree.ChargeUse(l, x.Tenant, tenancy.Key{Model: x.Running.Flavor, Region: x.Running.Region}, x.Spec.TotalGPUs())
	}
	return l
}

// usage computes each quota entry's current value for the tenants asked,
// charged as the scheduler charges (see package tenancy): running work at
// every entry on its tenant's path that covers its model and region (a
// region's entry and the all-regions one), work on its own reservation
// not at all, and active reservations' whole capacity (shown as Reserved,
// and part of CurrentValue).
func usage(wd *world, tenants []string, region string, now time.Time) []api.Usage {
	tree := wd.Tree
	running := runningLedger(wd)
	reserved := tenancy.NewLedger(tree)
	tree.ChargeReservations(reserved, wd.reservations(), wd.Catalog, now)
	sc := newScope(wd, now)
	out := []api.Usage{}
	for _, name := range tenants {
		ti, ok := tree.Lookup(name)
		if !ok {
			continue
		}
		for qi, q := range tree.Tenants[ti].Quotas {
			if region != "" && q.Key.Region != "" && q.Key.Region != region {
				continue
			}
			ref := tenancy.Ref{Tenant: ti, Entry: qi}
			run := running.At(ref)
			u := api.Usage{
				Name: string(q.Key.Model) + " GPUs", Tenant: name, Region: q.Key.Region, Flavor: string(q.Key.Model),
				CurrentValue: gpus(run.Add(reserved.At(ref))), Reserved: gpus(reserved.At(ref)),
				Guaranteed: gpus(q.Guaranteed), Unit: "GPUs",
				Borrowed: gpus(run.Sub(q.Guaranteed)), Idle: gpus(q.Guaranteed.Sub(run)),
			}
			if idle := q.Guaranteed.Sub(run); idle > 0 {
				u.Lent = gpus(lent(idle, sc.free(ti, q.Key)))
			}
			if p := tree.Tenants[ti].Parent; p >= 0 {
				u.Parent = tree.Tenants[p].Name
			}
			if u.Region == "" {
				u.Region = "*"
				u.Name += " (all regions)"
			}
			if q.Limit != tenancy.Unlimited {
				l := gpus(q.Limit)
				u.Limit = &l
			}
			out = append(out, u)
		}
	}
	return out
}

// lent is the part of an entry's idle guarantee that no free GPU could
// serve: if the subtree claimed all of it now, free GPUs would be taken
// first and the rest reclaimed from others' work (siblings' within the
// subtree's parent guarantee, or borrowers outside). With guarantees
// within capacity, others' work is at least that much beyond their own
// guarantees (docs/tenants.md).
func lent(idle, free resource.MilliGPU) resource.MilliGPU {
	return max(0, idle-max(0, free))
}

// scope answers how many GPUs are free now to a tenant in a quota key:
// on nodes up and open to new work, of the key's model and region (any
// region for an all-regions entry), outside active reservations' bound
// machines and outside partitions of other subtrees, less what running
// work holds there. The fleet is read once, into free GPUs per model,
// region and partition owner.
type scope struct {
	tree   *tenancy.Tree
	groups map[scopeGroup]resource.MilliGPU
}

// scopeGroup is a model, a region and the tenant whose partition the
// nodes are in (-1: none).
type scopeGroup struct {
	model  fleet.ModelID
	region string
	owner  int
}

func newScope(wd *world, now time.Time) *scope {
	sc := &scope{tree: wd.Tree, groups: map[scopeGroup]resource.MilliGPU{}}
	if wd.Fleet == nil {
		return sc
	}
	closed := map[fleet.NodeID]bool{} // down, cordoned or reserved
	for _, id := range wd.Down {
		closed[id] = true
	}
	for _, id := range wd.Cordoned {
		closed[id] = true
	}
	for _, r := range wd.Reservations {
		if (r.Start.IsZero() || !r.Start.After(now)) && (r.End.IsZero() || r.End.After(now)) {
			for _, id := range r.Nodes {
				closed[id] = true
			}
		}
	}
	owner := map[fleet.NodeID]int{}
	for _, p := range wd.Partitions {
		t, ok := wd.Tree.Lookup(p.Tenant)
		if !ok {
			continue
		}
		for _, id := range p.Nodes {
			owner[id] = t
		}
		for _, b := range p.Blocks {
			for _, n := range wd.Fleet.BlockNodes(b) {
				owner[n.ID] = t
			}
		}
	}
	held := map[fleet.NodeID]resource.MilliGPU{}
	for _, x := range wd.Workloads {
		if x.Running == nil {
			continue
		}
		for _, r := range x.Running.Replicas {
			m := resource.MilliGPU(r.Milli)
			if m <= 0 {
				m = resource.PerGPU
			}
			held[r.Node] += m * resource.MilliGPU(len(r.GPUs))
		}
	}
	for _, n := range wd.Fleet.Nodes {
		if closed[n.ID] {
			continue
		}
		g := scopeGroup{model: n.Model, region: n.Region, owner: -1}
		if o, ok := owner[n.ID]; ok {
			g.owner = o
		}
		sc.groups[g] += max(0, resource.MilliGPU(n.GPUs)*resource.PerGPU-held[n.ID])
	}
	return sc
}

// free is the GPUs free now to tenant t in key k.
func (sc *scope) free(t int, k tenancy.Key) resource.MilliGPU {
	var free resource.MilliGPU
	for g, v := range sc.groups {
		if g.model == k.Model && (k.Region == "" || g.region == k.Region) && (g.owner < 0 || sc.tree.InSubtree(t, g.owner)) {
			free += v
		}
	}
	return free
}

// otherReservations is wd's reservations but res, as the tenancy model.
func otherReservations(wd *world, res *store.Reservation) []tenancy.Reservation {
	var out []tenancy.Reservation
	for _, o := range wd.Reservations {
		if o.Key() != res.Key() {
			out = append(out, reservationModel(o))
		}
	}
	return out
}

// admitReservation refuses (409 QuotaExceeded, naming the limit and the
// numbers) a reservation whose capacity would take its owner, or an
// ancestor, above a limit: running work outside reservations (for a
// window opening later than now, only the work still expected to run
// then), plus the other reservations that overlap it in time, plus its
// own capacity. res holds the new (or resized) count; wd's reservations
// must not include it.
func admitReservation(wd *world, res *store.Reservation, now time.Time) error {
	r := reservationModel(res)
	others := otherReservations(wd, res)
	var at time.Time
	if res.Start.After(now) {
		at = res.Start
	}
	err := wd.Tree.AdmitReservation(&r, others, runningLedgerAt(wd, at), wd.Catalog)
	var ol *tenancy.OverLimitError
	if errors.As(err, &ol) {
		return apiErr(http.StatusConflict, api.CodeQuotaExceeded, "capacity", "%v", ol)
	}
	return err
}
