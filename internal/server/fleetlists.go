package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/names"
	"github.com/arbiterhq/arbiter/internal/store"
)

// Lists across tenants. GET /v1/workloads, GET /v1/reservations and
// GET /v1/events show the admin the whole fleet and a tenant token its
// own objects only (tenantScoped routes without {tenant}: the handler
// filters, with ownPrefix or eventScopeOf). ?name= on the first two keeps
// the objects of one name, one per tenant at most: the CLI uses it to find
// which tenant holds a workload an admin names without --tenant.

// ownPrefix is the key prefix of what p may list: every tenant's for the
// admin, its own tenant's for a tenant token.
func ownPrefix(p principal) string {
	if p.admin {
		return ""
	}
	return p.tenant + "/"
}

// nameParam reads ?name=, which must be a valid object name when given.
func nameParam(q url.Values) (string, error) {
	v, ok := q["name"]
	if !ok {
		return "", nil
	}
	if !validName(v[0]) {
		return "", apiErr(http.StatusBadRequest, api.CodeInvalid, "name", "name: %s, got %q", names.Rule, clip(v[0], 64))
	}
	return v[0], nil
}

// scanNamed fills the page with the objects of T's kind named name under
// prefix ("": every tenant's, "t/": t's), in key order from the page's
// start; conv is scanPage's. It reads one key per tenant, not every
// object of the kind.
func scanNamed[T any, PT interface {
	*T
	store.Object
}](tx store.ReadTx, p *page, prefix, name string, conv func(PT) (any, bool)) error {
	var zero PT
	var keys []string
	if t, ok := strings.CutSuffix(prefix, "/"); ok {
		keys = []string{store.WorkloadKey(t, name)} // workloads and reservations share the tenant/name key
	} else {
		tx.ScanRaw(store.KindTenant, "", "", func(t string, _ []byte) bool {
			keys = append(keys, store.WorkloadKey(t, name))
			return true
		})
		slices.Sort(keys) // "a-b/x" sorts before "a/x"
	}
	for _, key := range keys {
		if p.skip(key) {
			continue
		}
		data, ok := tx.GetRaw(zero.Kind(), key)
		if !ok {
			continue
		}
		v := PT(new(T))
		if err := json.Unmarshal(data, v); err != nil {
			return fmt.Errorf("server: decoding %s %q: %w", zero.Kind(), key, err)
		}
		out, ok := conv(v)
		if !ok {
			continue
		}
		if !p.add(key, out) {
			break
		}
	}
	return nil
}

// eventScope is whose events a request reads: the whole log, or one
// tenant's.
type eventScope struct {
	all    bool
	tenant string
}

// eventScopeOf is the scope of an events request: the admin reads the
// whole log, a tenant token its own events. With ?tenant=T the admin reads
// T's (404 for a tenant that does not exist) and a tenant token may name
// only itself: another tenant answers 404, as one that does not exist.
func (s *Server) eventScopeOf(r *http.Request) (eventScope, error) {
	p := who(r)
	want, asked := r.URL.Query()["tenant"]
	switch {
	case !asked && p.admin:
		return eventScope{all: true}, nil
	case !asked:
		return eventScope{tenant: p.tenant}, nil
	case !p.admin:
		if want[0] != p.tenant {
			return eventScope{}, notFound("tenant", clip(want[0], 64))
		}
		return eventScope{tenant: p.tenant}, nil
	}
	t := want[0]
	exists := false
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		_, exists = tx.GetRaw(store.KindTenant, t)
		return nil
	})
	if err != nil {
		return eventScope{}, err
	}
	if !validName(t) || !exists {
		return eventScope{}, notFound("tenant", clip(t, 64))
	}
	return eventScope{tenant: t}, nil
}
