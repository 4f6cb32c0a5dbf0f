package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// maxReservation bounds one reservation's machine count.
const maxReservation = 10_000

// reservationOut adds utilization: reserved capacity, what the owner's
// workloads on it use, and what others' preemptible work borrows of it.
func reservationOut(wd *world, r *store.Reservation, now time.Time) api.Reservation {
	return reservationOutWith(wd.Catalog, r, wd.Workloads, now)
}

// reservationOutWith is reservationOut from the live workloads running
// on the reservation's machines (others are ignored).
func reservationOutWith(cat *fleet.Catalog, r *store.Reservation, running []*store.Workload, now time.Time) api.Reservation {
	o := api.Reservation{Name: r.Name, Tenant: r.Tenant, Region: r.Region, Zone: r.Zone, SKU: string(r.SKU),
		Capacity: r.Count, Start: r.Start, End: r.End, State: reservationState(r, now), Nodes: []string{}, Revision: r.Meta.Revision}
	on := map[fleet.NodeID]bool{}
	for _, n := range r.Nodes {
		o.Nodes = append(o.Nodes, string(n))
		on[n] = true
	}
	if sku, ok := cat.SKU(r.SKU); ok {
		o.ReservedGPUs = api.GPUs(resource.GPUs(sku.GPUs * r.Count))
	}
	for _, x := range running {
		if x.Running == nil {
			continue
		}
		mine := x.Tenant == r.Tenant && x.Running.OnReservation && x.Spec.Reservation == r.Name
		for _, rep := range x.Running.Replicas {
			if !on[rep.Node] {
				continue
			}
			g := replicaGPUs(rep.Milli, len(rep.GPUs), x.Spec.GPUs)
			if mine {
				o.AllocatedGPUs += api.GPUs(g)
			} else {
				o.BorrowedGPUs += api.GPUs(g)
			}
		}
	}
	return o
}

func (s *Server) listReservations(w http.ResponseWriter, r *http.Request) error {
	tenant := r.PathValue("tenant") // the router checked it is the caller's (tenantScoped)
	return s.listReservationsWith(w, r, tenant+"/")
}

// listAllReservations lists every tenant's reservations for the admin and
// the caller's own for a tenant token; ?name= keeps those of that name.
func (s *Server) listAllReservations(w http.ResponseWriter, r *http.Request) error {
	return s.listReservationsWith(w, r, ownPrefix(who(r)))
}

func (s *Server) listReservationsWith(w http.ResponseWriter, r *http.Request, prefix string) error {
	name, err := nameParam(r.URL.Query())
	if err != nil {
		return err
	}
	pg, err := s.newPage(r)
	if err != nil {
		return err
	}
	// The reservations under prefix and the work on their machines: no
	// pass over other tenants' objects.
	cat, now := s.cat.Load(), s.now()
	err = s.st.View(r.Context(), func(tx store.ReadTx) error {
		var rerr error
		conv := func(x *store.Reservation) (any, bool) {
			running, err := s.live.runningOn(tx, x.Nodes)
			if err != nil {
				rerr = err
			}
			return reservationOutWith(cat, x, running, now), true
		}
		if name != "" {
			return errors.Join(scanNamed(tx, pg, prefix, name, conv), rerr)
		}
		return errors.Join(scanPage(tx, pg, prefix, conv), rerr)
	})
	if err != nil {
		return err
	}
	pg.write(w)
	return nil
}

func findReservation(wd *world, tenant, name string) *store.Reservation {
	for _, x := range wd.Reservations {
		if x.Tenant == tenant && x.Name == name {
			return x
		}
	}
	return nil
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request) error {
	tenant := r.PathValue("tenant") // the router checked it is the caller's (tenantScoped)
	var out api.Reservation
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		x, err := store.Get[store.Reservation](tx, store.ReservationKey(tenant, r.PathValue("name")))
		if err != nil {
			return notFound("reservation", r.PathValue("name"))
		}
		running, err := s.live.runningOn(tx, x.Nodes)
		if err != nil {
			return err
		}
		out = reservationOutWith(s.cat.Load(), x, running, s.now())
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// createReservation binds the whole capacity or nothing (409
// InsufficientCapacity, naming what is available), within the owner's
// quota limits (409 QuotaExceeded, see admitReservation).
func (s *Server) createReservation(w http.ResponseWriter, r *http.Request) error {
	tenant := r.PathValue("tenant") // the router checked it is the caller's (tenantScoped)
	var req api.ReservationRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	switch {
	case req.Tenant != "" && req.Tenant != tenant:
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "tenant", "tenant %q differs from the tenant in the path; leave it out", req.Tenant)
	case !validName(req.Name):
		return badName("name", req.Name)
	case req.Capacity < 1 || req.Capacity > maxReservation:
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "capacity", "capacity must be between 1 and %d machines, got %d", maxReservation, req.Capacity)
	case req.Region == "":
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "region", "a reservation needs a region")
	case !validName(req.Region):
		return badName("region", req.Region)
	case req.Zone != "" && !validName(req.Zone):
		return badName("zone", req.Zone)
	}
	now := s.now()
	if err := checkWindow(req.Start, req.End, now); err != nil {
		return err
	}
	if _, ok := s.cat.Load().SKU(fleet.SKUName(req.SKU)); !ok {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "sku", "unknown SKU %q (see GET /v1/skus)", req.SKU)
	}
	var wd *world
	var res *store.Reservation
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		if err := tenantExists(tx, tenant); err != nil {
			return err
		}
		if _, ok := tx.GetRaw(store.KindReservation, store.ReservationKey(tenant, req.Name)); ok {
			return apiErr(http.StatusConflict, api.CodeConflict, "name", "reservation %q already exists", req.Name)
		}
		if err := s.checkReservationCount(tx, tenant); err != nil {
			return err
		}
		var err error
		if wd, err = loadWorld(tx, s.cat.Load(), true); err != nil {
			return err
		}
		if !wd.Fleet.HasRegion(req.Region) {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "region", "region %q is not in the fleet (see GET /v1/regions)", req.Region)
		}
		if err := checkZone(wd, req.Region, req.Zone); err != nil {
			return err
		}
		res = &store.Reservation{Tenant: tenant, Name: req.Name, Region: req.Region, Zone: req.Zone, SKU: fleet.SKUName(req.SKU), Count: req.Capacity, Start: req.Start, End: req.End}
		if err := checkCalendar(wd, res, s.plannedBookings(wd), now); err != nil {
			return err
		}
		// Machines are chosen when the window approaches (bindApproaching);
		// one that opens within the lead time is bound now.
		if m := reservationModel(res); m.BindDue(now) {
			if res.Nodes, err = bindReservation(wd, res, res.Count, now); err != nil {
				return err
			}
		}
		if err := admitReservation(wd, res, now); err != nil {
			return err
		}
		if err := store.Put(tx, res, store.MustNotExist); err != nil {
			return err
		}
		wd.Reservations = append(wd.Reservations, res)
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: store.EventReservationCreated, Object: store.ReservationObject(res.Key()), Tenant: tenant,
			Message: fmt.Sprintf("%d × %s in %s%s", res.Count, res.SKU, res.Region, windowText(res))})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	writeJSON(w, http.StatusCreated, reservationOut(wd, res, now))
	return nil
}

// resizeReservation shrinks (always succeeds: the machines the owner uses
// least are released) or grows (all of the extra capacity or nothing).
func (s *Server) resizeReservation(w http.ResponseWriter, r *http.Request) error {
	tenant := r.PathValue("tenant") // the router checked it is the caller's (tenantScoped)
	name := r.PathValue("name")
	var req api.Resize
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.Capacity < 1 || req.Capacity > maxReservation {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "capacity", "capacity must be between 1 and %d machines, got %d (delete the reservation to release it all)", maxReservation, req.Capacity)
	}
	var wd *world
	var res *store.Reservation
	now := s.now()
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		var err error
		if wd, err = loadWorld(tx, s.cat.Load(), true); err != nil {
			return err
		}
		if res = findReservation(wd, tenant, name); res == nil {
			return notFound("reservation", name)
		}
		switch {
		case req.Capacity < res.Count:
			if len(res.Nodes) > req.Capacity {
				res.Nodes, _ = tenancy.Shrink(res.Nodes, reservationUse(wd.Workloads, tenant, name), req.Capacity)
			}
		case req.Capacity > res.Count:
			grown := *res
			grown.Count = req.Capacity
			if err := checkCalendar(wd, &grown, s.plannedBookings(wd), now); err != nil {
				return err
			}
			var ids []fleet.NodeID
			if m := reservationModel(res); m.BindDue(now) {
				if ids, err = bindReservation(wd, res, req.Capacity-len(res.Nodes), now); err != nil {
					return err
				}
			}
			if err := admitReservation(wd, &grown, now); err != nil {
				return err
			}
			res.Nodes = append(res.Nodes, ids...)
		default:
			return nil
		}
		old := res.Count
		res.Count = req.Capacity
		if err := store.Put(tx, res, res.Meta.Revision); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: store.EventReservationResized, Object: store.ReservationObject(res.Key()), Tenant: tenant,
			Message: fmt.Sprintf("capacity %d -> %d", old, res.Count)})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	writeJSON(w, http.StatusOK, reservationOut(wd, res, now))
	return nil
}

// reservationUse is how many GPUs the running work of tenant on its
// reservation name holds on each machine.
func reservationUse(ws []*store.Workload, tenant, name string) map[fleet.NodeID]int {
	use := map[fleet.NodeID]int{}
	for _, x := range ws {
		if x.Running != nil && x.Tenant == tenant && x.Spec.Reservation == name {
			for _, rep := range x.Running.Replicas {
				use[rep.Node] += len(rep.GPUs)
			}
		}
	}
	return use
}

// deleteReservation fails while live workloads name the reservation (as
// a cloud refuses to delete a reservation with associated machines).
func (s *Server) deleteReservation(w http.ResponseWriter, r *http.Request) error {
	tenant := r.PathValue("tenant") // the router checked it is the caller's (tenantScoped)
	name := r.PathValue("name")
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		key := store.ReservationKey(tenant, name)
		if _, ok := tx.GetRaw(store.KindReservation, key); !ok {
			return notFound("reservation", name)
		}
		ws, err := store.List[store.Workload](tx, tenant+"/")
		if err != nil {
			return err
		}
		for _, x := range ws {
			if x.State.Live() && x.Spec.Reservation == name {
				return apiErr(http.StatusConflict, api.CodeConflict, "", "workload %q uses reservation %q; cancel it first", x.Spec.Name, name)
			}
		}
		if err := store.Delete(tx, store.KindReservation, key); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: store.EventReservationDeleted, Object: store.ReservationObject(key), Tenant: tenant})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkZone refuses a zone that no machine of the region is in.
func checkZone(wd *world, region, zone string) error {
	if zone == "" {
		return nil
	}
	for _, n := range wd.Fleet.Nodes {
		if n.Region == region && n.Zone == zone {
			return nil
		}
	}
	return apiErr(http.StatusBadRequest, api.CodeInvalid, "zone", "zone %q is not a zone of region %s (see GET /v1/regions)", zone, region)
}
