package server

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// Time-window reservations (issue 17 item 4). testConfig has two H100
// machines in eastus (eus-h); contoso and fabrikam may each reserve 16
// H100 GPUs there.

const h100 = "Standard_ND96isr_H100_v5"

// windowHarness is a harness on a clock the test moves, and the
// clock's start (the real time: the harness seeds at the real time).
func windowHarness(t *testing.T) (*harness, *testClock, time.Time) {
	clk := newTestClock()
	return newHarness(t, testConfig, Options{RateLimit: -1, Clock: clk.Now}), clk, clk.Now()
}

// setClock moves clk forward to at.
func setClock(clk *testClock, at time.Time) { clk.Advance(at.Sub(clk.Now())) }

func h100Res(name string, count int, start, end time.Time) api.ReservationRequest {
	return api.ReservationRequest{Name: name, SKU: h100, Capacity: count, Region: "eastus", Start: start, End: end}
}

func h100Job(name string, runtime time.Duration) api.WorkloadSpec {
	s := spec(name, 8, 1)
	s.Flavors, s.ExpectedRuntime = []string{"H100-80G"}, api.Duration(runtime)
	return s
}

// TestFutureReservationDoesNotBlockNow: a reservation for 2030 takes no
// machines and no capacity now: another tenant reserves every machine
// for now. (Today's code bound both machines at creation.)
func TestFutureReservationDoesNotBlockNow(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c, f := h.tenant("contoso"), h.tenant("fabrikam")
	r, err := c.CreateReservation(h.ctx, "contoso", h100Res("in-2030", 2,
		time.Date(2030, 1, 6, 8, 0, 0, 0, time.UTC), time.Date(2030, 1, 13, 8, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "Scheduled" || len(r.Nodes) != 0 {
		t.Fatalf("2030 reservation: state %q nodes %v, want Scheduled without machines", r.State, r.Nodes)
	}
	now, err := f.CreateReservation(h.ctx, "fabrikam", h100Res("now", 2, time.Time{}, time.Now().Add(24*time.Hour)))
	if err != nil {
		t.Fatalf("a reservation for now, beside one for 2030: %v", err)
	}
	if now.State != "Active" || len(now.Nodes) != 2 {
		t.Fatalf("now: state %q nodes %v, want Active on 2 machines", now.State, now.Nodes)
	}
	// Work now may use the machines the 2030 reservation will hold: they
	// are not its yet (here fabrikam's own reservation runs its job).
	job := h100Job("on-now", time.Hour)
	job.Reservation = "now"
	if _, err := f.Submit(h.ctx, "fabrikam", job); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if w, err := f.Workload(h.ctx, "fabrikam", "on-now"); err != nil || w.State != "Running" {
		t.Fatalf("owner's job on the reservation for now: %+v %v", w.State, err)
	}
}

// TestReservationCalendar: overlapping windows are all or nothing,
// windows that do not overlap share the machines, and the refusal names
// no other tenant.
func TestReservationCalendar(t *testing.T) {
	h, _, windowT0 := windowHarness(t)
	c, f := h.tenant("contoso"), h.tenant("fabrikam")
	day := func(d int) time.Time { return windowT0.Add(time.Duration(d) * 24 * time.Hour) }
	if _, err := c.CreateReservation(h.ctx, "contoso", h100Res("a", 2, day(10), day(12))); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		count      int
		start, end time.Time
		ok         bool
	}{
		{"overlaps-a", 1, day(11), day(13), false},
		{"inside-a", 1, day(10).Add(time.Hour), day(11), false},
		{"open-ended-now", 1, time.Time{}, time.Time{}, false}, // never ends, so overlaps a
		{"after-a", 2, day(12), day(14), true},                 // adjacent: a ends as it starts
		{"before-a", 2, time.Time{}, day(1), true},             // now, bound now, gone by day 10
		{"between", 1, day(5), day(10), true},                  // before-a is over by day 1; a starts on day 10
	}
	for _, tc := range cases {
		_, err := f.CreateReservation(h.ctx, "fabrikam", h100Res(tc.name, tc.count, tc.start, tc.end))
		if tc.ok != (err == nil) {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
			continue
		}
		if err != nil {
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != api.CodeCapacity {
				t.Errorf("%s: %v, want 409 InsufficientCapacity", tc.name, err)
			}
			if strings.Contains(err.Error(), "contoso") || strings.Contains(err.Error(), `"a"`) {
				t.Errorf("%s: the refusal names another tenant's reservation: %v", tc.name, err)
			}
		}
	}
	// Growing is checked against the calendar too.
	if _, err := f.ResizeReservation(h.ctx, "fabrikam", "between", 3); err == nil {
		t.Error("between grown to 3 of 2 machines: admitted")
	}
	if _, err := f.ResizeReservation(h.ctx, "fabrikam", "between", 2); err != nil {
		t.Errorf("between grown to 2 (both free from day 5 to 10): %v", err)
	}
}

// TestFutureReservationWindow: machines are chosen tenancy.BindLead
// before the window; until then work runs anywhere; once bound, long
// non-preemptible work stays off them while work expected to end in time
// may use them; at the start the owner's work is placed at once, the
// preemptible borrower evicted.
func TestFutureReservationWindow(t *testing.T) {
	h, clk, windowT0 := windowHarness(t)
	c, f := h.tenant("contoso"), h.tenant("fabrikam")
	start := windowT0.Add(3 * time.Hour)
	r, err := f.CreateReservation(h.ctx, "fabrikam", h100Res("train", 1, start, start.Add(4*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Nodes) != 0 {
		t.Fatalf("machines chosen at creation, 3h ahead: %v", r.Nodes)
	}
	h.s.Cycle(h.ctx)
	if r, _ = f.Reservation(h.ctx, "fabrikam", "train"); len(r.Nodes) != 0 {
		t.Fatalf("machines chosen 3h ahead: %v", r.Nodes)
	}
	setClock(clk, start.Add(-45*time.Minute)) // within BindLead
	h.s.Cycle(h.ctx)
	r, err = f.Reservation(h.ctx, "fabrikam", "train")
	if err != nil || len(r.Nodes) != 1 || r.State != "Scheduled" {
		t.Fatalf("45 min ahead: %+v %v, want Scheduled on 1 machine", r, err)
	}
	reserved := r.Nodes[0]
	evs, err := f.Events(h.ctx, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	bound := 0
	for _, e := range evs.Items {
		if e.Type == "ReservationBound" && strings.Contains(e.Message, "bound 1 machines") {
			bound++
		}
	}
	if bound != 1 {
		t.Errorf("%d ReservationBound events for the owner, want 1: %+v", bound, evs.Items)
	}
	if cevs, err := c.Events(h.ctx, 0, 0, 1000); err == nil {
		for _, e := range cevs.Items {
			if e.Type == "ReservationBound" {
				t.Errorf("another tenant sees the binding: %+v", e)
			}
		}
	}
	h.s.Cycle(h.ctx) // nothing more to bind: no second event
	evs, _ = f.Events(h.ctx, 0, 0, 1000)
	for _, e := range evs.Items {
		if e.Type == "ReservationBound" {
			bound--
		}
	}
	if bound != 0 {
		t.Errorf("a second cycle bound again")
	}
	nodeOf := func(cl *client.Client, tenant, name string) (string, string) {
		t.Helper()
		w, err := cl.Workload(h.ctx, tenant, name)
		if err != nil {
			t.Fatal(err)
		}
		if w.Running == nil || len(w.Running.Replicas) == 0 {
			return w.State, ""
		}
		return w.State, w.Running.Replicas[0].Node
	}
	for _, name := range []string{"long-1", "long-2"} {
		if _, err := c.Submit(h.ctx, "contoso", h100Job(name, 5*time.Hour)); err != nil {
			t.Fatal(err)
		}
		h.s.Cycle(h.ctx)
	}
	if st, n := nodeOf(c, "contoso", "long-1"); st != "Running" || n == reserved {
		t.Fatalf("long-1: %s on %q, want Running off the reserved machine %s", st, n, reserved)
	}
	if st, n := nodeOf(c, "contoso", "long-2"); st == "Running" {
		t.Fatalf("long-2 (5h, not preemptible) runs on %s, the machine reserved from %v", n, start)
	}
	if _, err := c.Submit(h.ctx, "contoso", h100Job("short", 30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if st, n := nodeOf(c, "contoso", "short"); st != "Running" || n != reserved {
		t.Fatalf("short (ends before the window): %s on %q, want Running on %s", st, n, reserved)
	}
	// short ends; a preemptible job borrows the machine until the window.
	if _, err := c.Cancel(h.ctx, "contoso", "short"); err != nil {
		t.Fatal(err)
	}
	spot := h100Job("spot", 0)
	spot.Preemptible, spot.GracePeriod = true, api.Duration(time.Minute)
	if _, err := c.Submit(h.ctx, "contoso", spot); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if st, n := nodeOf(c, "contoso", "spot"); st != "Running" || n != reserved {
		t.Fatalf("spot: %s on %q, want borrowing %s", st, n, reserved)
	}
	if st, _ := nodeOf(c, "contoso", "long-2"); st == "Running" {
		t.Fatal("long-2 took the machine")
	}
	// The window opens: the owner gets its machine in this cycle.
	setClock(clk, start)
	own := h100Job("own", 2*time.Hour)
	own.Reservation = "train"
	if _, err := f.Submit(h.ctx, "fabrikam", own); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if r, _ = f.Reservation(h.ctx, "fabrikam", "train"); r.State != "Active" {
		t.Fatalf("at the start: state %q, want Active", r.State)
	}
	if st, n := nodeOf(f, "fabrikam", "own"); st != "Running" || n != reserved {
		t.Fatalf("owner at the window's start: %s on %q, want Running on %s", st, n, reserved)
	}
	if st, _ := nodeOf(c, "contoso", "spot"); st == "Running" {
		t.Fatalf("spot still running on the owner's machine")
	}
	setClock(clk, start.Add(4*time.Hour))
	if r, _ = f.Reservation(h.ctx, "fabrikam", "train"); r.State != "Expired" {
		t.Fatalf("after the end: state %q, want Expired", r.State)
	}
}

// TestReservationWindowBounds: bad windows are refused naming the field.
func TestReservationWindowBounds(t *testing.T) {
	h, _, windowT0 := windowHarness(t)
	f := h.tenant("fabrikam")
	for _, tc := range []struct {
		name       string
		start, end time.Time
		field      string
	}{
		{"end-before-start", windowT0.Add(2 * time.Hour), windowT0.Add(time.Hour), "end"},
		{"end-is-start", windowT0.Add(time.Hour), windowT0.Add(time.Hour), "end"},
		{"end-past", time.Time{}, windowT0.Add(-time.Hour), "end"},
		{"too-long", windowT0.Add(time.Hour), windowT0.Add(time.Hour + maxReservationWindow + time.Second), "end"},
		{"too-far", windowT0.Add(maxReservationLead + time.Hour), time.Time{}, "start"},
		{"year-9999", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 2, 0, 0, 0, 0, time.UTC), "start"},
	} {
		_, err := f.CreateReservation(h.ctx, "fabrikam", h100Res(tc.name, 1, tc.start, tc.end))
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != tc.field {
			t.Errorf("%s: %v, want 400 naming %s", tc.name, err, tc.field)
		}
	}
	if rs, err := f.Reservations(h.ctx, "fabrikam"); err != nil || len(rs) != 0 {
		t.Errorf("refused windows left reservations: %v %v", rs, err)
	}
}

// TestFutureReservationIsolation: another tenant cannot see, resize or
// delete a tenant's future reservation.
func TestFutureReservationIsolation(t *testing.T) {
	h, _, windowT0 := windowHarness(t)
	c, f := h.tenant("contoso"), h.tenant("fabrikam")
	if _, err := c.CreateReservation(h.ctx, "contoso", h100Res("secret", 1, windowT0.Add(48*time.Hour), windowT0.Add(72*time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Reservation(h.ctx, "contoso", "secret"); err == nil {
		t.Error("fabrikam read contoso's reservation")
	}
	if rs, err := f.Reservations(h.ctx, "contoso"); err == nil {
		t.Errorf("fabrikam listed contoso's reservations: %v", rs)
	}
	if _, err := f.ResizeReservation(h.ctx, "contoso", "secret", 2); err == nil {
		t.Error("fabrikam resized contoso's reservation")
	}
	if err := f.DeleteReservation(h.ctx, "contoso", "secret"); err == nil {
		t.Error("fabrikam deleted contoso's reservation")
	}
	if _, err := f.CreateReservation(h.ctx, "fabrikam", api.ReservationRequest{Name: "x", Tenant: "contoso", SKU: h100, Capacity: 1, Region: "eastus"}); err == nil {
		t.Error("fabrikam created a reservation for contoso")
	}
	if r, err := c.Reservation(h.ctx, "contoso", "secret"); err != nil || r.Capacity != 1 || r.State != "Scheduled" {
		t.Errorf("contoso's reservation changed: %+v %v", r, err)
	}
}

// TestFutureReservationTopUp: at binding time a machine held by another
// tenant's long non-preemptible work is skipped (the reservation is bound
// short, and says so) while one whose work is expected to end before the
// window is taken; the rest is bound once the long work is gone.
func TestFutureReservationTopUp(t *testing.T) {
	h, clk, windowT0 := windowHarness(t)
	c, f := h.tenant("contoso"), h.tenant("fabrikam")
	start := windowT0.Add(3 * time.Hour)
	if _, err := f.CreateReservation(h.ctx, "fabrikam", h100Res("big", 2, start, start.Add(2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	for _, j := range []struct {
		name string
		rt   time.Duration
	}{{"long", 5 * time.Hour}, {"fits", 2*time.Hour + 45*time.Minute}} {
		if _, err := c.Submit(h.ctx, "contoso", h100Job(j.name, j.rt)); err != nil {
			t.Fatal(err)
		}
		h.s.Cycle(h.ctx)
		if w, err := c.Workload(h.ctx, "contoso", j.name); err != nil || w.State != "Running" {
			t.Fatalf("%s before any machine is bound: %v %v, want Running", j.name, w.State, err)
		}
	}
	setClock(clk, start.Add(-30*time.Minute))
	h.s.Cycle(h.ctx)
	r, err := f.Reservation(h.ctx, "fabrikam", "big")
	if err != nil || len(r.Nodes) != 1 {
		t.Fatalf("bound %v (%v), want the one machine without long work", r.Nodes, err)
	}
	fits, _ := c.Workload(h.ctx, "contoso", "fits")
	if r.Nodes[0] != fits.Running.Replicas[0].Node {
		t.Errorf("bound %s, want %s (its work ends before the window)", r.Nodes[0], fits.Running.Replicas[0].Node)
	}
	evs, _ := f.Events(h.ctx, 0, 0, 1000)
	short := false
	for _, e := range evs.Items {
		short = short || (e.Type == "ReservationBound" && strings.Contains(e.Message, "1 of 2"))
	}
	if !short {
		t.Errorf("no event says the reservation is bound short: %+v", evs.Items)
	}
	if _, err := c.Cancel(h.ctx, "contoso", "long"); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if r, err = f.Reservation(h.ctx, "fabrikam", "big"); err != nil || len(r.Nodes) != 2 {
		t.Fatalf("after the long work left: bound %v (%v), want 2 machines", r.Nodes, err)
	}
}

// TestFutureReservationQuota: quota admission for a later window counts
// the running work still expected to run then, not work that will be
// gone; work without an expected runtime still counts.
func TestFutureReservationQuota(t *testing.T) {
	h, _, windowT0 := windowHarness(t)
	c := h.tenant("contoso")
	// contoso's H100 limit in eastus is 16 GPUs: two 8-GPU jobs fill it.
	for _, name := range []string{"one-hour", "unknown"} {
		rt := time.Hour
		if name == "unknown" {
			rt = 0
		}
		if _, err := c.Submit(h.ctx, "contoso", h100Job(name, rt)); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx)
	for _, name := range []string{"one-hour", "unknown"} {
		if w, err := c.Workload(h.ctx, "contoso", name); err != nil || w.State != "Running" {
			t.Fatalf("%s: %v %v, want Running", name, w.State, err)
		}
	}
	later := windowT0.Add(48 * time.Hour)
	if _, err := c.CreateReservation(h.ctx, "contoso", h100Res("now", 1, time.Time{}, windowT0.Add(time.Hour))); apiCode(err) != api.CodeQuotaExceeded {
		t.Errorf("a reservation for now at the limit: %v, want QuotaExceeded", err)
	}
	if _, err := c.CreateReservation(h.ctx, "contoso", h100Res("later", 1, later, later.Add(time.Hour))); err != nil {
		t.Errorf("a reservation in 2 days, when one-hour is over: %v", err)
	}
	if _, err := c.CreateReservation(h.ctx, "contoso", h100Res("later-2", 1, later.Add(30*time.Minute), later.Add(2*time.Hour))); apiCode(err) != api.CodeQuotaExceeded {
		t.Errorf("a second one overlapping it, with unknown still counted: %v, want QuotaExceeded", err)
	}
}
