package server

import (
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
)

// advisor answers GET /v1/advisor: the advisor's recommendations over
// the window (?window, default 30d) at the idle threshold
// (?idle_threshold, default 50%), from the usage records, the
// reservations, the quota entries' guarantees, the catalog's prices and
// the pending work the last cycle found blocked by a quota limit
// (docs/cost.md, "The advisor"). The admin sees all; a tenant token its
// own tenant's.
func (s *Server) advisor(w http.ResponseWriter, r *http.Request) error {
	now := s.now()
	q := r.URL.Query()
	window, threshold := 30*24*time.Hour, 0.5
	var err error
	if v, ok := q["window"]; ok {
		if window, err = meter.ParseWindow("window", v[0]); err != nil {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "window", "%v", err)
		}
	}
	if v, ok := q["idle_threshold"]; ok {
		if threshold, err = meter.ParseThreshold("idle_threshold", v[0]); err != nil {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "idle_threshold", "%v", err)
		}
	}
	c := who(r)
	idx := s.why.Load()
	in := meter.AdvisorInput{Since: now.Add(-window), Until: now, IdleThreshold: threshold}
	err = s.st.View(r.Context(), func(tx store.ReadTx) error {
		wd, err := loadWorldWith(tx, s.cat.Load(), true, &s.live)
		if err != nil {
			return err
		}
		cat := wd.Catalog
		prices := meter.Prices{Catalog: cat, Pricing: s.opts.Pricing}
		rev := map[string]int64{}
		for _, t := range wd.Tenants {
			rev[t.Name] = t.Meta.Created
		}
		mine := func(tenant string) bool { return c.admin || tenant == c.tenant }
		err = store.ScanUsage(tx, "", in.Until, func(_ string, x *meter.Record) bool {
			if cr, ok := rev[x.Tenant]; !ok || cr != x.TenantRev || !mine(x.Tenant) {
				return true // a deleted tenant's, or an earlier tenant's of the name
			}
			if _, _, ok := x.Span(in.Since, in.Until); ok {
				in.Records = append(in.Records, *x)
			}
			return true
		})
		if err != nil {
			return err
		}
		for _, res := range wd.Reservations {
			if !mine(res.Tenant) {
				continue
			}
			ar := meter.AdvisorReservation{Tenant: res.Tenant, Name: res.Name, Region: res.Region, SKU: res.SKU,
				Nodes: res.Nodes, Start: res.Start, End: res.End}
			if sku, ok := cat.SKU(res.SKU); ok {
				ar.Model, ar.GPUs = sku.Model, res.Count*sku.GPUs
				ar.Price = meter.PerGPU(prices.Machine(sku, res.Region), sku.GPUs).Reserved1Y
			}
			in.Reservations = append(in.Reservations, ar)
		}
		if wd.Tree != nil {
			for _, t := range wd.Tree.Tenants {
				if !mine(t.Name) {
					continue
				}
				for _, q := range t.Quotas {
					in.Guarantees = append(in.Guarantees, meter.AdvisorGuarantee{Tenant: t.Name, Model: q.Key.Model, Region: q.Key.Region, Guaranteed: q.Guaranteed})
				}
			}
		}
		for _, x := range wd.Workloads {
			if x.State != store.StatePending || !mine(x.Tenant) {
				continue
			}
			p, ok := idx.Pending(x.Key())
			if !ok || p.Code != sched.ReasonQuotaLimit {
				continue
			}
			for _, b := range p.Blockers {
				if b.Code != sched.ReasonQuotaLimit {
					continue
				}
				ap := meter.AdvisorPending{Tenant: x.Tenant, Workload: x.Key(), LimitTenant: b.Tenant, Model: b.Flavor, Region: b.Region,
					Requested: b.Requested, Used: b.Used, Limit: b.Limit}
				if b.AllRegions {
					ap.Region = ""
				}
				in.Pending = append(in.Pending, ap)
				break // the first (most preferred) option's
			}
		}
		in.Price = catalogPrices(prices)
		return nil
	})
	if err != nil {
		return err
	}
	recs := meter.Advise(in)
	writeJSON(w, http.StatusOK, api.List[meter.Recommendation]{Items: recs})
	return nil
}

// catalogPrices prices a GPU model in a region per GPU-hour from the
// catalog (the config's overrides applied): the model's SKU with the
// lowest on-demand price per GPU there.
func catalogPrices(prices meter.Prices) func(fleet.ModelID, string) (meter.UnitPrices, bool) {
	cat := prices.Catalog
	memo := map[[2]string]meter.UnitPrices{}
	return func(m fleet.ModelID, region string) (meter.UnitPrices, bool) {
		k := [2]string{string(m), region}
		if p, ok := memo[k]; ok {
			return p, p.OnDemand > 0
		}
		var best meter.UnitPrices
		if cat != nil {
			for i := range cat.SKUs {
				sku := &cat.SKUs[i]
				if sku.Model != m || sku.GPUs <= 0 {
					continue
				}
				p := meter.PerGPU(prices.Machine(sku, region), sku.GPUs)
				if p.OnDemand > 0 && (best.OnDemand == 0 || p.OnDemand < best.OnDemand) {
					best = p
				}
			}
		}
		memo[k] = best
		return best, best.OnDemand > 0
	}
}
