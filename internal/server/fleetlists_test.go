package server

import (
	"errors"
	"net/http"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// TestFleetListsByName: ?name= on GET /v1/workloads and
// /v1/reservations gives the admin the objects of that name in every
// tenant, one page at a time in key order (tenants "a", "a-b" and "ab"
// sort differently from their keys "a/x", "a-b/x", "ab/x"), and a tenant
// token only its own; a name that is not one is a 400.
func TestFleetListsByName(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	ctx := h.ctx
	q := api.Quota{Flavor: "A100-80G", Region: "eastus", Limit: new(api.GPUs(16 * 1000))}
	for _, name := range []string{"a", "a-b", "ab"} {
		if _, err := h.admin.CreateTenant(ctx, api.Tenant{Name: name, Quotas: []api.Quota{q}}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.admin.Submit(ctx, name, spec("x", 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.admin.Submit(ctx, "a", spec("y", 1, 1)); err != nil {
		t.Fatal(err)
	}
	var got []string
	cont := ""
	for range 10 {
		pg, err := client.Page[api.Workload](h.admin, ctx, "/v1/workloads?name=x", 1, cont)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range pg.Items {
			if w.Name != "x" {
				t.Fatalf("asked for x, got %s/%s", w.Tenant, w.Name)
			}
			got = append(got, w.Tenant)
		}
		if cont = pg.Continue; cont == "" {
			break
		}
	}
	if want := []string{"a-b", "a", "ab"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("workloads named x, a page of one at a time: tenants %v, want %v (key order, each once)", got, want)
	}
	// A tenant token sees its own only, by name too.
	tok, err := h.admin.CreateToken(ctx, "a", "t")
	if err != nil {
		t.Fatal(err)
	}
	ta := client.New(h.url, tok.Secret)
	var wl api.List[api.Workload]
	if err := ta.Do(ctx, "GET", "/v1/workloads?name=x", nil, &wl); err != nil || len(wl.Items) != 1 || wl.Items[0].Tenant != "a" {
		t.Fatalf("tenant a's workloads named x: %+v, %v", wl.Items, err)
	}
	// Reservations likewise.
	for _, tn := range []string{"contoso", "fabrikam"} {
		if _, err := h.admin.CreateReservation(ctx, tn, api.ReservationRequest{Name: "r", SKU: "Standard_ND96isr_H100_v5", Capacity: 1, Region: "eastus"}); err != nil {
			t.Fatal(err)
		}
	}
	var rl api.List[api.Reservation]
	if err := h.admin.Do(ctx, "GET", "/v1/reservations?name=r", nil, &rl); err != nil || len(rl.Items) != 2 || rl.Items[0].Tenant != "contoso" || rl.Items[1].Tenant != "fabrikam" {
		t.Fatalf("reservations named r: %+v, %v", rl.Items, err)
	}
	all, err := h.admin.AllReservations(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("every reservation: %+v, %v", all, err)
	}
	fab := h.tenant("fabrikam")
	mine, err := fab.AllReservations(ctx)
	if err != nil || len(mine) != 1 || mine[0].Tenant != "fabrikam" {
		t.Fatalf("fabrikam's reservations through GET /v1/reservations: %+v, %v", mine, err)
	}
	// Events of one tenant, long poll and stream: the admin's ?tenant=
	// keeps that tenant's; a tenant token naming another gets a 404.
	evs, err := h.admin.TenantEvents(ctx, "a-b", 0, 0, 1000)
	if err != nil || len(evs.Items) == 0 {
		t.Fatalf("events of a-b: %+v, %v", evs, err)
	}
	for _, e := range evs.Items {
		if e.Tenant != "a-b" {
			t.Fatalf("events of a-b hold %+v", e)
		}
	}
	errEnough := errors.New("enough")
	var streamed []api.Event
	if _, err := h.admin.StreamTenantEvents(ctx, "a-b", 0, func(e api.Event) error {
		streamed = append(streamed, e)
		if len(streamed) == len(evs.Items) {
			return errEnough
		}
		return nil
	}); !errors.Is(err, errEnough) {
		t.Fatalf("streaming a-b's events: %v after %d", err, len(streamed))
	}
	for i, e := range streamed {
		if e.Tenant != "a-b" || e.Seq != evs.Items[i].Seq {
			t.Fatalf("streamed event %d %+v, polled %+v", i, e, evs.Items[i])
		}
	}
	var ae *api.Error
	if _, err := ta.StreamTenantEvents(ctx, "a-b", 0, func(api.Event) error { return errEnough }); !asAPI(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("tenant a streaming a-b's events: %v, want 404", err)
	}
	for _, path := range []string{"/v1/workloads?name=a/x", "/v1/reservations?name=", "/v1/workloads?name=.."} {
		if err := h.admin.Do(ctx, "GET", path, nil, nil); !asAPI(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != "name" {
			t.Errorf("GET %s: %v, want 400 naming name", path, err)
		}
	}
}
