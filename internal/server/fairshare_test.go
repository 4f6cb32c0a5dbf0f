package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// fairEntry returns tenant's fair-share entry for A100-80G in eastus, as
// `GET /v1/tenants/{tenant}` shows it to the tenant itself.
func fairEntry(t *testing.T, h *harness, tenant string) (api.FairShare, api.FairShareEntry) {
	t.Helper()
	got, err := h.tenant(tenant).Tenant(h.ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if got.FairShare == nil {
		t.Fatalf("%s: no fair_share in %+v", tenant, got)
	}
	for _, e := range got.FairShare.Entries {
		if e.Flavor == "A100-80G" && e.Region == "eastus" {
			return *got.FairShare, e
		}
	}
	t.Fatalf("%s: no A100-80G/eastus entry in %+v", tenant, got.FairShare)
	return api.FairShare{}, api.FairShareEntry{}
}

// TestFairShareSurvivesRestart: with options.fair_share, contoso's 8 GPUs
// running for 6 hours show as decayed usage in `tenant show`; the server
// restarts on the same store file (the cycle wrote the history) and,
// 6 hours later, the decayed usage is that of 12 hours of continuous use:
// the restart lost nothing. Fabrikam, which ran nothing, has factor 1.
func TestFairShareSurvivesRestart(t *testing.T) {
	clk := newTestClock()
	hl := 24 * time.Hour
	opts := Options{RateLimit: -1, Clock: clk.Now, Scheduling: sched.Options{FairShare: sched.FairShare{HalfLife: hl}}}
	h := newHarness(t, testConfig, opts)
	c := h.tenant("contoso")
	if _, err := c.Submit(h.ctx, "contoso", api.WorkloadSpec{Name: "train", GPUs: 8000, Replicas: 1, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	clk.Advance(6 * time.Hour)
	h.s.Cycle(h.ctx)
	closed := func(hours float64) float64 { // 8 GPUs for hours, now
		return 8 * hl.Hours() / math.Ln2 * (1 - math.Exp2(-hours/hl.Hours()))
	}
	fs, e := fairEntry(t, h, "contoso")
	if math.Abs(e.DecayedGPUHours-closed(6)) > 1e-6 || fs.HalfLife != "24h" || !fs.AsOf.Equal(clk.Now()) {
		t.Fatalf("after 6h: %+v %+v, want %.6f GPU-h, half-life 24h, as of %v", fs, e, closed(6), clk.Now())
	}
	// contoso and fabrikam share customers' A100-80G/eastus 16:8.
	if math.Abs(e.Share-2.0/3) > 1e-9 || e.Usage != 1 || math.Abs(e.Factor-math.Exp2(-1.5)) > 1e-9 {
		t.Fatalf("contoso: %+v, want share 2/3, all the usage, factor 2^-1.5", e)
	}
	if _, f := fairEntry(t, h, "fabrikam"); f.Factor != 1 || f.DecayedGPUHours != 0 {
		t.Fatalf("fabrikam ran nothing: %+v", f)
	}
	// A tenant sees its own entries only: fabrikam's token gets no part of
	// contoso's (the sibling sums are fractions, no names), and cannot read
	// contoso's tenant at all.
	fab := h.tenant("fabrikam")
	if got, err := fab.Tenant(h.ctx, "fabrikam"); err != nil || strings.Contains(fmt.Sprint(got), "contoso") {
		t.Fatalf("fabrikam's view names contoso: %+v, %v", got, err)
	}
	if _, err := fab.Tenant(h.ctx, "contoso"); err == nil {
		t.Fatal("fabrikam read contoso's tenant and fair share")
	}

	// Restart on the same file with the same options.
	s2 := reopenWith(t, h, opts)
	st := h.st
	if got := s2.fair.current(); got == nil || len(got.Entries) == 0 {
		t.Fatalf("restarted server has no history: %+v", got)
	}
	clk.Advance(6 * time.Hour)
	s2.Cycle(h.ctx)
	var dec float64
	for _, x := range s2.fair.current().Entries {
		if x.Tenant == "contoso" && x.Flavor == "A100-80G" && x.Region == "eastus" {
			dec = x.GPUHours
		}
	}
	if math.Abs(dec-closed(12)) > 1e-6 {
		t.Fatalf("12h after the start, across a restart: %.6f GPU-h, want %.6f", dec, closed(12))
	}
	// Shutdown writes the last state whatever its age.
	clk.Advance(10 * time.Second)
	s2.Cycle(h.ctx)
	ctx, cancel := context.WithCancel(h.ctx)
	s2.opts.Interval = time.Hour // Run's loop cycles once, then stops
	go func() {
		for !s2.ready.Load() {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	s2.Run(ctx)
	var stored float64
	if err := st.View(h.ctx, func(tx store.ReadTx) error {
		hist, err := readFairShare(tx)
		for _, x := range hist.Entries {
			if x.Tenant == "contoso" && x.Flavor == "A100-80G" && x.Region == "eastus" {
				stored = x.GPUHours
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := closed(12 + 10.0/3600); math.Abs(stored-want) > 1e-6 {
		t.Fatalf("stored at shutdown: %.6f GPU-h, want %.6f", stored, want)
	}
}

// TestFairShareOff: without options.fair_share a tenant shows no
// fair_share and the store holds no history.
func TestFairShareOff(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c := h.tenant("contoso")
	if _, err := c.Submit(h.ctx, "contoso", api.WorkloadSpec{Name: "train", GPUs: 8000, Replicas: 1, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	got, err := c.Tenant(h.ctx, "contoso")
	if err != nil || got.FairShare != nil {
		t.Fatalf("tenant: %+v, %v; want no fair_share", got, err)
	}
	if err := h.st.View(h.ctx, func(tx store.ReadTx) error {
		hist, err := readFairShare(tx)
		if hist != nil {
			t.Errorf("history stored with fair share off: %+v", hist)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFairShareShowsNewerStored: a replica whose own history is older
// than the stored one (it led before; another leader wrote since) shows
// the stored one.
func TestFairShareShowsNewerStored(t *testing.T) {
	clk := newTestClock()
	h := newHarness(t, testConfig, Options{RateLimit: -1, Clock: clk.Now, Scheduling: sched.Options{FairShare: sched.FairShare{HalfLife: time.Hour}}})
	h.s.Cycle(h.ctx) // this replica's history, as of now
	newer := tenancy.History{At: clk.Now().Add(time.Hour), Entries: []tenancy.HistoryEntry{{Tenant: "contoso", Flavor: "A100-80G", Region: "eastus", GPUHours: 123}}}
	data, err := json.Marshal(newer)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.st.Update(h.ctx, func(tx store.WriteTx) error {
		return store.Put(tx, &store.Setting{Name: settingFairShare, Value: data}, store.Any)
	}); err != nil {
		t.Fatal(err)
	}
	if fs, e := fairEntry(t, h, "contoso"); e.DecayedGPUHours != 123 || !fs.AsOf.Equal(newer.At) {
		t.Fatalf("shows %+v %+v, want the stored 123 GPU-h as of %v", fs, e, newer.At)
	}
}
