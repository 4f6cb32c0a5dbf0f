package server

import (
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/spot"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// spotMarket is the live spot market: package spot's market over the
// current fleet, stepped by every scheduling cycle on the server's clock
// with the utilization of the work running then and the prices policies
// set. It is the simulator's market with the simulator's inputs; what it
// quotes goes to the scheduler (max_price admission), forces evictions
// (spot work whose max_price the price passed: the agents get the spot
// notice), answers GET /v1/spot-prices and is exported in /metrics. Its
// state survives restarts (spotstate.go).
type spotMarket struct {
	mu    sync.Mutex
	fleet *fleet.Fleet // the fleet m was built for
	m     *spot.Market
	// restore is the state saved before a restart, taken up when the
	// markets are first built.
	restore *spot.Saved
	// written is the state last written (or read back), at writtenAt.
	written     spot.Saved
	haveWritten bool
	writtenAt   time.Time
}

// spotPriceDesc is the /metrics gauge of the spot prices.
var spotPriceDesc = prometheus.NewDesc("arbiter_spot_price_usd_per_gpu_hour",
	"Spot price per GPU model and region (source: market or policy).", []string{"model", "region", "source"}, nil)

// spotSet turns the prices the policies set into the market's input.
func spotSet(ps []sched.SpotPrice) map[spot.Key]float64 {
	if len(ps) == 0 {
		return nil
	}
	out := make(map[spot.Key]float64, len(ps))
	for _, p := range ps {
		out[spot.Key{Model: p.Model, Region: p.Region}] = p.PerGPUHour
	}
	return out
}

// input steps the market to now over the fleet f and the workloads ws
// (running and pending, as the scheduler sees them), with set the prices
// policies set, and returns the scheduler's spot prices and evict with the
// running spot work the prices force out added (a new map when it adds).
func (sm *spotMarket) input(f *fleet.Fleet, now time.Time, ws []*workload.Workload, set map[spot.Key]float64, evict map[workload.ID]string) ([]sched.SpotPrice, map[workload.ID]string) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.m == nil || sm.fleet != f {
		m := spot.New(f)
		if sm.m == nil && sm.restore != nil {
			m.Restore(*sm.restore)
			sm.restore = nil
		}
		sm.m = m.Carry(sm.m)
		sm.fleet = f
	}
	sm.m.Advance(now, sm.m.Used(f, ws), set)
	qs := sm.m.Quotes()
	prices := sched.SpotInput(nil, qs)
	out, copied := evict, false
	for _, e := range sm.m.Evictions(f, ws) {
		if _, ok := evict[e.Workload.Name]; ok {
			continue // already leaving, for another reason
		}
		if !copied { // evict may belong to the caller's state
			out, copied = make(map[workload.ID]string, len(evict)+1), true
			maps.Copy(out, evict)
		}
		out[e.Workload.Name] = e.Reason()
	}
	return prices, out
}

// quotes returns a copy of the current quotes (none before the first cycle).
func (sm *spotMarket) quotes() []spot.Quote {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.m == nil {
		return nil
	}
	return append([]spot.Quote(nil), sm.m.Quotes()...)
}

// Describe and Collect export the quotes as spotPriceDesc.
func (sm *spotMarket) Describe(ch chan<- *prometheus.Desc) { ch <- spotPriceDesc }

// Collect sends one gauge per market.
func (sm *spotMarket) Collect(ch chan<- prometheus.Metric) {
	for _, q := range sm.quotes() {
		ch <- prometheus.MustNewConstMetric(spotPriceDesc, prometheus.GaugeValue, q.PerGPUHour, string(q.Model), q.Region, quoteSource(q))
	}
}

func quoteSource(q spot.Quote) string {
	if q.Firm {
		return "policy"
	}
	return "market"
}

// listSpotPrices answers the current spot price of each GPU model and
// region; any authenticated tenant may read them, to set its max_price.
func (s *Server) listSpotPrices(w http.ResponseWriter, r *http.Request) error {
	out := []api.SpotPrice{}
	for _, q := range s.spot.quotes() {
		out = append(out, api.SpotPrice{Model: string(q.Model), Region: q.Region, USDPerGPUHour: q.PerGPUHour,
			CatalogUSDPerGPUHour: q.Catalog, Utilization: q.Utilization, Source: quoteSource(q),
			MinMaxPrice: spot.AdmitBound(q.PerGPUHour, q.Firm)})
	}
	return writeSlice(s, w, r, out)
}
