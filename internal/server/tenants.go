package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// Tenant handlers: create, show, list, delete (the integrity checks in
// tenantdelete.go), quotas, and tenant tokens.

func tenantOut(t *store.Tenant) api.Tenant {
	o := api.Tenant{Name: t.Name, Parent: t.Parent, Revision: t.Meta.Revision, AllowedPriorities: tenancy.AllowedSet(t.AllowedPriorities).Names()}
	for _, q := range t.Quotas {
		aq := api.Quota{Flavor: string(q.Flavor), Region: q.Region, Guaranteed: api.GPUs(q.Guaranteed), Weight: q.Weight, Priority: q.Priority}
		if q.Limit != nil {
			l := api.GPUs(*q.Limit)
			aq.Limit = &l
		}
		if q.Lendable != nil {
			l := api.GPUs(*q.Lendable)
			aq.Lendable = &l
		}
		o.Quotas = append(o.Quotas, aq)
	}
	return o
}

// quotasIn validates quota entries and converts them.
func (s *Server) quotasIn(qs []api.Quota, prefix string) ([]store.Quota, error) {
	cat := s.cat.Load()
	seen := map[tenancy.Key]bool{}
	var out []store.Quota
	if len(qs) > 256 {
		return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, prefix, "at most 256 quota entries")
	}
	for i, q := range qs {
		f := fmt.Sprintf("%s[%d]", prefix, i)
		if _, ok := cat.Model(fleet.ModelID(q.Flavor)); !ok {
			return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, f+".flavor", "unknown GPU model %q (known: %v)", q.Flavor, cat.ModelNames())
		}
		if q.Region != "" && !validName(q.Region) {
			return nil, badName(f+".region", q.Region)
		}
		k := tenancy.Key{Model: fleet.ModelID(q.Flavor), Region: q.Region}
		if seen[k] {
			return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, f, "second quota entry for %s", k)
		}
		seen[k] = true
		sq := store.Quota{Flavor: k.Model, Region: q.Region, Guaranteed: resource.MilliGPU(q.Guaranteed), Weight: q.Weight, Priority: q.Priority}
		if q.Limit != nil {
			l := resource.MilliGPU(*q.Limit)
			if l < sq.Guaranteed {
				return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, f+".limit", "limit %v is below guaranteed %v", l, sq.Guaranteed)
			}
			sq.Limit = &l
		}
		if q.Lendable != nil {
			l := resource.MilliGPU(*q.Lendable)
			if l > sq.Guaranteed {
				return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, f+".lendable", "lendable %v is more than guaranteed %v", l, sq.Guaranteed)
			}
			sq.Lendable = &l
		}
		if q.Weight < 0 || q.Weight > 1e6 || q.Weight != q.Weight {
			return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, f+".weight", "weight must be between 0 and 1000000")
		}
		if q.Priority < -1_000_000 || q.Priority > 1_000_000 {
			return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, f+".priority", "priority must be between -1000000 and 1000000, got %d", q.Priority)
		}
		out = append(out, sq)
	}
	return out, nil
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) error {
	p := who(r)
	pg, err := s.newPage(r)
	if err != nil {
		return err
	}
	err = s.st.View(r.Context(), func(tx store.ReadTx) error {
		if p.admin {
			return scanPage(tx, pg, "", func(t *store.Tenant) (any, bool) { return tenantOut(t), true })
		}
		// A tenant reads its own object, not the list of everyone's.
		t, err := store.Get[store.Tenant](tx, p.tenant)
		if err == nil && p.tenant != "" && !pg.skip(t.Name) {
			pg.add(t.Name, tenantOut(t))
		}
		return nil
	})
	if err != nil {
		return err
	}
	pg.write(w)
	return nil
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("tenant") // the router checked it is the caller's (tenantScoped)
	var t *store.Tenant
	var fs *api.FairShare
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		var err error
		if t, err = store.Get[store.Tenant](tx, name); err != nil {
			return err
		}
		fs, err = s.fairShareOut(tx, name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return notFound("tenant", name)
	}
	if err != nil {
		return err
	}
	o := tenantOut(t)
	o.FairShare = fs
	writeJSON(w, http.StatusOK, o)
	return nil
}

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) error {
	var req api.Tenant
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if !validName(req.Name) {
		return badName("name", req.Name)
	}
	qs, err := s.quotasIn(req.Quotas, "quotas")
	if err != nil {
		return err
	}
	allowed, err := prioritiesIn(req.AllowedPriorities, req.AllowedPriorities != nil)
	if err != nil {
		return err
	}
	t := &store.Tenant{Name: req.Name, Parent: req.Parent, Quotas: qs, AllowedPriorities: allowed}
	err = s.st.Update(r.Context(), func(tx store.WriteTx) error {
		if req.Parent != "" {
			if _, ok := tx.GetRaw(store.KindTenant, req.Parent); !ok {
				return apiErr(http.StatusBadRequest, api.CodeInvalid, "parent", "unknown parent tenant %q", req.Parent)
			}
		}
		if err := store.Put(tx, t, store.MustNotExist); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: store.EventTenantCreated, Object: store.TenantObject(t.Name), Tenant: t.Name})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	writeJSON(w, http.StatusCreated, tenantOut(t))
	return nil
}

func (s *Server) setQuotas(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("tenant")
	var req api.QuotaList
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	qs, err := s.quotasIn(req.Quotas, "quotas")
	if err != nil {
		return err
	}
	return s.changeTenant(w, r, name, func(t *store.Tenant) { t.Quotas = qs }, store.EventQuotasChanged, "")
}

// changeTenant applies change to a stored tenant in one transaction with
// an event of kind (message msg), and answers the tenant.
func (s *Server) changeTenant(w http.ResponseWriter, r *http.Request, name string, change func(*store.Tenant), kind store.EventKind, msg string) error {
	var t *store.Tenant
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		var err error
		if t, err = store.Get[store.Tenant](tx, name); err != nil {
			return notFound("tenant", name)
		}
		change(t)
		if err := store.Put(tx, t, t.Meta.Revision); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: kind, Object: store.TenantObject(name), Tenant: name, Message: msg})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	writeJSON(w, http.StatusOK, tenantOut(t))
	return nil
}

func (s *Server) deleteTenant(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("tenant")
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		if err := tenantExists(tx, name); err != nil {
			return err
		}
		d, err := loadTenantDependents(tx, name)
		if err != nil {
			return err
		}
		if err := tenantDeleteBlocker(name, d); err != nil {
			return err
		}
		if err := deleteTenantHistory(tx, name); err != nil {
			return err
		}
		if err := revokeTokensOf(tx, name, ""); err != nil {
			return err
		}
		if err := store.Delete(tx, store.KindTenant, name); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: store.EventTenantDeleted, Object: store.TenantObject(name)})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("tenant")
	return s.issueToken(w, r, store.Token{Tenant: name}, "default", func(tx store.ReadTx) error { return tenantExists(tx, name) })
}
