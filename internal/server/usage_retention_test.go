package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/store"
)

// TestUsageRetention: PruneUsage deletes the records that ended before
// the retention (more than one pruning transaction's worth), keeps the
// open ones however old, those that ended within it and one that spans
// the cutoff, and leaves the counters' totals alone; without a retention
// it deletes nothing.
func TestUsageRetention(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1, UsageRetention: 48 * time.Hour})
	now := tc.Now()
	old := usagePruneBatch*2 + 17
	rec := func(name string, i int, start, end time.Time) meter.Record {
		return meter.Record{Workload: "contoso/" + name, Replica: i, Tenant: "contoso", Kind: "batch", SKU: "S", Model: "A100-80G",
			Region: "eastus", Node: "n", GPUs: 1000, Start: start, End: end, Charge: meter.ChargeGuarantee, UnitPrice: 1, ListPrice: 1}
	}
	err := h.st.Update(h.ctx, func(tx store.WriteTx) error {
		for i := range old {
			start := now.Add(-10*24*time.Hour + time.Duration(i)*time.Second)
			r := rec(fmt.Sprintf("old-%d", i/8), i%8, start, start.Add(time.Hour))
			if err := store.PutUsage(tx, &r); err != nil {
				return err
			}
		}
		keep := []meter.Record{
			rec("ancient-open", 0, now.Add(-20*24*time.Hour), time.Time{}),
			rec("spans-cutoff", 0, now.Add(-5*24*time.Hour), now.Add(-24*time.Hour)),
			rec("recent", 0, now.Add(-30*time.Hour), now.Add(-29*time.Hour)),
		}
		for i := range keep {
			if err := store.PutUsage(tx, &keep[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	count := func() (n int, names map[string]bool) {
		names = map[string]bool{}
		h.st.View(h.ctx, func(tx store.ReadTx) error {
			return store.ScanUsage(tx, "", now.Add(time.Hour), func(_ string, r *meter.Record) bool {
				n++
				names[r.Workload] = true
				return true
			})
		})
		return n, names
	}
	if n, _ := count(); n != old+3 {
		t.Fatalf("%d records written, want %d", n, old+3)
	}
	plain := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1})
	if n, err := plain.s.PruneUsage(h.ctx); n != 0 || err != nil {
		t.Errorf("no retention: pruned %d (%v)", n, err)
	}
	n, err := h.s.PruneUsage(h.ctx)
	if err != nil || n != old {
		t.Fatalf("pruned %d (%v), want the %d that ended before the cutoff", n, err, old)
	}
	left, names := count()
	if left != 3 || !names["contoso/ancient-open"] || !names["contoso/spans-cutoff"] || !names["contoso/recent"] {
		t.Errorf("%d left: %v; want the open, the spanning and the recent record", left, names)
	}
	if n, err := h.s.PruneUsage(h.ctx); n != 0 || err != nil {
		t.Errorf("pruning again: %d (%v), want 0", n, err)
	}
	open := 0
	h.st.View(h.ctx, func(tx store.ReadTx) error {
		return store.OpenUsage(tx, func(string, string, time.Time) bool { open++; return true })
	})
	if open != 1 {
		t.Errorf("%d open records indexed, want 1", open)
	}
}
