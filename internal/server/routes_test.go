package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/store"
)

// TestAccessAuthorize: each access rule of the route table against each
// role, with the path's {tenant} and {id} its own or another's: the
// router refuses what the rule does not allow (403, or 404 for another
// tenant's name), before any handler runs.
func TestAccessAuthorize(t *testing.T) {
	admin := principal{admin: true, role: store.RoleAdmin}
	tenantA := principal{role: store.RoleTenant, tenant: "a"}
	nodeN := principal{role: store.RoleNode, node: "n"}
	metrics := principal{role: store.RoleMetrics}
	req := func(tenant, id string) *http.Request {
		r := httptest.NewRequest("GET", "/x", nil)
		if tenant != "" {
			r.SetPathValue("tenant", tenant)
		}
		if id != "" {
			r.SetPathValue("id", id)
		}
		return r
	}
	cases := []struct {
		rule       access
		p          principal
		tenant, id string
		want       int // 0: allowed
	}{
		{adminOnly, admin, "a", "", 0},
		{adminOnly, tenantA, "a", "", 403},
		{adminOnly, nodeN, "", "n", 403},
		{adminOnly, metrics, "", "", 403},
		{tenantScoped, admin, "b", "", 0},
		{tenantScoped, tenantA, "a", "", 0},
		{tenantScoped, tenantA, "", "", 0},
		{tenantScoped, tenantA, "b", "", 404},
		{tenantScoped, nodeN, "", "", 403},
		{tenantScoped, metrics, "", "", 403},
		{nodeSelf, admin, "", "m", 0},
		{nodeSelf, nodeN, "", "n", 0},
		{nodeSelf, nodeN, "", "", 0}, // POST /v1/nodes: the handler checks the body's ID
		{nodeSelf, nodeN, "", "m", 403},
		{nodeSelf, tenantA, "", "n", 403},
		{nodeSelf, metrics, "", "n", 403},
		{nodeSelf, principal{role: store.RoleNode}, "", "n", 403}, // a node token without a node
		{catalogRead, tenantA, "", "", 0},
		{catalogRead, nodeN, "", "", 0},
		{catalogRead, metrics, "", "", 403},
		{anyAuthenticated, metrics, "", "", 0},
		{anyAuthenticated, nodeN, "", "", 0},
		{metricsScrape, metrics, "", "", 0},
		{metricsScrape, admin, "", "", 0},
		{metricsScrape, tenantA, "", "", 403},
		{metricsScrape, nodeN, "", "", 403},
		{access(0), tenantA, "", "", 403}, // a route without a rule admits only the admin
		{access(0), admin, "", "", 0},
	}
	for _, c := range cases {
		err := c.rule.authorize(c.p, req(c.tenant, c.id))
		got := 0
		if err != nil {
			got = (&Server{}).toAPIError(err).Status
		}
		if got != c.want {
			t.Errorf("%s for %s (tenant %q, node %q) on {tenant}=%q {id}=%q: %d, want %d (%v)", c.rule, c.p.role, c.p.tenant, c.p.node, c.tenant, c.id, got, c.want, err)
		}
	}
}

// TestTenantPathsCheckedByRouter: the handlers take a path's {tenant} as
// the caller's own without checking it again, so every route naming one
// must carry a rule under which the router checks it (tenantScoped) or
// admits the admin only.
func TestTenantPathsCheckedByRouter(t *testing.T) {
	s := &Server{}
	for _, rt := range s.apiRoutes() {
		if strings.Contains(rt.pattern, "{tenant}") && rt.auth != tenantScoped && rt.auth != adminOnly {
			t.Errorf("route %s names {tenant} under rule %s: the router would not check the tenant", rt.pattern, rt.auth)
		}
	}
}
