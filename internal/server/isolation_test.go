package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// TestIsolation calls every endpoint and verb with another tenant's token:
// no read shows contoso's objects and no write changes them. Tenant-scoped
// paths answer 404 exactly as for a tenant that does not exist;
// admin-only paths answer 403; global lists show only the caller's own.
func TestIsolation(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	ctx := h.ctx
	contosoTok, err := h.admin.CreateToken(ctx, "contoso", "test")
	if err != nil {
		t.Fatal(err)
	}
	contoso := client.New(h.url, contosoTok.Secret)
	fabToken, err := h.admin.CreateToken(ctx, "fabrikam", "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := contoso.CreateReservation(ctx, "contoso", api.ReservationRequest{Name: "secret-res", SKU: "Standard_ND96isr_H100_v5", Capacity: 1, Region: "eastus"}); err != nil {
		t.Fatal(err)
	}
	if _, err := contoso.Submit(ctx, "contoso", spec("secret-job", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(ctx)
	before, err := h.admin.Workloads(ctx, "contoso", "")
	if err != nil {
		t.Fatal(err)
	}

	bodies := map[string]string{
		"POST /v1/nodes":                                    `{"id":"x1","region":"eastus","block":"b","sku":"Standard_ND96isr_H100_v5"}`,
		"POST /v1/tenants":                                  `{"name":"evil"}`,
		"PUT /v1/tenants/{tenant}/quotas":                   `{"quotas":[]}`,
		"PUT /v1/tenants/{tenant}/allowed-priorities":       `{"allowed_priorities":["normal"]}`,
		"POST /v1/tenants/{tenant}/tokens":                  `{"name":"steal"}`,
		"POST /v1/tenants/{tenant}/reservations":            `{"name":"r9","sku":"Standard_ND96isr_H100_v5","capacity":1,"region":"eastus"}`,
		"PATCH /v1/tenants/{tenant}/reservations/{name}":    `{"capacity":1}`,
		"POST /v1/tenants/{tenant}/workloads":               `{"name":"j9","gpus":1,"flavors":["A100-80G"],"regions":["eastus"]}`,
		"POST /v1/policies":                                 `{"name":"p","source":"policies: []"}`,
		"POST /v1/tenants/{tenant}/workloads/{name}/cancel": ``,
		"PUT /v1/alerts":                                    `{"source":"rules: []"}`,
		"PUT /v1/probes":                                    `{"source":"probes: []"}`,
		"POST /v1/nodes/{id}/heartbeat":                     `{"gpus":[],"running":[]}`,
		"POST /v1/nodes/{id}/tokens":                        `{"name":"steal"}`,
		"PATCH /v1/nodes/{id}":                              `{"drained":true}`,
		"PUT /v1/partitions/{name}":                         `{"tenant":"fabrikam","nodes":["eus-a-n0000"]}`,
		"POST /v1/metrics":                                  `{"samples":[{"metric":"p95_latency","target":"service:chat","value":0.2}]}`,
		"POST /v1/tokens":                                   `{"role":"tenant","tenant":"contoso","name":"steal"}`,
	}
	type want int
	const (
		hidden    want = iota // 404
		forbidden             // 403
		ownOnly               // 200, nothing of contoso
		missing               // 404 (contoso's token, by its ID)
	)
	expect := map[string]want{
		"GET /v1/whoami":                                    ownOnly,
		"GET /v1/cluster":                                   ownOnly,
		"GET /v1/regions":                                   ownOnly,
		"GET /v1/skus":                                      ownOnly,
		"GET /v1/spot-prices":                               ownOnly,
		"GET /v1/usage-records":                             ownOnly,
		"GET /v1/cost-report":                               ownOnly,
		"GET /v1/advisor":                                   ownOnly,
		"GET /v1/nodes":                                     forbidden,
		"POST /v1/nodes":                                    forbidden,
		"GET /v1/nodes/{id}":                                forbidden,
		"GET /v1/tenants":                                   ownOnly,
		"POST /v1/tenants":                                  forbidden,
		"GET /v1/tenants/{tenant}":                          hidden,
		"DELETE /v1/tenants/{tenant}":                       forbidden,
		"PUT /v1/tenants/{tenant}/quotas":                   forbidden,
		"PUT /v1/tenants/{tenant}/allowed-priorities":       forbidden,
		"POST /v1/tenants/{tenant}/tokens":                  forbidden,
		"GET /v1/tenants/{tenant}/usage":                    hidden,
		"GET /v1/usage":                                     ownOnly,
		"GET /v1/reservations":                              ownOnly,
		"GET /v1/tenants/{tenant}/reservations":             hidden,
		"POST /v1/tenants/{tenant}/reservations":            hidden,
		"GET /v1/tenants/{tenant}/reservations/{name}":      hidden,
		"PATCH /v1/tenants/{tenant}/reservations/{name}":    hidden,
		"DELETE /v1/tenants/{tenant}/reservations/{name}":   hidden,
		"GET /v1/workloads":                                 ownOnly,
		"GET /v1/tenants/{tenant}/workloads":                hidden,
		"POST /v1/tenants/{tenant}/workloads":               hidden,
		"GET /v1/tenants/{tenant}/workloads/{name}":         hidden,
		"POST /v1/tenants/{tenant}/workloads/{name}/cancel": hidden,
		"GET /v1/tenants/{tenant}/workloads/{name}/why":     hidden,
		"GET /v1/policies":                                  forbidden,
		"POST /v1/policies":                                 forbidden,
		"GET /v1/policies/{name}":                           forbidden,
		"DELETE /v1/policies/{name}":                        forbidden,
		"GET /v1/policies/{name}/firings":                   forbidden,
		"GET /v1/events":                                    ownOnly,
		"GET /v1/probes":                                    forbidden,
		"GET /v1/ui/fleet":                                  ownOnly,
		"GET /v1/ui/queue":                                  ownOnly,
		"GET /v1/ui/series":                                 ownOnly,
		"PUT /v1/probes":                                    forbidden,
		"GET /v1/alerts":                                    forbidden,
		"PUT /v1/alerts":                                    forbidden,
		"POST /v1/nodes/{id}/heartbeat":                     forbidden,
		"POST /v1/nodes/{id}/tokens":                        forbidden,
		"PATCH /v1/nodes/{id}":                              forbidden,
		"DELETE /v1/nodes/{id}":                             forbidden,
		"GET /v1/tenants/{tenant}/workloads/{name}/logs":    hidden,
		"GET /v1/partitions":                                forbidden,
		"POST /v1/metrics":                                  forbidden,
		"PUT /v1/partitions/{name}":                         forbidden,
		"DELETE /v1/partitions/{name}":                      forbidden,
		"GET /v1/tokens":                                    ownOnly,
		"POST /v1/tokens":                                   hidden,
		"DELETE /v1/tokens/{id}":                            missing,
		"POST /v1/tokens/{id}/rotate":                       missing,
	}
	for _, rt := range h.s.apiRoutes() {
		w, ok := expect[rt.pattern]
		if !ok {
			t.Errorf("route %s has no isolation expectation: add it to this test", rt.pattern)
			continue
		}
		method, path, _ := strings.Cut(rt.pattern, " ")
		name := "secret-job"
		if strings.Contains(path, "reservations") {
			name = "secret-res"
		}
		if strings.HasPrefix(path, "/v1/tokens/") {
			path = strings.Replace(path, "{id}", contosoTok.ID, 1)
		}
		path = strings.NewReplacer("{tenant}", "contoso", "{name}", name, "{id}", "eus-a-n0000").Replace(path)
		// The global lists also get asked for contoso explicitly.
		switch rt.pattern {
		case "GET /v1/usage":
			path += "?tenant=fabrikam"
		case "GET /v1/workloads": // by name, as the CLI looks a workload up for the admin
			path += "?name=secret-job"
		case "GET /v1/reservations":
			path += "?name=secret-res"
		}
		t.Run(rt.pattern, func(t *testing.T) {
			req, _ := http.NewRequest(method, h.url+path, bytes.NewBufferString(bodies[rt.pattern]))
			req.Header.Set("Authorization", "Bearer "+fabToken.Secret)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch w {
			case hidden:
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("status %d, want 404: %s", resp.StatusCode, body)
				}
				var e api.Error
				json.Unmarshal(body, &e)
				if e.Code != api.CodeNotFound || e.Message != `tenant "contoso" not found` {
					t.Fatalf("answer %s, want the same 404 as for a tenant that does not exist", body)
				}
			case missing:
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("status %d, want 404: %s", resp.StatusCode, body)
				}
			case forbidden:
				if resp.StatusCode != http.StatusForbidden {
					t.Fatalf("status %d, want 403: %s", resp.StatusCode, body)
				}
			case ownOnly:
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d, want 200: %s", resp.StatusCode, body)
				}
				if strings.Contains(string(body), "contoso") || strings.Contains(string(body), "secret-") {
					t.Fatalf("answer shows another tenant's objects: %s", body)
				}
			}
		})
	}
	// And a tenant cannot ask the global usage for another tenant.
	fab := h.tenant("fabrikam")
	if _, err := fab.Usage(ctx, "", ""); err != nil {
		t.Fatal(err)
	}
	var ae *api.Error
	err = fab.Do(ctx, "GET", "/v1/usage?tenant=contoso", nil, nil)
	if !asAPI(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("usage of another tenant: %v, want 404", err)
	}
	// Nor the events of another tenant: the same 404 as a tenant that does
	// not exist, while the admin gets exactly that tenant's events.
	for _, other := range []string{"contoso", "no-such-tenant"} {
		err = fab.Do(ctx, "GET", "/v1/events?tenant="+other, nil, nil)
		if !asAPI(err, &ae) || ae.Status != http.StatusNotFound || ae.Message != fmt.Sprintf("tenant %q not found", other) {
			t.Fatalf("events of tenant %s for fabrikam: %v, want 404 tenant not found", other, err)
		}
	}
	if err := fab.Do(ctx, "GET", "/v1/events?tenant=fabrikam", nil, nil); err != nil {
		t.Fatalf("fabrikam's own events by name: %v", err)
	}
	var evs api.Events
	if err := h.admin.Do(ctx, "GET", "/v1/events?tenant=contoso&limit=1000", nil, &evs); err != nil || len(evs.Items) == 0 {
		t.Fatalf("the admin's events of contoso: %d, %v", len(evs.Items), err)
	}
	for _, e := range evs.Items {
		if e.Tenant != "contoso" {
			t.Fatalf("the admin asked contoso's events and got %+v", e)
		}
	}
	if err := h.admin.Do(ctx, "GET", "/v1/events?tenant=no-such-tenant", nil, nil); !asAPI(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("the admin's events of a tenant that does not exist: %v, want 404", err)
	}
	// The admin finds a workload and a reservation by name across tenants.
	var wl api.List[api.Workload]
	if err := h.admin.Do(ctx, "GET", "/v1/workloads?name=secret-job", nil, &wl); err != nil || len(wl.Items) != 1 || wl.Items[0].Tenant != "contoso" {
		t.Fatalf("the admin's workloads named secret-job: %+v, %v", wl.Items, err)
	}
	var rl api.List[api.Reservation]
	if err := h.admin.Do(ctx, "GET", "/v1/reservations?name=secret-res", nil, &rl); err != nil || len(rl.Items) != 1 || rl.Items[0].Tenant != "contoso" {
		t.Fatalf("the admin's reservations named secret-res: %+v, %v", rl.Items, err)
	}
	after, err := h.admin.Workloads(ctx, "contoso", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) || after[0].State != before[0].State || after[0].Revision != before[0].Revision {
		t.Fatalf("contoso's workloads changed: %+v -> %+v", before, after)
	}
	if me, err := contoso.WhoAmI(ctx); err != nil || me.Tenant != "contoso" {
		t.Fatalf("contoso's token stopped working (revoked or rotated by fabrikam?): %+v %v", me, err)
	}
	if r, err := h.admin.Reservation(ctx, "contoso", "secret-res"); err != nil || r.Capacity != 1 {
		t.Fatalf("contoso's reservation changed: %+v %v", r, err)
	}
}
