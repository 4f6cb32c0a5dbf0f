package server

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/store"
)

// TestElasticGrowShrink: an elastic workload submitted through the API
// starts at its min, grows into idle capacity in a later cycle (the plan
// applied to the store), and gives its growth back to another tenant's
// claim on its guarantee without anything being preempted; why shows its
// size, bounds and why it is not larger; the usage records follow the
// replicas (growth opens, a shrink closes) and match the event log.
func TestElasticGrowShrink(t *testing.T) {
	clk := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: clk.Now, RateLimit: -1})
	fab, con := h.tenant("fabrikam"), h.tenant("contoso")
	s := spec("serve", 8, 0)
	s.Kind, s.Elastic = "inference", &api.ElasticSpec{Min: 1, Max: 4}
	if _, err := fab.Submit(h.ctx, "fabrikam", s); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	size := func() int {
		t.Helper()
		w, err := fab.Workload(h.ctx, "fabrikam", "serve")
		if err != nil {
			t.Fatal(err)
		}
		if w.Running == nil || w.Elastic == nil || w.Replicas != len(w.Running.Replicas) {
			t.Fatalf("serve: %+v", w)
		}
		return len(w.Running.Replicas)
	}
	if n := size(); n != 1 {
		t.Fatalf("placed with %d replicas, want its min 1", n)
	}
	clk.Advance(time.Hour)
	h.s.Cycle(h.ctx)
	if n := size(); n != 4 {
		t.Fatalf("grew to %d replicas, want 4 (its max; eastus has 32 A100, fabrikam's limit is 32)", n)
	}
	y, err := fab.Why(h.ctx, "fabrikam", "serve")
	if err != nil {
		t.Fatal(err)
	}
	if y.Replicas != 4 || y.MinReplicas != 1 || y.MaxReplicas != 4 || y.NotLarger != "at its max" {
		t.Errorf("why %+v: want 4 of 1–4, at its max", y)
	}
	clk.Advance(time.Hour)
	claim := spec("claim", 8, 2)
	if _, err := con.Submit(h.ctx, "contoso", claim); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if n := size(); n != 2 {
		t.Fatalf("shrank to %d replicas, want 2 (contoso's claim takes two nodes)", n)
	}
	c, err := con.Workload(h.ctx, "contoso", "claim")
	if err != nil || c.State != string(store.StateRunning) {
		t.Fatalf("claim: %+v %v", c, err)
	}
	y, _ = fab.Why(h.ctx, "fabrikam", "serve")
	if y.Replicas != 2 || y.NotLarger == "" || y.NotLarger == "at its max" {
		t.Errorf("why after the shrink %+v: want 2 replicas and why not more", y)
	}
	var evs []*store.Event
	if err := h.st.View(h.ctx, func(tx store.ReadTx) error {
		var err error
		evs, err = store.List[store.Event](tx, "")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var resized []string
	for _, e := range evs {
		if e.Is(store.EventWorkloadPreempted) {
			t.Errorf("preempted: %+v (the growth given back was enough)", e)
		}
		if e.Is(store.EventWorkloadResized) {
			resized = append(resized, e.Message)
		}
	}
	if len(resized) != 2 || !strings.HasPrefix(resized[0], "resized from 1 to 4") || !strings.HasPrefix(resized[1], "resized from 4 to 2") {
		t.Errorf("resize events %q", resized)
	}
	if strings.Contains(resized[len(resized)-1], "contoso/claim") {
		t.Errorf("fabrikam's event names contoso's workload: %q", resized[len(resized)-1])
	}
	open, closed := 0, 0
	for _, r := range h.usageRecords(clk.Now()) {
		if r.Workload != "fabrikam/serve" {
			continue
		}
		if r.Open() {
			open++
		} else {
			closed++
			if r.Replica < 2 || !r.End.Equal(clk.Now()) {
				t.Errorf("closed record %+v: want replicas 2 and 3 ended by the shrink", r)
			}
		}
	}
	if open != 2 || closed != 2 {
		t.Errorf("serve's records: %d open, %d closed; want 2 and 2", open, closed)
	}
	CheckUsageConservation(t, h.st, clk.Now().Add(time.Hour))
}

func (h *harness) usageRecords(now time.Time) []meter.Record {
	h.t.Helper()
	var out []meter.Record
	if err := h.st.View(h.ctx, func(tx store.ReadTx) error {
		return store.ScanUsage(tx, "", now.Add(time.Hour), func(_ string, r *meter.Record) bool {
			out = append(out, *r)
			return true
		})
	}); err != nil {
		h.t.Fatal(err)
	}
	return out
}
