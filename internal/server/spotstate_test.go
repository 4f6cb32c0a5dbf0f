package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/spot"
	"github.com/arbiterhq/arbiter/internal/store"
)

// h100Price is the server's current H100/eastus quote.
func h100Price(t *testing.T, s *Server) spot.Quote {
	t.Helper()
	for _, q := range s.spot.quotes() {
		if q.Model == "H100-80G" && q.Region == "eastus" {
			return q
		}
	}
	t.Fatal("no H100-80G/eastus market")
	return spot.Quote{}
}

// reopen closes h's server's store and opens a new server on the same
// file, as a restart does.
func reopen(t *testing.T, h *harness, clock func() time.Time) *Server {
	t.Helper()
	return reopenWith(t, h, Options{Clock: clock, RateLimit: -1})
}

// reopenWith is reopen with the server's options (Store, AdminToken and
// Logger are set here).
func reopenWith(t *testing.T, h *harness, o Options) *Server {
	t.Helper()
	path := h.st.Path()
	if err := h.st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenBolt(path, &store.BoltOptions{MaxBatchDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h.st = st
	o.Store, o.AdminToken, o.Logger = st, testAdmin, slog.New(slog.DiscardHandler)
	s, err := New(h.ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSpotMarketSurvivesRestart: the H100 market is full for 20 minutes,
// so its price has climbed part of the way from the catalog's spot price
// to the on-demand price. After a restart on the same store file the
// market quotes the same price and steps on from it, as a market that kept
// running does. Before, every market started again at its target (here
// the on-demand price, $12.29).
func TestSpotMarketSurvivesRestart(t *testing.T) {
	clk := newTestClock()
	h := newHarness(t, testConfig, Options{RateLimit: -1, Clock: clk.Now})
	c := h.tenant("contoso")
	for _, name := range []string{"fill-0", "fill-1"} {
		if _, err := c.Submit(h.ctx, "contoso", api.WorkloadSpec{Name: name, GPUs: 8000, Replicas: 1, Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}}); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx)
	for range 20 {
		clk.Advance(time.Minute)
		h.s.Cycle(h.ctx)
	}
	before := h100Price(t, h.s)
	if before.Utilization != 1 || before.PerGPUHour <= h100Catalog+1 || before.PerGPUHour >= 12 {
		t.Fatalf("H100 after 20 full minutes: $%.4f at %.2f used, want between the catalog and the on-demand price", before.PerGPUHour, before.Utilization)
	}
	s2 := reopen(t, h, clk.Now)
	s2.Cycle(h.ctx)
	if after := h100Price(t, s2); after.PerGPUHour != before.PerGPUHour || after.Utilization != 1 {
		t.Fatalf("after the restart H100 quotes $%.4f at %.2f used, want $%.4f at %.2f", after.PerGPUHour, after.Utilization, before.PerGPUHour, before.Utilization)
	}
	for range 3 {
		clk.Advance(time.Minute)
		s2.Cycle(h.ctx)
	}
	got := h100Price(t, s2).PerGPUHour
	want := before.PerGPUHour
	od := 98.32 / 8 // the market's target at full use
	for range 3 {
		want += (od - want) * spot.Smoothing
	}
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("3 minutes after the restart H100 is $%.6f, want $%.6f (stepped on from $%.6f)", got, want, before.PerGPUHour)
	}
}

// TestSpotMarketSavedAtShutdown: a state the cycle did not write (the
// last write is under a minute old) is written when Run ends, and a
// stored state that does not decode is ignored at start.
func TestSpotMarketSavedAtShutdown(t *testing.T) {
	clk := newTestClock()
	h := newHarness(t, testConfig, Options{RateLimit: -1, Clock: clk.Now})
	c := h.tenant("contoso")
	for _, name := range []string{"fill-0", "fill-1"} { // the price moves
		if _, err := c.Submit(h.ctx, "contoso", api.WorkloadSpec{Name: name, GPUs: 8000, Replicas: 1, Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}}); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx) // written
	clk.Advance(90 * time.Second)
	h.s.Cycle(h.ctx) // one step; written (90s after the last write)
	clk.Advance(40 * time.Second)
	h.s.Cycle(h.ctx) // one more step; not written (40s after)
	stored := func() spot.Saved {
		t.Helper()
		var sv spot.Saved
		err := h.st.View(h.ctx, func(tx store.ReadTx) error {
			st, err := store.Get[store.Setting](tx, settingSpotMarket)
			if err != nil {
				return err
			}
			return json.Unmarshal(st.Value, &sv)
		})
		if err != nil {
			t.Fatal(err)
		}
		return sv
	}
	live, _ := h.s.spot.m.Save()
	if sv := stored(); !sv.Last.Before(live.Last) {
		t.Fatalf("stored state at %v, the market's last step %v: the cycle wrote it within the minute", sv.Last, live.Last)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	cancel()
	h.s.Run(ctx)
	if sv := stored(); !sv.Last.Equal(live.Last) || sv.Changed(live, 0) {
		t.Fatalf("after shutdown the store holds %+v, want the market's state %+v", sv, live)
	}

	// A state that does not decode: the server starts, the markets at
	// their targets.
	err := h.st.Update(h.ctx, func(tx store.WriteTx) error {
		return store.Put(tx, &store.Setting{Name: settingSpotMarket, Value: []byte(`{"last":"bogus"`)}, store.Any)
	})
	if err != nil {
		t.Fatal(err)
	}
	s2 := reopen(t, h, clk.Now)
	s2.Cycle(h.ctx)
	if q := h100Price(t, s2); q.PerGPUHour != 98.32/8 {
		t.Fatalf("with an unreadable saved state H100 quotes $%.4f, want the target at full use, $12.29", q.PerGPUHour)
	}
}
