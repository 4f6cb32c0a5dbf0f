package server

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// matrixBodies are the request bodies of the matrix's writes: valid
// enough to reach the handler's permission checks.
var matrixBodies = map[string]string{
	"POST /v1/nodes":                                    `{"id":"eus-a-n0000","region":"eastus","zone":"1","block":"eus-a","sku":"Standard_ND96amsr_A100_v4"}`,
	"POST /v1/tenants":                                  `{"name":"evil"}`,
	"PUT /v1/tenants/{tenant}/quotas":                   `{"quotas":[]}`,
	"POST /v1/tenants/{tenant}/tokens":                  `{"name":"steal"}`,
	"POST /v1/tenants/{tenant}/reservations":            `{"name":"r9","sku":"Standard_ND96isr_H100_v5","capacity":1,"region":"eastus"}`,
	"PATCH /v1/tenants/{tenant}/reservations/{name}":    `{"capacity":1}`,
	"POST /v1/tenants/{tenant}/workloads":               `{"name":"j9","gpus":1,"flavors":["A100-80G"],"regions":["eastus"]}`,
	"POST /v1/policies":                                 `{"name":"p","source":"policies: []"}`,
	"PUT /v1/alerts":                                    `{"source":"rules: []"}`,
	"POST /v1/nodes/{id}/heartbeat":                     `{"gpus":[],"running":[]}`,
	"POST /v1/nodes/{id}/tokens":                        `{"name":"steal"}`,
	"PATCH /v1/nodes/{id}":                              `{"drained":false}`,
	"PUT /v1/partitions/{name}":                         `{"tenant":"contoso","nodes":["wus-a-n0001"]}`,
	"POST /v1/metrics":                                  `{"samples":[{"metric":"p95_latency","target":"service:chat","value":0.2}]}`,
	"POST /v1/tokens":                                   `{"role":"tenant","tenant":"contoso","name":"steal"}`,
	"POST /v1/tenants/{tenant}/workloads/{name}/cancel": ``,
}

// TestRouteRoleMatrix (issue 12, items 5 and 8): every route of the
// route table (new routes are covered as they are added) and /metrics,
// called by every role with tenant A's and node N's objects in the path.
// Each answer's status class is what the role permits, and no answer to
// anyone but A and the admin holds A's secret (a workload's command.env);
// no answer to anyone holds a token's secret or hash it did not just
// create.
func TestRouteRoleMatrix(t *testing.T) {
	var now atomic.Pointer[time.Time]
	t0 := time.Now()
	now.Store(&t0)
	clock := func() time.Time { return *now.Load() }
	h := newHarness(t, testConfig, Options{RateLimit: -1, SourceRateLimit: -1, Clock: clock})
	ctx := h.ctx
	const tenantA, tenantB, nodeN = "contoso", "fabrikam", "eus-a-n0000"
	const planted = "PLANTED-SECRET-7f3a9c"

	mk := func(req api.TokenCreate) api.Token {
		t.Helper()
		tok, err := h.admin.CreateTokenOf(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	a := mk(api.TokenCreate{Role: "tenant", Tenant: tenantA, Name: "a"})
	victim := mk(api.TokenCreate{Role: "tenant", Tenant: tenantA, Name: "victim"}) // the {id} of the token routes
	b := mk(api.TokenCreate{Role: "tenant", Tenant: tenantB, Name: "b"})
	n := mk(api.TokenCreate{Role: "node", Node: nodeN})
	m := mk(api.TokenCreate{Role: "metrics"})
	expired := mk(api.TokenCreate{Role: "admin", Name: "old", ExpiresIn: api.Duration(time.Minute)})
	revoked := mk(api.TokenCreate{Role: "admin", Name: "gone"})
	if err := h.admin.RevokeToken(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(2 * time.Minute)
	now.Store(&later)

	// Tenant A's objects: a running workload whose command carries the
	// secret (on an H100 machine, so not on node N), a reservation.
	sp := api.WorkloadSpec{Name: "secret-job", GPUs: api.GPUs(8000), Replicas: 1, Flavors: []string{"H100-80G"}, Regions: []string{"eastus"},
		Command: &api.Command{Argv: []string{"train"}, Env: map[string]string{"SECRET": planted}}}
	ac := client.New(h.url, a.Secret)
	if _, err := ac.Submit(ctx, tenantA, sp); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.CreateReservation(ctx, tenantA, api.ReservationRequest{Name: "secret-res", SKU: "Standard_ND96amsr_A100_v4", Capacity: 1, Region: "westus2"}); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(ctx)
	if w, err := ac.Workload(ctx, tenantA, "secret-job"); err != nil || w.State != "Running" || w.Running.Replicas[0].Node == nodeN {
		t.Fatalf("the planted workload: %+v %v", w, err)
	}

	type role struct {
		name, secret string
		// allowed: the route is the role's to call (any answer but 401,
		// 403 and 500); hidden: it is another tenant's (404); else 403,
		// or 401 for the roles that have no valid token.
		class func(pattern string) int
		// seesA: the role may see A's secret.
		seesA bool
	}
	const (
		allowed = iota
		hidden
		forbidden
		unauth
	)
	// access is each route's rule as this test pins it: loosening a
	// route's rule in the route table fails here until the test agrees.
	rule := map[string]access{"GET /metrics": metricsScrape}
	for _, rt := range h.s.apiRoutes() {
		want, ok := pinnedAccess[rt.pattern]
		if !ok {
			t.Errorf("route %s has no pinned access rule: add it to pinnedAccess", rt.pattern)
		} else if rt.auth != want {
			t.Errorf("route %s: access %s in the route table, pinned %s", rt.pattern, rt.auth, want)
		}
		rule[rt.pattern] = want
	}
	is := func(p string, rules ...access) bool {
		for _, a := range rules {
			if rule[p] == a {
				return true
			}
		}
		return false
	}
	roles := []role{
		{"no token", "", func(string) int { return unauth }, false},
		{"unknown token", "arb_unknown-unknown-unknown-unknown", func(string) int { return unauth }, false},
		{"expired token", expired.Secret, func(string) int { return unauth }, false},
		{"revoked token", revoked.Secret, func(string) int { return unauth }, false},
		{"metrics", m.Secret, func(p string) int {
			if is(p, metricsScrape, anyAuthenticated) {
				return allowed
			}
			return forbidden
		}, false},
		{"node N", n.Secret, func(p string) int {
			if is(p, nodeSelf, catalogRead, anyAuthenticated) {
				return allowed
			}
			return forbidden
		}, false},
		{"tenant B", b.Secret, func(p string) int {
			switch {
			case is(p, adminOnly, nodeSelf, metricsScrape):
				return forbidden
			case strings.Contains(p, "{tenant}") || strings.HasPrefix(strings.SplitN(p, " ", 2)[1], "/v1/tokens/") || p == "POST /v1/tokens":
				return hidden
			}
			return allowed
		}, false},
		{"tenant A", a.Secret, func(p string) int {
			if is(p, adminOnly, nodeSelf, metricsScrape) {
				return forbidden
			}
			return allowed
		}, true},
		{"admin", testAdmin, func(string) int { return allowed }, true},
	}
	never := []string{testAdmin, a.Secret, victim.Secret, b.Secret, n.Secret, m.Secret, expired.Secret, revoked.Secret}
	for _, s := range never[:len(never):len(never)] {
		never = append(never, HashToken(s))
	}
	patterns := []string{"GET /metrics"}
	for _, rt := range h.s.apiRoutes() {
		patterns = append(patterns, rt.pattern)
	}
	calls, leaks := 0, 0
	for _, rl := range roles { // admin last: its writes delete A's objects
		for _, pat := range patterns {
			method, path, _ := strings.Cut(pat, " ")
			name := "secret-job"
			switch {
			case strings.Contains(path, "reservations"):
				name = "secret-res"
			case strings.Contains(path, "partitions"):
				name = "part-a"
			case strings.Contains(path, "policies"):
				name = "p"
			}
			id := nodeN
			if strings.HasPrefix(path, "/v1/tokens/") {
				id = victim.ID
			}
			path = strings.NewReplacer("{tenant}", tenantA, "{name}", name, "{id}", id).Replace(path)
			req, _ := http.NewRequest(method, h.url+path, bytes.NewBufferString(matrixBodies[pat]))
			if rl.secret != "" {
				req.Header.Set("Authorization", "Bearer "+rl.secret)
			}
			if matrixBodies[pat] != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			calls++
			st := resp.StatusCode
			t.Logf("matrix\t%s\t%s\t%d", rl.name, pat, st) // -v: the statuses, to compare across a change
			switch want := rl.class(pat); want {
			case allowed:
				if st == 401 || st == 403 || st >= 500 && st != 503 {
					t.Errorf("%s: %s: %d, want it allowed: %s", rl.name, pat, st, body)
				}
			case hidden:
				if st != 404 {
					t.Errorf("%s: %s: %d, want 404 (another tenant's): %s", rl.name, pat, st, body)
				}
			case forbidden:
				if st != 403 {
					t.Errorf("%s: %s: %d, want 403: %s", rl.name, pat, st, body)
				}
			case unauth:
				if st != 401 {
					t.Errorf("%s: %s: %d, want 401: %s", rl.name, pat, st, body)
				}
			}
			if !rl.seesA && bytes.Contains(body, []byte(planted)) {
				leaks++
				t.Errorf("%s: %s shows tenant A's secret: %s", rl.name, pat, body)
			}
			for _, s := range never {
				if bytes.Contains(body, []byte(s)) {
					leaks++
					t.Errorf("%s: %s shows a token's secret or hash: %s", rl.name, pat, body)
				}
			}
		}
	}
	t.Logf("route × role matrix: %d routes × %d roles = %d calls, %d leaks", len(patterns), len(roles), calls, leaks)
}

// pinnedAccess is every API route's access rule (routes.go), written
// out again so that a rule cannot get looser by one edit.
var pinnedAccess = map[string]access{
	"GET /v1/probes":                                    adminOnly,
	"GET /v1/usage-records":                             tenantScoped,
	"GET /v1/cost-report":                               tenantScoped,
	"GET /v1/advisor":                                   tenantScoped,
	"GET /v1/ui/fleet":                                  tenantScoped,
	"GET /v1/ui/queue":                                  tenantScoped,
	"GET /v1/ui/series":                                 tenantScoped,
	"PUT /v1/probes":                                    adminOnly,
	"GET /v1/whoami":                                    anyAuthenticated,
	"GET /v1/cluster":                                   catalogRead,
	"GET /v1/regions":                                   tenantScoped,
	"GET /v1/spot-prices":                               tenantScoped,
	"GET /v1/skus":                                      catalogRead,
	"GET /v1/nodes":                                     adminOnly,
	"POST /v1/nodes":                                    nodeSelf,
	"GET /v1/nodes/{id}":                                adminOnly,
	"PATCH /v1/nodes/{id}":                              adminOnly,
	"DELETE /v1/nodes/{id}":                             adminOnly,
	"POST /v1/nodes/{id}/heartbeat":                     nodeSelf,
	"POST /v1/nodes/{id}/tokens":                        adminOnly,
	"GET /v1/tenants":                                   tenantScoped,
	"POST /v1/tenants":                                  adminOnly,
	"GET /v1/tenants/{tenant}":                          tenantScoped,
	"DELETE /v1/tenants/{tenant}":                       adminOnly,
	"PUT /v1/tenants/{tenant}/quotas":                   adminOnly,
	"PUT /v1/tenants/{tenant}/allowed-priorities":       adminOnly,
	"POST /v1/tenants/{tenant}/tokens":                  adminOnly,
	"GET /v1/tenants/{tenant}/usage":                    tenantScoped,
	"GET /v1/usage":                                     tenantScoped,
	"GET /v1/reservations":                              tenantScoped,
	"GET /v1/tenants/{tenant}/reservations":             tenantScoped,
	"POST /v1/tenants/{tenant}/reservations":            tenantScoped,
	"GET /v1/tenants/{tenant}/reservations/{name}":      tenantScoped,
	"PATCH /v1/tenants/{tenant}/reservations/{name}":    tenantScoped,
	"DELETE /v1/tenants/{tenant}/reservations/{name}":   tenantScoped,
	"GET /v1/workloads":                                 tenantScoped,
	"GET /v1/tenants/{tenant}/workloads":                tenantScoped,
	"POST /v1/tenants/{tenant}/workloads":               tenantScoped,
	"GET /v1/tenants/{tenant}/workloads/{name}":         tenantScoped,
	"POST /v1/tenants/{tenant}/workloads/{name}/cancel": tenantScoped,
	"GET /v1/tenants/{tenant}/workloads/{name}/why":     tenantScoped,
	"GET /v1/tenants/{tenant}/workloads/{name}/logs":    tenantScoped,
	"GET /v1/policies":                                  adminOnly,
	"POST /v1/policies":                                 adminOnly,
	"GET /v1/policies/{name}":                           adminOnly,
	"DELETE /v1/policies/{name}":                        adminOnly,
	"GET /v1/policies/{name}/firings":                   adminOnly,
	"POST /v1/metrics":                                  adminOnly,
	"GET /v1/events":                                    tenantScoped,
	"GET /v1/alerts":                                    adminOnly,
	"PUT /v1/alerts":                                    adminOnly,
	"GET /v1/partitions":                                adminOnly,
	"PUT /v1/partitions/{name}":                         adminOnly,
	"DELETE /v1/partitions/{name}":                      adminOnly,
	"GET /v1/tokens":                                    tenantScoped,
	"POST /v1/tokens":                                   tenantScoped,
	"DELETE /v1/tokens/{id}":                            tenantScoped,
	"POST /v1/tokens/{id}/rotate":                       tenantScoped,
}
