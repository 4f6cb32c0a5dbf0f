package server

import (
	"errors"
	"net/http"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Allowed priority classes. A tenant's list belongs to the tenant: the
// admin submitting on its behalf is bound by it too (the admin changes the
// list instead, PUT /v1/tenants/{t}/allowed-priorities). A child may use
// only what every ancestor's explicit list allows (tenancy.Tenant.Allowed). Policies'
// set_priority is an operator action and may raise running or pending work
// above the list.

// prioritiesIn validates a list of class names (field allowed_priorities).
// set is false when the request left the field out (the default).
func prioritiesIn(names []string, set bool) ([]workload.Priority, error) {
	if !set {
		return nil, nil
	}
	if len(names) == 0 {
		return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, "allowed_priorities", "list at least one priority class (leave the field out for the default: %v)", workload.DefaultAllowed)
	}
	if len(names) > 16 {
		return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, "allowed_priorities", "at most 16 entries")
	}
	var set0 workload.PrioritySet
	for _, n := range names {
		p, err := workload.ParsePriority(n)
		if err != nil {
			return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, "allowed_priorities", "%v", err)
		}
		set0 |= workload.SetOf(p)
	}
	return set0.Classes(), nil
}

// allowedFor returns the classes tenant may use, read in tx: its own list
// (or the default) narrowed by every ancestor's explicit list, as
// tenancy.Tenant.Allowed. A tenant that does not exist answers 404.
func allowedFor(tx store.ReadTx, tenant string) (workload.PrioritySet, error) {
	var allowed workload.PrioritySet
	name := tenant
	for depth := 0; name != ""; depth++ {
		t, err := store.Get[store.Tenant](tx, name)
		if err != nil {
			if name == tenant {
				return 0, notFound("tenant", tenant)
			}
			break // a parent deleted meanwhile: nothing more to narrow
		}
		if depth == 0 {
			allowed = tenancy.AllowedSet(t.AllowedPriorities)
		} else {
			allowed &= tenancy.NarrowedBy(t.AllowedPriorities)
		}
		if depth > 64 {
			break
		}
		name = t.Parent
	}
	return allowed, nil
}

// checkSubmitPriority refuses (403, field priority) a workload whose class
// its tenant may not use, naming what it may.
func checkSubmitPriority(tx store.ReadTx, tenant string, p workload.Priority) error {
	allowed, err := allowedFor(tx, tenant)
	if err != nil {
		return err
	}
	if err := tenancy.CheckPriority(tenant, allowed, p); err != nil {
		if errors.Is(err, tenancy.ErrPriorityNotAllowed) {
			return apiErr(http.StatusForbidden, api.CodeForbidden, "priority", "tenant %q may not submit priority %s; it may use: %v", tenant, p, allowed)
		}
		return err
	}
	return nil
}

// setAllowedPriorities replaces a tenant's allowed classes (admin).
// Workloads already submitted keep their class.
func (s *Server) setAllowedPriorities(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("tenant")
	var req api.AllowedPriorities
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	list, err := prioritiesIn(req.AllowedPriorities, true)
	if err != nil {
		return err
	}
	return s.changeTenant(w, r, name, func(t *store.Tenant) { t.AllowedPriorities = list }, store.EventAllowedPrioritiesChanged, workload.SetOf(list...).String())
}
