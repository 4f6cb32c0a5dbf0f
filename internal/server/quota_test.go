package server

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
)

// quotaConfig: six H100 machines (48 GPUs) and four A100 machines in eastus.
const quotaConfig = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: h
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 6}]
            - name: a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 4}]
tenants:
  - name: lab
    quota:
      - {flavor: H100-80G, region: eastus, limit: 16}
`

// usageOf returns "current/limit reserved R" per usage name.
func usageOf(t *testing.T, us []api.Usage) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, u := range us {
		lim := "unlimited"
		if u.Limit != nil {
			lim = num(*u.Limit)
		}
		out[u.Name] = num(u.CurrentValue) + "/" + lim + " reserved " + num(u.Reserved)
	}
	return out
}

// TestReservationsCountAgainstQuota is issue 12's scenario: a tenant with
// a limit of 16 H100 GPUs reserved 40 and ran on them while usage said 0 of
// 16. Reserved capacity now counts (whether or not work runs on it),
// reservations beyond the limit are refused, and usage shows them.
func TestReservationsCountAgainstQuota(t *testing.T) {
	h := newHarness(t, quotaConfig, Options{})
	lab := h.tenant("lab")
	ctx := h.ctx
	req := func(name string, n int) api.ReservationRequest {
		return api.ReservationRequest{Name: name, Region: "eastus", SKU: "Standard_ND96isr_H100_v5", Capacity: n}
	}
	if _, err := lab.CreateReservation(ctx, "lab", req("r1", 2)); err != nil {
		t.Fatalf("16 GPUs within the limit of 16: %v", err)
	}
	_, err := lab.CreateReservation(ctx, "lab", req("r2", 3))
	var ae *api.Error
	if !asAPI(err, &ae) || ae.Code != api.CodeQuotaExceeded || ae.Field != "capacity" {
		t.Fatalf("24 more GPUs: %v, want QuotaExceeded on capacity", err)
	}
	for _, want := range []string{"limit 16", "16 reserved", "24 asked", "= 40"} {
		if !strings.Contains(ae.Message, want) {
			t.Errorf("refusal %q lacks %q", ae.Message, want)
		}
	}
	if _, err := lab.ResizeReservation(ctx, "lab", "r1", 5); apiCode(err) != api.CodeQuotaExceeded {
		t.Fatalf("growing r1 to 40 GPUs: %v, want QuotaExceeded", err)
	}
	us, err := lab.Usage(ctx, "lab", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := usageOf(t, us)["H100-80G GPUs"]; got != "16/16 reserved 16" {
		t.Fatalf("usage with an idle reservation: %s, want 16/16 reserved 16", got)
	}
	// Work on the reservation is not charged again; work beyond it is at
	// the limit, and the scheduler says so.
	on := api.WorkloadSpec{Name: "on", GPUs: 8000, Replicas: 2, Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}, Reservation: "r1"}
	off := api.WorkloadSpec{Name: "off", GPUs: 8000, Replicas: 1, Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}}
	for _, s := range []api.WorkloadSpec{on, off} {
		if _, err := lab.Submit(ctx, "lab", s); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(ctx)
	if w, _ := lab.Workload(ctx, "lab", "on"); w.State != "Running" || !w.Running.OnReservation {
		t.Fatalf("on: %+v", w)
	}
	why, err := lab.Why(ctx, "lab", "off")
	if err != nil || why.Code != "QuotaLimit" || !strings.Contains(why.Reason, "16/16") || !strings.Contains(why.Reason, "16 of it reserved") {
		t.Fatalf("why off: %+v %v", why, err)
	}
	us, _ = lab.Usage(ctx, "lab", "eastus")
	if got := usageOf(t, us)["H100-80G GPUs"]; got != "16/16 reserved 16" {
		t.Fatalf("usage with work on the reservation: %s, want 16/16 reserved 16", got)
	}
	// Shrinking is always allowed, and frees quota.
	if _, err := lab.Cancel(ctx, "lab", "on"); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.ResizeReservation(ctx, "lab", "r1", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.CreateReservation(ctx, "lab", req("r2", 1)); err != nil {
		t.Fatalf("8 + 8 within 16: %v", err)
	}
}

// TestUsageChargesEveryEntry: with an eastus limit of 8 and an
// all-regions limit of 4, 4 running GPUs count against both (the scheduler
// said "at limit 4/4 in all regions" while usage reported 0 of 4).
func TestUsageChargesEveryEntry(t *testing.T) {
	h := newHarness(t, quotaConfig, Options{})
	eight, four := api.GPUs(8000), api.GPUs(4000)
	if _, err := h.admin.CreateTenant(h.ctx, api.Tenant{Name: "two", Quotas: []api.Quota{
		{Flavor: "A100-80G", Region: "eastus", Limit: &eight},
		{Flavor: "A100-80G", Limit: &four},
	}}); err != nil {
		t.Fatal(err)
	}
	two := h.tenant("two")
	for _, name := range []string{"w1", "w2"} {
		if _, err := two.Submit(h.ctx, "two", spec(name, 4, 1)); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx)
	why, err := two.Why(h.ctx, "two", "w2")
	if err != nil || why.Code != "QuotaLimit" || !strings.Contains(why.Reason, "4/4") {
		t.Fatalf("why w2: %+v %v", why, err)
	}
	us, err := two.Usage(h.ctx, "two", "")
	if err != nil {
		t.Fatal(err)
	}
	got := usageOf(t, us)
	if got["A100-80G GPUs"] != "4/8 reserved 0" || got["A100-80G GPUs (all regions)"] != "4/4 reserved 0" {
		t.Fatalf("usage: %v, want 4/8 in eastus and 4/4 in all regions", got)
	}
}
