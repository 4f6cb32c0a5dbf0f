package server

import (
	"cmp"
	"context"
	"maps"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/names"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Metering (docs/cost.md): every run a plan places opens one usage record
// per replica in the plan's transaction, priced at the prices in force in
// that cycle (the catalog's, the live spot market's); the transactions
// that end runs close them (store.ApplyPlanMetered for preemptions,
// store.EndRun for exits and cancels), and each cycle closes the records
// of runs no longer running that nothing closed (closeOrphanUsage).

// metering makes the usage records of the runs placed by a plan computed
// over wd with the cycle's spot prices and the config's pricing (price
// overrides, the tenants' plans; nil: none).
func metering(wd *world, spotPrices []sched.SpotPrice, pricing *meter.Pricing) store.Metering {
	prices := meter.Prices{Catalog: wd.Catalog, Spot: make(map[meter.SpotKey]float64, len(spotPrices)), Pricing: pricing}
	for _, p := range spotPrices {
		prices.Spot[meter.SpotKey{Model: p.Model, Region: p.Region}] = p.PerGPUHour
	}
	created := make(map[string]int64, len(wd.Tenants))
	for _, t := range wd.Tenants {
		created[t.Name] = t.Meta.Created
	}
	paths := map[string][]string{}
	pathOf := func(tenant string) []string {
		if p, ok := paths[tenant]; ok {
			return p
		}
		var p []string
		if wd.Tree != nil {
			if i, ok := wd.Tree.Lookup(tenant); ok {
				for _, j := range wd.Tree.Path(i) {
					p = append(p, wd.Tree.Tenants[j].Name)
				}
				slices.Reverse(p)
			}
		}
		paths[tenant] = p
		return p
	}
	return func(w *store.Workload, a *workload.Assignment) []meter.Record {
		charge := meter.ChargeOf(w.Spec.Priority, a)
		out := make([]meter.Record, 0, len(a.Replicas))
		for i, rep := range a.Replicas {
			r := meter.Record{Workload: w.Key(), Replica: i, Tenant: w.Tenant, TenantRev: created[w.Tenant], Path: pathOf(w.Tenant),
				Kind: w.Spec.Kind.String(), Class: w.Spec.Labels["class"], Preemptible: w.Spec.Preemptible, Model: a.Flavor, Region: a.Region, Node: rep.Node,
				GPUs: meter.ReplicaGPUs(rep, w.Spec.GPUs), Start: a.ReplicaStart(i), Charge: charge}
			if n, ok := wd.Fleet.Node(rep.Node); ok && n.SKU != nil {
				r.SKU = n.SKU.Name
				r.UnitPrice, r.ListPrice, r.ContractedPrice = prices.Quote(n.SKU, a.Region, charge, r.Path)
			}
			out = append(out, r)
		}
		return out
	}
}

// spotSegment is the least a spot record runs before a price change
// splits it: the live market's price moves every minute, and a record a
// minute would be 1,440 a day per replica; so at most one an hour, each
// at the price in force at its start.
const spotSegment = time.Hour

// repriceSpot splits, at now, each open spot record at least spotSegment
// old whose unit price is no longer the one in force (the cycle's spot
// market, the config's pricing): the part before now keeps the price it
// started with, the new record from now has the new price
// (store.SplitUsage, one transaction). It looks at the open records when
// the spot prices differ from the last cycle's, once after a start, and
// while a record that differs is not yet spotSegment old.
func (s *Server) repriceSpot(ctx context.Context, wd *world, spotPrices []sched.SpotPrice, now time.Time) {
	cur := make(map[meter.SpotKey]float64, len(spotPrices))
	for _, p := range spotPrices {
		cur[meter.SpotKey{Model: p.Model, Region: p.Region}] = p.PerGPUHour
	}
	s.spotMu.Lock()
	defer s.spotMu.Unlock()
	if s.spotSeen && maps.Equal(cur, s.spotLast) {
		return
	}
	prices := meter.Prices{Catalog: wd.Catalog, Spot: cur, Pricing: s.opts.Pricing}
	n, deferred := 0, false
	err := s.st.Update(ctx, func(tx store.WriteTx) error {
		n, deferred = 0, false
		var runs []string
		if err := store.OpenUsage(tx, func(k, _ string, _ time.Time) bool { runs = append(runs, k); return true }); err != nil {
			return err
		}
		for _, run := range runs {
			split, err := store.SplitUsage(tx, run, now, func(prev, r *meter.Record) bool {
				if r.Charge != meter.ChargeSpot || wd.Catalog == nil {
					return false
				}
				sku, ok := wd.Catalog.SKU(r.SKU)
				if !ok {
					return false
				}
				unit, list, contracted := prices.Quote(sku, r.Region, r.Charge, r.Path)
				if math.Abs(unit-r.UnitPrice) < 1e-12 {
					return false
				}
				if r.Start.Sub(prev.Start) < spotSegment { // r starts now; prev is the open record
					deferred = true
					return false
				}
				r.UnitPrice, r.ListPrice, r.ContractedPrice = unit, list, contracted
				return true
			})
			if err != nil {
				return err
			}
			if split {
				n++
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("metering: repricing spot records", "err", err)
		}
		return
	}
	s.spotSeen, s.spotLast = !deferred, cur
	if n > 0 {
		s.log.Info("metering: spot price changed, records split", "records", n)
	}
}

// orphanUsage returns the keys of the open usage records whose run is
// not the current run of a live workload of wd (nil when none).
func orphanUsage(tx store.ReadTx, wd *world) ([]string, error) {
	var keys []string
	byKey := map[string]*store.Workload{} // the running ones: about as many as the open records
	for _, x := range wd.Workloads {
		if x.State == store.StateRunning && x.Running != nil {
			byKey[x.Key()] = x
		}
	}
	err := store.OpenUsage(tx, func(k, wkey string, start time.Time) bool {
		x := byKey[wkey]
		if x == nil || x.State != store.StateRunning || x.Running == nil || !x.Running.HasStart(start) {
			keys = append(keys, k)
		}
		return true
	})
	return keys, err
}

// closeOrphanUsage closes at now the open records of runs that no longer
// run (the safety net: every path that ends a run closes its records, so
// this finds none unless one was missed). It rechecks each in the
// transaction.
func (s *Server) closeOrphanUsage(ctx context.Context, keys []string, now time.Time) {
	if len(keys) == 0 {
		return
	}
	var n int
	err := s.st.Update(ctx, func(tx store.WriteTx) error {
		var err error
		n, err = store.CloseOrphanUsage(tx, now, keys)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("metering: closing usage records of runs that ended", "err", err)
		}
		return
	}
	if n > 0 {
		s.log.Warn("metering: closed usage records no transaction closed", "records", n)
	}
}

// listUsage answers GET /v1/usage-records: the records whose interval
// meets [since, until) (default: the last 30 days), in start order; a
// tenant token sees its own tenant's only (of the tenant as it exists
// now, not of an earlier tenant of the same name).
func (s *Server) listUsage(w http.ResponseWriter, r *http.Request) error {
	now := s.now()
	since, until, err := usageWindow(r, now)
	if err != nil {
		return err
	}
	pg, err := s.newPage(r)
	if err != nil {
		return err
	}
	c := who(r)
	err = s.st.View(r.Context(), func(tx store.ReadTx) error {
		var rev int64
		if !c.admin {
			t, err := store.Get[store.Tenant](tx, c.tenant)
			if err != nil {
				return nil // gone: nothing of its own
			}
			rev = t.Meta.Created
		}
		return store.ScanUsage(tx, pg.after, until, func(k string, x *meter.Record) bool {
			if !c.admin && (x.Tenant != c.tenant || x.TenantRev != rev) {
				return true
			}
			if _, _, ok := x.Span(since, until); !ok {
				return true
			}
			return pg.add(k, x)
		})
	})
	if err != nil {
		return err
	}
	pg.write(w)
	return nil
}

// usageWindow reads ?since and ?until (durations back from now, RFC 3339
// times or dates).
func usageWindow(r *http.Request, now time.Time) (since, until time.Time, err error) {
	q := r.URL.Query()
	until = now
	if v, ok := q["until"]; ok {
		if until, err = meter.ParseTime("until", v[0], now); err != nil {
			return since, until, apiErr(http.StatusBadRequest, api.CodeInvalid, "until", "%v", err)
		}
	}
	since = until.AddDate(0, 0, -30)
	if v, ok := q["since"]; ok {
		if since, err = meter.ParseTime("since", v[0], now); err != nil {
			return since, until, apiErr(http.StatusBadRequest, api.CodeInvalid, "since", "%v", err)
		}
	}
	if err := meter.Window(since, until); err != nil {
		return since, until, apiErr(http.StatusBadRequest, api.CodeInvalid, "since", "%v", err)
	}
	return since, until, nil
}

// costCollector exports the metered use as counters: GPU-hours and cost
// (USD) by tenant and price class (charge), the closed records' totals
// and the open ones' use so far, read from the store at scrape time. A
// series never goes down (a record closed a little before a scrape's
// clock is held at the last value shown).
type costCollector struct {
	s          *Server
	cost, gpuh *prometheus.Desc
	mu         sync.Mutex
	last       map[[2]string][2]float64
}

func newCostCollector(s *Server) *costCollector {
	l := []string{"tenant", "price_class"}
	return &costCollector{s: s, last: map[[2]string][2]float64{},
		cost: prometheus.NewDesc("arbiter_cost_usd_total", "Metered cost of GPU use in USD (at the unit price in force when each run started), by tenant and price class (guarantee, borrowed, reservation, spot).", l, nil),
		gpuh: prometheus.NewDesc("arbiter_gpu_hours_total", "Metered GPU-hours, by tenant and price class (guarantee, borrowed, reservation, spot).", l, nil),
	}
}

func (c *costCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.cost; ch <- c.gpuh }

func (c *costCollector) Collect(ch chan<- prometheus.Metric) {
	var ts []store.UsageTotal
	now := c.s.now()
	err := c.s.st.View(context.Background(), func(tx store.ReadTx) error {
		var err error
		ts, err = store.UsageTotals(tx, now)
		return err
	})
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range ts {
		k := [2]string{t.Tenant, t.Charge.String()}
		v := c.last[k]
		v[0], v[1] = max(v[0], t.GPUHours), max(v[1], t.Cost)
		c.last[k] = v
		ch <- prometheus.MustNewConstMetric(c.gpuh, prometheus.CounterValue, v[0], k[0], k[1])
		ch <- prometheus.MustNewConstMetric(c.cost, prometheus.CounterValue, v[1], k[0], k[1])
	}
}

// costReport answers GET /v1/cost-report: the cost report (meter.Report)
// over [since, until) (default: the last 30 days) grouped by group_by
// (default tenant), summed here from the stored records read in place
// (store.ScanUsageWindowRaw, meter.Summer: decoded and summed on every
// core while the store is read; a record whose tuple the store numbered,
// store.ScanUsageTuples, from its head alone) so that no record crosses the API. tenant=T
// narrows it to T's subtree as it is now (T and its descendants, each the
// tenant of its name that exists now). The admin sees every record; a
// tenant token its own subtree's only: tenant=T outside it reports
// nothing.
func (s *Server) costReport(w http.ResponseWriter, r *http.Request) error {
	now := s.now()
	since, until, err := usageWindow(r, now)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	by, err := meter.ParseGroupBy("group_by", q.Get("group_by"))
	if err != nil {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "group_by", "%v", err)
	}
	root := q.Get("tenant")
	if _, ok := q["tenant"]; ok && !names.Valid(root) {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "tenant", "tenant: %q is not a tenant name", root)
	}
	c := who(r)
	var rep meter.Report
	err = s.st.View(r.Context(), func(tx store.ReadTx) error {
		var scope tenantRevs // nil: every record
		if !c.admin || root != "" {
			ts, err := store.List[store.Tenant](tx, "")
			if err != nil {
				return err
			}
			scope = subtree(ts, cmp.Or(root, c.tenant))
			if !c.admin && root != "" && !subtree(ts, c.tenant).has(root) {
				scope = tenantRevs{} // another's: nothing
			}
		}
		var keep func(v *meter.RecordView) bool
		if scope != nil {
			keep = func(v *meter.RecordView) bool {
				rev, ok := scope[string(v.Tenant)]
				return ok && rev == v.TenantRev
			}
		}
		sum := meter.NewSummer(since, until, by, keep)
		store.ScanUsageTuples(tx, func(n uint32, tuple []byte) bool {
			sum.Tuple(n, tuple)
			return true
		})
		store.ScanUsageWindowRaw(tx, since, until, func(data []byte) bool {
			sum.Add(data)
			return true
		})
		var err error
		rep, err = sum.Report()
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

// tenantRevs maps tenant names to the revision that created them.
type tenantRevs map[string]int64

func (t tenantRevs) has(name string) bool { _, ok := t[name]; return ok }

// subtree is root and its descendants among ts, with their creating
// revisions; empty when root is not among them.
func subtree(ts []*store.Tenant, root string) tenantRevs {
	kids := map[string][]*store.Tenant{}
	out := tenantRevs{}
	var top *store.Tenant
	for _, t := range ts {
		kids[t.Parent] = append(kids[t.Parent], t)
		if t.Name == root {
			top = t
		}
	}
	if top == nil {
		return out
	}
	next := []*store.Tenant{top}
	for len(next) > 0 {
		t := next[len(next)-1]
		next = next[:len(next)-1]
		if out.has(t.Name) {
			continue // a cycle cannot be stored; stay safe anyway
		}
		out[t.Name] = t.Meta.Created
		next = append(next, kids[t.Name]...)
	}
	return out
}
