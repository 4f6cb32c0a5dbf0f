package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/sched"
)

// A tenant whose queue holds more shapes than a cycle decides of one
// tenant's sees its later work pending as Deferred, with the bound in the
// reason; another tenant's submission is placed in the same cycle, and the
// deferred work is decided once the work ahead of it leaves.
func TestTenantBoundDefersOneTenantsShapes(t *testing.T) {
	h := newHarness(t, testConfig, Options{Scheduling: sched.Options{TenantBound: 3}})
	contoso, fabrikam := h.tenant("contoso"), h.tenant("fabrikam")
	ctx := h.ctx
	for i := range 10 {
		s := spec(fmt.Sprintf("c%d", i), 1, 1)
		s.CPUMilli = int64(1000 + i) // a shape of its own
		if _, err := contoso.Submit(ctx, "contoso", s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fabrikam.Submit(ctx, "fabrikam", spec("f", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(ctx)
	if f, err := fabrikam.Workload(ctx, "fabrikam", "f"); err != nil || f.State != "Running" {
		t.Fatalf("fabrikam's f after a cycle: %+v %v", f, err)
	}
	for i := range 10 {
		name := fmt.Sprintf("c%d", i)
		w, err := contoso.Workload(ctx, "contoso", name)
		if err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			if w.State != "Running" {
				t.Errorf("%s: %s, want Running (among the first 3 shapes)", name, w.State)
			}
			continue
		}
		why, err := contoso.Why(ctx, "contoso", name)
		if err != nil || why.State != "Pending" || why.Code != string(sched.ReasonDeferred) ||
			!strings.Contains(why.Reason, "up to its first 3 shapes") || !strings.Contains(why.Reason, "7 of its workloads wait") {
			t.Errorf("why %s: %+v %v", name, why, err)
		}
	}
	// The first three leave: the next three are decided (and placed).
	for i := range 3 {
		if _, err := contoso.Cancel(ctx, "contoso", fmt.Sprintf("c%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(ctx)
	for i := 3; i < 10; i++ {
		w, _ := contoso.Workload(ctx, "contoso", fmt.Sprintf("c%d", i))
		if want := i < 6; (w.State == "Running") != want {
			t.Errorf("c%d after the first three left: %s (running wanted: %v)", i, w.State, want)
		}
	}
}

// The server bounds each tenant's shapes by default, takes a configured
// bound as it is, and a negative one (a config's shapes_per_tenant: 0)
// turns the bound off.
func TestServerTenantBoundOptions(t *testing.T) {
	for _, tc := range []struct{ set, want int }{{0, sched.DefaultTenantBound}, {7, 7}, {-1, -1}} {
		if got := schedulingOptions(sched.Options{TenantBound: tc.set}).TenantBound; got != tc.want {
			t.Errorf("TenantBound %d: the server runs with %d, want %d", tc.set, got, tc.want)
		}
	}
}
