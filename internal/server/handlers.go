// Shared by the handlers of every resource: names, the caller's scope,
// reading the world. The handlers are in one file per resource
// (tenants.go, nodes.go, fleet.go, usage.go, events.go, reservations.go,
// workloads.go, policies.go, tokens.go, ...); the route table is routes.go.

package server

import (
	"net/http"
	"sort"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/names"
	"github.com/arbiterhq/arbiter/internal/store"
)

// validName is the one name rule of the API and the config files (see
// package names).
func validName(n string) bool { return names.Valid(n) }

func badName(field, n string) *api.Error {
	return apiErr(http.StatusBadRequest, api.CodeInvalid, field, "invalid name %q: %s", n, names.Rule)
}

// tenantExists is checked inside transactions (admin paths may name any).
func tenantExists(tx store.ReadTx, t string) error {
	if _, ok := tx.GetRaw(store.KindTenant, t); !ok {
		return notFound("tenant", t)
	}
	return nil
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) error {
	p := who(r)
	writeJSON(w, http.StatusOK, api.WhoAmI{Admin: p.admin, Role: p.role, TokenID: p.id, Tenant: p.tenant, Node: p.node})
	return nil
}

// readWorld loads a world in a read transaction.
func (s *Server) readWorld(r *http.Request, withWorkloads bool) (*world, error) {
	var w *world
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		var err error
		w, err = loadWorldWith(tx, s.cat.Load(), withWorkloads, &s.live)
		return err
	})
	return w, err
}

// ---- sorting helpers ----

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
