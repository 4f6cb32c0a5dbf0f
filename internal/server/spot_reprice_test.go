package server

import (
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/store"
)

// TestSpotPriceChangeSplitsRecords: a spot run whose price changes while
// it runs (here a policy's set_spot_price) is split at the change: its
// record up to the cycle that saw the change keeps the price it started
// with, the next, from that cycle (same run, RunStart its first record's
// start), has the new price, and the run's end closes that last record.
// The parts are contiguous, the cost report charges each part its price,
// and work not at spot prices is not split.
func TestSpotPriceChangeSplitsRecords(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1})
	c := h.tenant("fabrikam")
	rich := spec("rich", 1, 1)
	rich.Priority, rich.MaxPrice = "spot", 50
	if _, err := c.Submit(h.ctx, "fabrikam", rich); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(h.ctx, "fabrikam", spec("steady", 1, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	t0 := tc.Now()
	tc.Advance(time.Hour)
	h.s.Cycle(h.ctx) // the same prices: nothing split
	applySurge(t, h)
	h.s.Cycle(h.ctx)
	t1 := tc.Now()
	tc.Advance(time.Hour)
	if _, err := c.Cancel(h.ctx, "fabrikam", "rich"); err != nil {
		t.Fatal(err)
	}
	t2 := tc.Now()
	recs := map[string][]meter.Record{}
	h.st.View(h.ctx, func(tx store.ReadTx) error {
		return store.ScanUsage(tx, "", t2.Add(time.Hour), func(_ string, r *meter.Record) bool {
			recs[r.Workload] = append(recs[r.Workload], *r)
			return true
		})
	})
	if n := len(recs["fabrikam/steady"]); n != 1 {
		t.Errorf("steady (not spot) has %d records, want 1", n)
	}
	parts := recs["fabrikam/rich"]
	if len(parts) < 2 {
		t.Fatalf("rich has %d records, want it split at the price change: %+v", len(parts), parts)
	}
	first, last := parts[0], parts[len(parts)-1]
	if !first.Start.Equal(t0) || !first.RunStart.IsZero() || first.UnitPrice == 5 {
		t.Errorf("first part %+v: want it from %v at the price before", first, t0)
	}
	if !last.Start.Equal(t1) || !last.End.Equal(t2) || last.UnitPrice != 5 || !last.RunStart.Equal(t0) {
		t.Errorf("last part %+v: want [%v, %v) at 5, of the run from %v", last, t1, t2, t0)
	}
	want := 0.0
	for i, p := range parts {
		if i > 0 && !p.Start.Equal(parts[i-1].End) {
			t.Errorf("part %d starts at %v, the one before ended at %v", i, p.Start, parts[i-1].End)
		}
		if p.Open() {
			t.Errorf("part %d still open after the cancel", i)
		}
		want += p.GPUHours(t0, t2) * p.UnitPrice
	}
	rep, err := h.admin.CostReport(h.ctx, t0, t2, "workload", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		if r.Keys[0] == "fabrikam/rich" && (r.Records != len(parts) || !(r.Cost > want-1e-9 && r.Cost < want+1e-9) || r.GPUHours < 2-1e-9 || r.GPUHours > 2+1e-9) {
			t.Errorf("rich in the report: %+v, want %d records, 2 GPU-hours costing %v", r, len(parts), want)
		}
	}
	var open int
	h.st.View(h.ctx, func(tx store.ReadTx) error {
		return store.OpenUsage(tx, func(string, string, time.Time) bool { open++; return true })
	})
	if open != 1 {
		t.Errorf("%d open runs, want steady's", open)
	}
}

// TestSpotSplitWaitsForTheHour: a spot record is split at most an hour
// after it started (spotSegment: the market moves every minute): a price
// change half an hour in does not split it then, but the first cycle
// once it is an hour old does, though the prices did not change again,
// and the new record has the price in force then.
func TestSpotSplitWaitsForTheHour(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1})
	c := h.tenant("fabrikam")
	w := spec("rich", 1, 1)
	w.Priority, w.MaxPrice = "spot", 50
	if _, err := c.Submit(h.ctx, "fabrikam", w); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	t0 := tc.Now()
	parts := func() []meter.Record {
		var out []meter.Record
		h.st.View(h.ctx, func(tx store.ReadTx) error {
			return store.ScanUsage(tx, "", tc.Now().Add(time.Hour), func(_ string, r *meter.Record) bool {
				out = append(out, *r)
				return true
			})
		})
		return out
	}
	tc.Advance(30 * time.Minute)
	applySurge(t, h)
	h.s.Cycle(h.ctx)
	if p := parts(); len(p) != 1 || p[0].UnitPrice == 5 {
		t.Fatalf("half an hour in: %+v, want the one record at its first price", p)
	}
	tc.Advance(30 * time.Minute)
	h.s.Cycle(h.ctx)
	p := parts()
	if len(p) != 2 || !p[0].End.Equal(t0.Add(time.Hour)) || !p[1].Start.Equal(t0.Add(time.Hour)) || p[1].UnitPrice != 5 || !p[1].Open() {
		t.Fatalf("an hour in: %+v, want the record split at %v, the open part at 5", p, t0.Add(time.Hour))
	}
}

// applySurge applies a policy that sets eastus's spot price to $5/h from
// the next policy tick on, and ticks the policies.
func applySurge(t *testing.T, h *harness) {
	t.Helper()
	rules := `policies:
  - name: surge
    when: {metric: utilization, of: cluster, above: 0%}
    then:
      - {type: set_spot_price, target: region:eastus, price: $5/h}
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "spot", Source: rules}); err != nil {
		t.Fatal(err)
	}
	h.s.TickPolicies(h.ctx)
}
