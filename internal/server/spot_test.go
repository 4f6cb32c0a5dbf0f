package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

func spotSpec(name string, gpus int, maxPrice float64) api.WorkloadSpec {
	return api.WorkloadSpec{Name: name, GPUs: api.GPUs(gpus * 1000), Replicas: 1, Flavors: []string{"H100-80G"},
		Regions: []string{"eastus"}, Priority: "spot", MaxPrice: maxPrice}
}

// h100Catalog is the catalog's spot price of H100 in eastus per GPU-hour
// (Standard_ND96isr_H100_v5: $29.50 for 8 GPUs).
const h100Catalog = 29.50 / 8

// TestSpotMaxPriceAdmission is issue 13's case: a job with max
// $0.01/GPU-h is not placed on H100 at the catalog's spot price (about
// $3.69), why names both prices, and the price is visible in
// GET /v1/spot-prices and /metrics. Work that pays enough runs.
func TestSpotMaxPriceAdmission(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c := h.tenant("fabrikam")
	for _, s := range []api.WorkloadSpec{spotSpec("cheap", 1, 0.01), spotSpec("fair", 1, 5)} {
		if _, err := c.Submit(h.ctx, "fabrikam", s); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx)
	w, err := c.Why(h.ctx, "fabrikam", "cheap")
	if err != nil {
		t.Fatal(err)
	}
	if w.State != "Pending" || w.Code != "SpotPrice" || !strings.Contains(w.Reason, "$3.69") || !strings.Contains(w.Reason, "$0.01") {
		t.Errorf("a max $0.01 spot job under the H100 catalog price: %+v, want Pending, SpotPrice, naming $3.69 and $0.01", w)
	}
	if w, err := c.Why(h.ctx, "fabrikam", "fair"); err != nil || w.State != "Running" {
		t.Errorf("a max $5 spot job: %+v (%v), want Running", w, err)
	}
	prices, err := c.SpotPrices(h.ctx) // a tenant may read them
	if err != nil {
		t.Fatal(err)
	}
	var got *api.SpotPrice
	for i := range prices {
		if prices[i].Model == "H100-80G" && prices[i].Region == "eastus" {
			got = &prices[i]
		}
	}
	if got == nil || got.USDPerGPUHour != h100Catalog || got.CatalogUSDPerGPUHour != h100Catalog || got.Source != "market" || got.MinMaxPrice != h100Catalog/0.8 {
		t.Fatalf("H100/eastus in GET /v1/spot-prices: %+v (all: %+v), want $%v from the market, min max price $%v", got, prices, h100Catalog, h100Catalog/0.8)
	}
	if len(prices) != 3 {
		t.Errorf("%d spot prices, want one per model and region of the fleet (3)", len(prices))
	}
	body := scrape(t, h)
	if !strings.Contains(body, `arbiter_spot_price_usd_per_gpu_hour{model="H100-80G",region="eastus",source="market"} 3.6875`) {
		t.Errorf("/metrics lacks the H100 spot price:\n%s", grepLines(body, "arbiter_spot"))
	}
}

// TestSpotEvictionWithNotice: running spot work is evicted, and its agent
// told with the spot notice, when the price rises above its max price,
// whether by utilization (the market moves toward the on-demand price as
// the GPUs fill, on the server's clock) or by a policy's set_spot_price.
func TestSpotEvictionWithNotice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		raise func(t *testing.T, h *harness, clk *testClock)
		price string // in the reason
	}{
		{"utilization", func(t *testing.T, h *harness, clk *testClock) {
			// The other H100 machine fills: the market is 100% used; its
			// price moves a sixtieth of the way to $12.29 each minute and
			// passes $5 after ten.
			if _, err := h.tenant("contoso").Submit(h.ctx, "contoso", api.WorkloadSpec{Name: "fill", GPUs: 8000, Replicas: 1,
				Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}}); err != nil {
				t.Fatal(err)
			}
			h.s.Cycle(h.ctx)
			clk.Advance(5 * time.Minute)
			h.s.Cycle(h.ctx)
			if w := workloadState(t, h, "rider"); w != "Running" {
				t.Fatalf("rider is %s after 5 minutes at full use, want Running (price below $5 still)", w)
			}
			clk.Advance(10 * time.Minute)
		}, "rose to $5."},
		{"policy", func(t *testing.T, h *harness, clk *testClock) {
			rules := "policies:\n  - name: surge\n    when: {metric: utilization, of: cluster, above: 1%}\n    then:\n      - {type: set_spot_price, target: flavor:H100-80G, price: $6/h}\n"
			if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "spot", Source: rules}); err != nil {
				t.Fatal(err)
			}
			h.s.TickPolicies(h.ctx)
		}, "rose to $6.00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newTestClock()
			h := newHarness(t, testConfig, Options{RateLimit: -1, Clock: clk.Now})
			c := h.tenant("fabrikam")
			if _, err := c.Submit(h.ctx, "fabrikam", spotSpec("rider", 8, 5)); err != nil {
				t.Fatal(err)
			}
			h.s.Cycle(h.ctx)
			x, err := c.Workload(h.ctx, "fabrikam", "rider")
			if err != nil || x.Running == nil {
				t.Fatalf("rider: %+v (%v), want it running at the catalog price", x, err)
			}
			node := x.Running.Replicas[0].Node
			reply, err := h.admin.Heartbeat(h.ctx, node, api.Heartbeat{})
			if err != nil || len(reply.Tasks) != 1 {
				t.Fatalf("heartbeat of %s: %+v (%v), want rider's task", node, reply, err)
			}
			ref := reply.Tasks[0].ReplicaRef

			tc.raise(t, h, clk)
			h.s.Cycle(h.ctx)
			x, err = c.Workload(h.ctx, "fabrikam", "rider")
			if err != nil {
				t.Fatal(err)
			}
			if x.Running != nil || x.Preemptions != 1 || !strings.Contains(x.LastPreemption, tc.price) || !strings.Contains(x.LastPreemption, "above max price $5.00") {
				t.Fatalf("rider after the price rose: running %v, %d preemptions, %q; want evicted, the reason naming %q and max price $5.00",
					x.Running != nil, x.Preemptions, x.LastPreemption, tc.price)
			}
			reply, err = h.admin.Heartbeat(h.ctx, node, api.Heartbeat{Running: []api.ReplicaRef{ref}})
			if err != nil {
				t.Fatal(err)
			}
			if len(reply.Notices) != 1 || reply.Notices[0].ReplicaRef.Workload != ref.Workload || reply.Notices[0].Reason != x.LastPreemption ||
				time.Duration(reply.Notices[0].After) != 30*time.Second {
				t.Fatalf("heartbeat after the eviction: notices %+v, want a 30s notice for %s with the reason", reply.Notices, ref.Workload)
			}
			h.s.Cycle(h.ctx)
			if w, err := c.Why(h.ctx, "fabrikam", "rider"); err != nil || w.Code != "SpotPrice" {
				t.Errorf("rider once evicted: %+v (%v), want Pending with SpotPrice (not placed again at the price)", w, err)
			}
		})
	}
}

func workloadState(t *testing.T, h *harness, name string) string {
	t.Helper()
	w, err := h.admin.Workload(h.ctx, "fabrikam", name)
	if err != nil {
		t.Fatal(err)
	}
	return w.State
}

// scrape reads /metrics with the admin token.
func scrape(t *testing.T, h *harness) string {
	t.Helper()
	req, _ := http.NewRequest("GET", h.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testAdmin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
