package server

import (
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestReservationUtilizationFromItsMachines: a reservation's allocated
// and borrowed GPUs come from the work on its machines (the live cache's
// index by node), following placement, cancellation and borrowing.
func TestReservationUtilizationFromItsMachines(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c, f := h.tenant("contoso"), h.tenant("fabrikam")
	if _, err := c.CreateReservation(h.ctx, "contoso", api.ReservationRequest{Name: "r", SKU: "Standard_ND96isr_H100_v5", Capacity: 1, Region: "eastus"}); err != nil {
		t.Fatal(err)
	}
	util := func() (api.GPUs, api.GPUs) {
		t.Helper()
		rs, err := c.Reservations(h.ctx, "contoso")
		if err != nil || len(rs) != 1 {
			t.Fatalf("reservations: %v %v", rs, err)
		}
		one, err := c.Reservation(h.ctx, "contoso", "r")
		if err != nil || one.AllocatedGPUs != rs[0].AllocatedGPUs || one.BorrowedGPUs != rs[0].BorrowedGPUs {
			t.Fatalf("show %+v differs from list %+v (%v)", one, rs[0], err)
		}
		return rs[0].AllocatedGPUs, rs[0].BorrowedGPUs
	}
	job := spec("on-r", 8, 1)
	job.Flavors, job.Reservation = []string{"H100-80G"}, "r"
	if _, err := c.Submit(h.ctx, "contoso", job); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if a, b := util(); a != 8000 || b != 0 {
		t.Fatalf("with the owner's job: allocated %v borrowed %v, want 8 and 0", a, b)
	}
	if _, err := c.Cancel(h.ctx, "contoso", "on-r"); err != nil {
		t.Fatal(err)
	}
	if a, b := util(); a != 0 || b != 0 {
		t.Fatalf("after the cancel: allocated %v borrowed %v, want 0 and 0", a, b)
	}
	// Others' preemptible work may borrow the idle machine.
	borrow := spec("borrow", 8, 2)
	borrow.Flavors, borrow.Preemptible = []string{"H100-80G"}, true
	if _, err := f.Submit(h.ctx, "fabrikam", borrow); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	w, err := f.Workload(h.ctx, "fabrikam", "borrow")
	if err != nil {
		t.Fatal(err)
	}
	if w.State != "Running" {
		t.Skipf("the preemptible job did not borrow the reserved machine (%s)", w.State)
	}
	if a, b := util(); a != 0 || b != 8000 {
		t.Fatalf("borrowed: allocated %v borrowed %v, want 0 and 8", a, b)
	}
}
