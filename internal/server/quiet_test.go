package server

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestQuietCycles: while submissions alike to work a settled cycle left
// pending pour in, cycles are answered without running the core, and
// `why` then says exactly what a full cycle says; anything else (another
// kind of request, a cancellation) runs the core.
func TestQuietCycles(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	fab, con := h.tenant("fabrikam"), h.tenant("contoso")
	borrow := func(name string) api.WorkloadSpec {
		s := spec(name, 8, 1)
		s.Preemptible = true
		return s
	}
	for i := 0; i < 4; i++ { // fabrikam fills eastus A100 (8 guaranteed, 24 borrowed)
		if _, err := fab.Submit(h.ctx, "fabrikam", borrow(fmt.Sprintf("run-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx)
	if _, err := fab.Submit(h.ctx, "fabrikam", borrow("wait-0")); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx) // wait-0 pending at its limit: settled
	quiet := func() float64 { return testutil.ToFloat64(h.s.metrics.quietCycles) }
	why := func(names ...string) map[string]api.Why {
		out := map[string]api.Why{}
		for _, n := range names {
			w, err := fab.Why(h.ctx, "fabrikam", n)
			if err != nil {
				t.Fatal(err)
			}
			w.PlanRevision = 0
			out[n] = w
		}
		return out
	}

	names := []string{"wait-0"}
	for i := 1; i <= 5; i++ {
		n := fmt.Sprintf("wait-%d", i)
		names = append(names, n)
		if _, err := fab.Submit(h.ctx, "fabrikam", borrow(n)); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			h.s.cycle(h.ctx, true)
		}
	}
	h.s.cycle(h.ctx, true)
	if got := quiet(); got != 3 {
		t.Fatalf("%v quiet cycles, want 3", got)
	}
	answered := why(names...)
	if w := answered["wait-5"]; w.State != "Pending" || w.Code != "QuotaLimit" {
		t.Fatalf("why wait-5 after a quiet cycle: %+v", w)
	}
	h.s.Cycle(h.ctx) // the core over everything says the same
	for n, w := range why(names...) {
		if fmt.Sprint(w) != fmt.Sprint(answered[n]) {
			t.Errorf("%s: quiet cycle said %+v, full cycle %+v", n, answered[n], w)
		}
	}

	// Work of another class runs the core: contoso reclaims its guarantee.
	if _, err := con.Submit(h.ctx, "contoso", spec("reclaim", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.cycle(h.ctx, true)
	if got := quiet(); got != 3 {
		t.Errorf("a workload of a new class got a quiet cycle")
	}
	if w, err := con.Why(h.ctx, "contoso", "reclaim"); err != nil || w.State != "Running" {
		t.Errorf("reclaim: %+v %v, want Running after the core ran", w, err)
	}

	// A cancellation runs the core too.
	h.s.Cycle(h.ctx)
	before := quiet()
	if _, err := fab.Submit(h.ctx, "fabrikam", borrow("wait-6")); err != nil {
		t.Fatal(err)
	}
	h.s.cycle(h.ctx, true)
	if quiet() != before+1 {
		t.Fatalf("alike submission after a full cycle was not quiet")
	}
	if _, err := fab.Cancel(h.ctx, "fabrikam", "wait-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := fab.Submit(h.ctx, "fabrikam", borrow("wait-7")); err != nil {
		t.Fatal(err)
	}
	h.s.cycle(h.ctx, true)
	if quiet() != before+1 {
		t.Errorf("a cycle after a cancellation was quiet")
	}
}

// TestWhyChainMerges: the indexes quiet cycles chain stay bounded and
// keep every answer.
func TestWhyChainMerges(t *testing.T) {
	idx := &whyIndex{pending: []sched.Pending{{Workload: "t/base", Reason: "base"}}}
	for i := 0; i < 3*maxWhyDepth; i++ {
		idx = chainWhy(idx, &whyIndex{pending: []sched.Pending{{Workload: workload.ID(fmt.Sprintf("t/w%d", i)), Reason: fmt.Sprint(i)}}})
		if idx.depth >= maxWhyDepth {
			t.Fatalf("chain depth %d", idx.depth)
		}
	}
	if p, ok := idx.Pending("t/base"); !ok || p.Reason != "base" {
		t.Errorf("base answer lost: %+v %v", p, ok)
	}
	for i := 0; i < 3*maxWhyDepth; i++ {
		if p, ok := idx.Pending(fmt.Sprintf("t/w%d", i)); !ok || p.Reason != fmt.Sprint(i) {
			t.Fatalf("w%d: %+v %v", i, p, ok)
		}
	}
}
