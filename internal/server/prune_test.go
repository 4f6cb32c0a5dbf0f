package server

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
)

// TestPruneEvents: the pruner deletes events past retention (by age and by
// revision window); a reader following the log from before the prune point
// gets 410 (long poll and SSE), one starting afresh gets what is kept, and
// the live cache, which follows the log, notices and reads everything
// again instead of missing changes.
func TestPruneEvents(t *testing.T) {
	tc := newTestClock()
	clock, advance := tc.Now, tc.Advance
	h := newHarness(t, testConfig, Options{Clock: clock, RateLimit: -1, EventRetention: time.Hour})
	c := h.tenant("contoso")
	for i := 0; i < 6; i++ {
		if _, err := c.Submit(h.ctx, "contoso", spec(fmt.Sprintf("old-%d", i), 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx) // the live cache is now at this revision
	first, err := h.admin.Events(h.ctx, 0, 0, 1000)
	if err != nil || len(first.Items) == 0 {
		t.Fatalf("events before pruning: %v %v", first, err)
	}
	seen := first.Next

	// Changes after the cache's revision, then everything ages out.
	if _, err := c.Cancel(h.ctx, "contoso", "old-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(h.ctx, "contoso", spec("late", 1, 1)); err != nil {
		t.Fatal(err)
	}
	if n, err := h.s.PruneEvents(h.ctx); err != nil || n != 0 {
		t.Fatalf("pruned %d (%v) before anything was an hour old", n, err)
	}
	advance(2 * time.Hour)
	n, err := h.s.PruneEvents(h.ctx)
	if err != nil || n < len(first.Items)+2 {
		t.Fatalf("pruned %d events (%v), want at least %d", n, err, len(first.Items)+2)
	}

	if _, err := h.admin.Events(h.ctx, seen, 0, 10); apiCode(err) != api.CodeGone {
		t.Errorf("long poll after a pruned sequence: %v, want Gone", err)
	}
	req, _ := http.NewRequest("GET", h.url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+testAdmin)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", fmt.Sprint(seen))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusGone {
		t.Errorf("SSE resuming before the prune point: %v %v, want 410", resp.Status, err)
	} else {
		resp.Body.Close()
	}
	if fresh, err := h.admin.Events(h.ctx, 0, 0, 1000); err != nil {
		t.Errorf("reading from the oldest kept: %v", err)
	} else {
		for _, e := range fresh.Items {
			if e.Seq <= seen {
				t.Errorf("event %d survived the prune", e.Seq)
			}
		}
	}

	err = h.st.View(h.ctx, func(tx store.ReadTx) error {
		ws, _, err := h.s.live.live(tx)
		if err != nil {
			return err
		}
		want, err := listLive(tx)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(ws, want) {
			names := func(xs []*store.Workload) (out []string) {
				for _, x := range xs {
					out = append(out, x.Key())
				}
				return out
			}
			return fmt.Errorf("live cache after pruning: %v, a full read: %v", names(ws), names(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPruneEventsHistory: with a revision window, only the events of the
// last EventHistory revisions stay.
func TestPruneEventsHistory(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1, EventHistory: 10})
	c := h.tenant("contoso")
	for i := 0; i < 20; i++ {
		if _, err := c.Submit(h.ctx, "contoso", spec(fmt.Sprintf("w%d", i), 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.s.PruneEvents(h.ctx); err != nil {
		t.Fatal(err)
	}
	var rev int64
	h.st.View(h.ctx, func(tx store.ReadTx) error { rev = tx.Revision(); return nil })
	evs, err := h.admin.Events(h.ctx, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 || len(evs.Items) > 6 {
		t.Fatalf("%d events kept, want the few of the last 10 revisions", len(evs.Items))
	}
	for _, e := range evs.Items {
		if e.Seq <= rev-10-1 { // the mark's own write took one revision
			t.Errorf("event %d kept, store at revision %d", e.Seq, rev)
		}
	}
}
