package server

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// Planned holds on the capacity calendar (issue 17 item 4): a
// reservation is admitted only beside the machines the core holds for
// pending work's planned starts.

const a100amsr = "Standard_ND96amsr_A100_v4"

// TestReservationCalendarCountsPlannedHolds: in planConfig's block of 4
// machines, alpha's train-a (3 machines, 2h) and beta's prep (1, 1h)
// run; beta's gang big (3 × 8 GPUs, same block, expected 5h) is planned
// to start when train-a ends, holding 3 machines from then for 5h. A
// reservation overlapping that hold is admitted only in the machine left
// over; one ending as the plan starts, or starting as it ends, takes all
// it asks; the refusal names the instant and no workload or tenant of
// the plan; once big is cancelled its hold is gone.
func TestReservationCalendarCountsPlannedHolds(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, planConfig, Options{Clock: tc.Now, RateLimit: -1})
	alpha, beta := h.tenant("alpha"), h.tenant("beta")
	big := bigGang(3)
	big.ExpectedRuntime = api.Duration(5 * time.Hour)
	t0 := planWorld(t, h, alpha, beta, big)
	plan := t0.Add(2 * time.Hour)
	y, err := h.admin.Why(h.ctx, "beta", "big")
	if err != nil || !y.PlannedStart.Equal(plan.Truncate(time.Second)) || y.PlannedNodes != 3 || y.PlannedBlock != "eus-a" {
		t.Fatalf("big's plan: start %v nodes %d block %q (%v), want %v, 3 nodes in eus-a", y.PlannedStart, y.PlannedNodes, y.PlannedBlock, err, plan)
	}
	after := func(d time.Duration) time.Time { return t0.Add(d) }
	req := func(name string, count int, start, end time.Time) api.ReservationRequest {
		return api.ReservationRequest{Name: name, SKU: a100amsr, Capacity: count, Region: "eastus", Start: start, End: end}
	}
	refused := func(what string, err error, at time.Time) {
		t.Helper()
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != api.CodeCapacity {
			t.Errorf("%s: %v, want 409 InsufficientCapacity", what, err)
			return
		}
		if stamp := at.UTC().Format(time.RFC3339); !strings.Contains(ae.Message, "at "+stamp) {
			t.Errorf("%s: %q does not name the instant %s", what, ae.Message, stamp)
		}
		for _, secret := range []string{"beta", "big", "prep"} {
			if strings.Contains(ae.Message, secret) {
				t.Errorf("%s: the refusal names %q of another tenant: %q", what, secret, ae.Message)
			}
		}
	}

	// 2 machines over the planned start: 3 held + 2 > 4.
	_, err = alpha.CreateReservation(h.ctx, "alpha", req("over-plan", 2, after(90*time.Minute), after(3*time.Hour)))
	refused("2 machines over the planned start", err, plan)
	// Ending as the plan starts: every machine not otherwise reserved.
	if _, err := alpha.CreateReservation(h.ctx, "alpha", req("before-plan", 3, after(70*time.Minute), plan)); err != nil {
		t.Errorf("3 machines ending at the planned start: %v", err)
	}
	// The machine the plan leaves: admitted; grown into the hold: refused.
	if _, err := alpha.CreateReservation(h.ctx, "alpha", req("beside", 1, plan, after(3*time.Hour))); err != nil {
		t.Errorf("1 machine beside the 3 held: %v", err)
	}
	_, err = alpha.ResizeReservation(h.ctx, "alpha", "beside", 2)
	refused("beside grown to 2", err, plan)
	// The hold lasts big's expected runtime: from its end, all is free.
	if _, err := alpha.CreateReservation(h.ctx, "alpha", req("after-plan", 2, after(7*time.Hour), after(9*time.Hour))); err != nil {
		t.Errorf("2 machines from the plan's expected end: %v", err)
	}
	_, err = alpha.CreateReservation(h.ctx, "alpha", req("in-plan", 2, after(6*time.Hour), after(9*time.Hour)))
	refused("2 machines in the plan's last hour", err, after(6*time.Hour))

	// A cancelled workload holds nothing, even before the next cycle.
	if _, err := beta.Cancel(h.ctx, "beta", "big"); err != nil {
		t.Fatal(err)
	}
	if _, err := alpha.CreateReservation(h.ctx, "alpha", req("in-plan", 2, after(6*time.Hour), after(9*time.Hour))); err != nil {
		t.Errorf("2 machines in the window big's plan held, big cancelled: %v", err)
	}
}

// TestPlannedBooking: a plan books its nodes of its GPU model in its
// region (its block for a gang) from its start for the expected runtime;
// with no runtime known, open-ended.
func TestPlannedBooking(t *testing.T) {
	at := time.Date(2030, 1, 2, 14, 0, 0, 0, time.UTC)
	gang := &sched.PlannedStart{Start: at, Block: "eus-a", Flavor: "A100-80G", Region: "eastus", Nodes: 3}
	single := &sched.PlannedStart{Start: at, Flavor: "H100-80G", Region: "westus", Nodes: 1}
	for _, tc := range []struct {
		name    string
		pl      *sched.PlannedStart
		runtime time.Duration
		want    tenancy.Booking
	}{
		{"gang, 5h", gang, 5 * time.Hour, tenancy.Booking{Region: "eastus", Model: "A100-80G", Block: "eus-a", Machines: 3, Start: at, End: at.Add(5 * time.Hour)}},
		{"gang, runtime unknown", gang, 0, tenancy.Booking{Region: "eastus", Model: "A100-80G", Block: "eus-a", Machines: 3, Start: at}},
		{"single node", single, time.Hour, tenancy.Booking{Region: "westus", Model: "H100-80G", Machines: 1, Start: at, End: at.Add(time.Hour)}},
	} {
		if got := plannedBooking(tc.pl, tc.runtime); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
