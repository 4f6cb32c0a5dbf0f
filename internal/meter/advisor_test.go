package meter

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// advisorInput is a hand-built window of 100 h: acme holds its
// reservation r1 (8 GPUs on n1) 8 GPUs for 20 h, runs 2 GPUs within its
// guarantee for 50 h, 1 for the last 60 h, and 3 preemptible GPUs
// borrowed all window; beta uses its reservation r2 (4 GPUs) for 60 h and
// its 2-GPU guarantee all window; acme has two workloads blocked by its
// limit.
func advisorInput() AdvisorInput {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Hour))) }
	rec := func(w, tenant string, node fleet.NodeID, gpus int, from, to float64, c Charge, pre bool) Record {
		r := Record{Workload: w, Tenant: tenant, Path: []string{"org", tenant}, SKU: "nd96", Model: "A100", Region: "eastus", Node: node,
			GPUs: resource.GPUs(gpus), Start: h(from), End: h(to), Charge: c, Preemptible: pre}
		if to == 0 {
			r.End = time.Time{}
		}
		return r
	}
	return AdvisorInput{
		Since: t0, Until: h(100), IdleThreshold: 0.5,
		Records: []Record{
			rec("acme/resv", "acme", "n1", 8, 0, 20, ChargeReservation, false),
			rec("acme/g1", "acme", "n2", 2, -10, 50, ChargeGuarantee, false), // starts before the window: 50 h in it
			rec("acme/g2", "acme", "n2", 1, 40, 100, ChargeGuarantee, false),
			rec("acme/b1", "acme", "n3", 3, 0, 0, ChargeBorrowed, true), // still open: counts to Until
			rec("beta/resv", "beta", "n4", 4, 20, 80, ChargeReservation, false),
			rec("beta/g", "beta", "n5", 2, 0, 100, ChargeGuarantee, false),
			rec("beta/spot", "beta", "n5", 2, 0, 100, ChargeSpot, true), // spot already: no use-spot
		},
		Reservations: []AdvisorReservation{
			{Tenant: "acme", Name: "r1", Region: "eastus", SKU: "nd96", Model: "A100", GPUs: 8, Nodes: []fleet.NodeID{"n1"}, Price: 2},
			{Tenant: "beta", Name: "r2", Region: "eastus", SKU: "nd96", Model: "A100", GPUs: 4, Nodes: []fleet.NodeID{"n4"}, Price: 2},
		},
		Guarantees: []AdvisorGuarantee{
			{Tenant: "acme", Model: "A100", Region: "eastus", Guaranteed: resource.GPUs(4)},
			{Tenant: "beta", Model: "A100", Guaranteed: resource.GPUs(2)},
		},
		Pending: []AdvisorPending{
			{Tenant: "acme", Workload: "acme/w1", LimitTenant: "acme", Model: "A100", Region: "eastus", Requested: resource.GPUs(4), Used: resource.GPUs(20), Limit: resource.GPUs(22)},
			{Tenant: "acme", Workload: "acme/w2", LimitTenant: "acme", Model: "A100", Region: "eastus", Requested: resource.GPUs(2), Used: resource.GPUs(20), Limit: resource.GPUs(22)},
		},
		Price: func(m fleet.ModelID, region string) (UnitPrices, bool) {
			if m == "A100" && region == "eastus" {
				return UnitPrices{OnDemand: 4, Spot: 1.5, Reserved1Y: 2.5, Reserved3Y: 1.8}, true
			}
			return UnitPrices{}, false
		},
	}
}

// TestAdvise: each kind's numbers, worked out by hand, and the order.
func TestAdvise(t *testing.T) {
	got := Advise(advisorInput())
	type want struct {
		kind, target string
		saving       float64
		ev           map[string]float64
	}
	wants := []want{
		// r1: 800 GPU-h reserved, 160 used, 640 idle (80%): 640/100×730 =
		// 4672 idle GPU-h a month × $2.
		{KindIdleReservation, "acme/r1", 9344, map[string]float64{"reserved_gpu_hours": 800, "used_gpu_hours": 160, "idle_share": 0.8, "idle_gpu_hours_per_month": 4672}},
		// acme on demand: 5 GPUs [0,40), 6 [40,50), 4 [50,100): baseline 4;
		// 4×730×(4−2.5) = 4380 (1y), 4×730×(4−1.8) = 6424 (3y).
		{KindReserveBaseline, "acme A100/eastus", 6424, map[string]float64{"baseline_gpus": 4, "saving_1y_usd_per_month": 4380, "saving_3y_usd_per_month": 6424}},
		// b1: 3 GPUs × 100 h = 300 GPU-h, 2190 a month × (4 − 1.5).
		{KindUseSpot, "acme A100/eastus", 5475, map[string]float64{"gpu_hours": 300, "gpu_hours_per_month": 2190, "workloads": 1}},
		// beta: 2 GPUs all window: 2×730×2.2.
		{KindReserveBaseline, "beta A100/eastus", 3212, map[string]float64{"baseline_gpus": 2, "saving_1y_usd_per_month": 2190}},
		// 20 used + 6 asked − 22 = 4 GPUs beyond the limit.
		{KindQuotaIncrease, "acme A100/eastus", 0, map[string]float64{"needed_gpus": 4, "requested_gpus": 6, "pending_workloads": 2}},
		// acme's 4-GPU guarantee: 400 GPU-h; 2×50 + 1×60 = 160 used (40%).
		{KindUnusedGuarantee, "acme A100/eastus", 0, map[string]float64{"guaranteed_gpu_hours": 400, "used_gpu_hours": 160, "used_share": 0.4}},
	}
	if len(got) != len(wants) {
		for _, r := range got {
			t.Logf("%s %s %.2f %s", r.Kind, r.Target, r.Saving, EvidenceString(r.Evidence))
		}
		t.Fatalf("%d recommendations, want %d", len(got), len(wants))
	}
	for i, w := range wants {
		r := got[i]
		if r.Kind != w.kind || r.Target != w.target || math.Abs(r.Saving-w.saving) > 1e-6 {
			t.Errorf("#%d: %s %s %.2f, want %s %s %.2f", i, r.Kind, r.Target, r.Saving, w.kind, w.target, w.saving)
		}
		for k, v := range w.ev {
			if math.Abs(r.Evidence[k]-v) > 1e-6 {
				t.Errorf("#%d %s: %s = %v, want %v", i, r.Kind, k, r.Evidence[k], v)
			}
		}
		if (w.saving == 0) != (r.SavingNote != "") {
			t.Errorf("#%d %s: saving note %q", i, r.Kind, r.SavingNote)
		}
	}
}

// TestAdviseThresholds: a higher idle threshold keeps r1 (80% idle) and
// drops acme's guarantee (60% idle); 90% drops both; an empty window
// advises nothing.
func TestAdviseThresholds(t *testing.T) {
	count := func(in AdvisorInput, kind string) int {
		n := 0
		for _, r := range Advise(in) {
			if r.Kind == kind {
				n++
			}
		}
		return n
	}
	in := advisorInput()
	in.IdleThreshold = 0.7
	if a, b := count(in, KindIdleReservation), count(in, KindUnusedGuarantee); a != 1 || b != 0 {
		t.Errorf("at 70%%: %d idle reservations, %d unused guarantees; want 1, 0", a, b)
	}
	in.IdleThreshold = 0.9
	if a, b := count(in, KindIdleReservation), count(in, KindUnusedGuarantee); a != 0 || b != 0 {
		t.Errorf("at 90%%: %d idle reservations, %d unused guarantees; want 0, 0", a, b)
	}
	in.Until = in.Since
	if got := Advise(in); len(got) != 0 {
		t.Errorf("empty window: %d recommendations", len(got))
	}
}

func TestParseAdvisorFlags(t *testing.T) {
	if d, err := ParseWindow("--window", "30d"); err != nil || d != 30*24*time.Hour {
		t.Errorf("30d: %v %v", d, err)
	}
	if v, err := ParseThreshold("--idle-threshold", "50%"); err != nil || v != 0.5 {
		t.Errorf("50%%: %v %v", v, err)
	}
	for _, s := range []string{"", "0d", "-3h", "soon"} {
		if _, err := ParseWindow("--window", s); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--window") {
			t.Errorf("window %q: %v", s, err)
		}
	}
	for _, s := range []string{"", "100%", "-1", "half", "NaN"} {
		if _, err := ParseThreshold("--idle-threshold", s); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--idle-threshold") {
			t.Errorf("threshold %q: %v", s, err)
		}
	}
}
