package server

import (
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// The metrics follow Prometheus' naming: base units (seconds, GPUs),
// `_total` on counters, `_duration_seconds` on histograms of durations,
// one quantity per name (a sum over every label of a name means
// something: GPUs allocated, nodes). docs/server.md (Metrics) lists them
// with the names they replaced; deploy/prometheus/rules.yaml and
// deploy/grafana/arbiter.json use them, and their tests check every name
// they use is one registered here.
//
// Cardinality: every label but the HTTP ones comes from the
// configuration, not from workloads: tenants, quota entries (a tenant's
// flavors × regions), reservations, GPU models × regions, reason codes,
// priority classes and node states. The per-tenant gauges have one series
// per quota entry, at most tenants × flavors × regions of the config.
type metrics struct {
	reg *prometheus.Registry
	// collectors are what newMetrics and watchCommits registered (the
	// tests list the names they export).
	collectors []prometheus.Collector

	allocated    *prometheus.GaugeVec
	capacity     *prometheus.GaugeVec
	pendingW     *prometheus.GaugeVec
	pendingG     *prometheus.GaugeVec
	resCapacity  *prometheus.GaugeVec
	resAllocated *prometheus.GaugeVec
	// The quota entries' usage (tenantGauges): guaranteed, limit (absent
	// for an unlimited entry), used and borrowed.
	tenantGuaranteed *prometheus.GaugeVec
	tenantLimit      *prometheus.GaugeVec
	tenantUsed       *prometheus.GaugeVec
	tenantBorrowed   *prometheus.GaugeVec
	nodes            *prometheus.GaugeVec
	cycle            prometheus.Histogram
	// lastCycle has no labels; its one series appears with the first
	// cycle that completes, so a replica that never led exports none.
	lastCycle     *prometheus.GaugeVec
	placementWait *prometheus.HistogramVec
	preemptions   *prometheus.CounterVec
	conflicts     prometheus.Counter
	quietCycles   prometheus.Counter
	// commitWrites is the store's group commits (writes per commit), when
	// the store reports them (watchCommits).
	commitWrites prometheus.Histogram
	firings      *prometheus.CounterVec
	requests     *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	submissions  prometheus.Counter
	// The Prometheus source's queries (promsource.go), by server.
	promQuery  *prometheus.HistogramVec
	promErrors *prometheus.CounterVec
}

// placementWaitBuckets are the bounds of arbiter_placement_wait_seconds:
// from a cycle's pace (tenths of a second) to a gang that waits a day.
var placementWaitBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400}

// nodeStates are the values of arbiter_nodes' state label, each node in
// exactly one (see nodeState).
var nodeStates = api.NodeStates

// nodeState is a node's state as /metrics counts it and `node list`
// shows it: drained (an operator took it out of service, whatever its
// agent does), lost (its agent stopped heartbeating), down (registered
// or configured down), cordoned (an operator closed it to new work; its
// running work stays), ready.
func nodeState(n *store.Node) string {
	switch {
	case n.Drained:
		return "drained"
	case n.Down && n.Lost:
		return "lost"
	case n.Down:
		return "down"
	case n.Cordoned:
		return "cordoned"
	}
	return "ready"
}

// BuildInfo is what arbiter_build_info says about the binary.
type BuildInfo struct {
	Version string // default "dev"
	Commit  string // default "unknown"
}

func newMetrics(build BuildInfo) *metrics {
	if build.Version == "" {
		build.Version = "dev"
	}
	if build.Commit == "" {
		build.Commit = "unknown"
	}
	tenantEntry := []string{"tenant", "flavor", "region"}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		allocated: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_allocated_gpus",
			Help: "GPUs allocated to running workloads, by tenant, flavor and region."}, []string{"tenant", "flavor", "region"}),
		capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_capacity_gpus",
			Help: "GPUs of the fleet, by flavor and region (down, lost and drained nodes excluded)."}, []string{"flavor", "region"}),
		pendingW: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_pending_workloads",
			Help: "Workloads waiting after the last cycle, by tenant and reason code."}, []string{"tenant", "code"}),
		pendingG: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_pending_gpus",
			Help: "GPUs asked for by pending workloads, by tenant."}, []string{"tenant"}),
		resCapacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_reservation_capacity_gpus",
			Help: "GPUs a reservation holds for its owner."}, []string{"tenant", "reservation"}),
		resAllocated: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_reservation_allocated_gpus",
			Help: "GPUs of a reservation its owner's running work uses."}, []string{"tenant", "reservation"}),
		tenantGuaranteed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_tenant_guaranteed_gpus",
			Help: "A quota entry's guarantee, by tenant, flavor and region (region \"*\": the entry for every region); a parent's covers its subtree."}, tenantEntry),
		tenantLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_tenant_limit_gpus",
			Help: "A quota entry's limit (no series: unlimited), by tenant, flavor and region."}, tenantEntry),
		tenantUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_tenant_used_gpus",
			Help: "GPUs charged to a quota entry (running work outside reservations, active reservations' capacity), as arbiter usage shows them."}, tenantEntry),
		tenantBorrowed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_tenant_borrowed_gpus",
			Help: "Running work charged to a quota entry beyond its guarantee."}, tenantEntry),
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_nodes",
			Help: "Registered nodes by state: ready, drained (by an operator), lost (agent stopped heartbeating), down."}, []string{"state"}),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "arbiter_schedule_cycle_duration_seconds",
			Help: "Duration of a scheduling cycle: snapshot, schedule and apply.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		lastCycle: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_last_cycle_timestamp_seconds",
			Help: "Unix time of the end of the last scheduling cycle that completed (its plan applied, or nothing to apply); only on a replica that led."}, nil),
		placementWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "arbiter_placement_wait_seconds",
			Help: "From a workload's submission to its first placement, by priority class (workloads placed again after a preemption are not counted).", Buckets: placementWaitBuckets}, []string{"priority"}),
		preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "arbiter_preemptions_total",
			Help: "Workloads preempted, by the victim's tenant."}, []string{"tenant"}),
		quietCycles: prometheus.NewCounter(prometheus.CounterOpts{Name: "arbiter_quiet_cycles_total",
			Help: "Cycles answered without running the core: only submissions alike to work a settled cycle left pending had arrived."}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: "arbiter_plan_conflicts_total",
			Help: "Plans rejected because the state changed while they were computed."}),
		firings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "arbiter_policy_firings_total",
			Help: "Policy rule state changes, by policy, rule and event."}, []string{"policy", "rule", "event"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "arbiter_http_requests_total",
			Help: "API requests by method, route (the path pattern) and status code."}, []string{"method", "route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "arbiter_http_request_duration_seconds",
			Help: "API request latency by method and route (the path pattern).", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"method", "route"}),
		submissions: prometheus.NewCounter(prometheus.CounterOpts{Name: "arbiter_workload_submissions_total",
			Help: "Workloads accepted (durably stored)."}),
		promQuery: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "arbiter_prometheus_query_duration_seconds",
			Help: "Duration of a query of a policy's Prometheus source (source: prometheus), by server, failed ones included.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 13)}, []string{"server"}),
		promErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "arbiter_prometheus_query_errors_total",
			Help: "Failed queries of policies' Prometheus sources, by server and reason: timeout, unreachable, status (Prometheus refused the query), invalid (not a vector or scalar answer), shape (several series without target_label)."}, []string{"server", "reason"}),
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{Name: "arbiter_build_info",
		Help:        "Always 1; the labels say which binary serves: its version, commit and Go version.",
		ConstLabels: prometheus.Labels{"version": build.Version, "commit": build.Commit, "goversion": runtime.Version()}})
	buildInfo.Set(1)
	m.register(buildInfo, m.allocated, m.capacity, m.pendingW, m.pendingG, m.resCapacity, m.resAllocated,
		m.tenantGuaranteed, m.tenantLimit, m.tenantUsed, m.tenantBorrowed, m.nodes, m.cycle, m.lastCycle,
		m.placementWait, m.preemptions, m.conflicts, m.quietCycles, m.firings, m.requests, m.latency, m.submissions, m.promQuery, m.promErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// register registers cs and keeps them in m.collectors.
func (m *metrics) register(cs ...prometheus.Collector) {
	m.reg.MustRegister(cs...)
	m.collectors = append(m.collectors, cs...)
}

// commitObserver is a store that reports its group commits
// (store.BoltStore).
type commitObserver interface {
	ObserveCommits(func(store.CommitStats))
}

// watchCommits exports the store's group commits as histograms, as etcd
// exports its backend commits: how long each took (fsyncs included), how
// long its first writer waited for it, and how many writes it carried
// (the counts are the number of commits; the writes' sum, the writes).
func (m *metrics) watchCommits(st commitObserver) {
	dur := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "arbiter_store_commit_duration_seconds",
		Help: "Duration of a group commit of batched writes: the transaction and its fsyncs.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)})
	wait := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "arbiter_store_commit_wait_seconds",
		Help: "How long the first write of a group commit waited for the commit to start.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)})
	writes := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "arbiter_store_commit_writes",
		Help: "Batched writes carried by a group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 11)})
	m.register(dur, wait, writes)
	m.commitWrites = writes
	st.ObserveCommits(func(c store.CommitStats) {
		dur.Observe(c.Commit.Seconds())
		wait.Observe(c.Wait.Seconds())
		writes.Observe(float64(c.Writers))
	})
}

// observe sets the gauges from a cycle's world, input and plan, as the
// plan leaves them.
func (m *metrics) observe(w *world, in sched.Input, plan sched.Plan) {
	m.allocated.Reset()
	m.pendingG.Reset()
	m.pendingW.Reset()
	m.capacity.Reset()
	m.resCapacity.Reset()
	m.resAllocated.Reset()
	nodes := make(map[string]int, len(nodeStates))
	for _, n := range w.Nodes {
		nodes[nodeState(n)]++
	}
	for _, st := range nodeStates {
		m.nodes.WithLabelValues(st).Set(float64(nodes[st]))
	}
	tenants := make([]string, 0, len(w.Tree.Tenants))
	for _, t := range w.Tree.Tenants {
		tenants = append(tenants, t.Name)
	}
	m.tenantGauges(usage(w.after(plan, in.Now), tenants, "", in.Now))
	down := map[string]bool{}
	for _, id := range w.Down {
		down[string(id)] = true
	}
	for _, n := range w.Fleet.Nodes {
		if !down[string(n.ID)] {
			m.capacity.WithLabelValues(string(n.Model), n.Region).Add(float64(n.GPUs))
		}
	}
	resUse := map[string]resource.MilliGPU{}
	// The state after the plan, as sched.Apply would make it, without
	// copying every workload: the few workloads the plan changes are found
	// by index (touchedBy), so the pass below hashes none of the queue.
	touched := touchedBy(in.Workloads, plan)
	type allocKey struct {
		tenant string
		flavor fleet.ModelID
		region string
	}
	pendingG := map[string]resource.MilliGPU{}
	alloc := map[allocKey]resource.MilliGPU{}
	// A long queue is summed per run of one tenant's pending workloads.
	var runT string
	var runG resource.MilliGPU
	inRun := false
	next := 0 // the next of touched
	for i, x := range in.Workloads {
		var flavor fleet.ModelID
		var region string
		var onRes, running bool
		var t touch
		if next < len(touched) && touched[next].at == i {
			t = touched[next]
			next++
		}
		if t.placed {
			p := t.placement
			flavor, region, onRes, running = p.Flavor, p.Region, p.OnReservation, true
		} else if x.Running != nil && !t.evicted {
			flavor, region, onRes, running = x.Running.Flavor, x.Running.Region, x.Running.OnReservation, true
		}
		if !running {
			if !inRun || x.Tenant != runT {
				if inRun {
					pendingG[runT] = pendingG[runT].Add(runG)
				}
				runT, runG, inRun = x.Tenant, 0, true
			}
			runG = runG.Add(x.TotalGPUs())
			continue
		}
		k := allocKey{x.Tenant, flavor, region}
		total := x.TotalGPUs()
		if t.resized {
			total = x.GPUs.Mul(t.size)
		}
		alloc[k] = alloc[k].Add(total)
		if onRes {
			resUse[x.Reservation] = resUse[x.Reservation].Add(total)
		}
	}
	if inRun {
		pendingG[runT] = pendingG[runT].Add(runG)
	}
	for t, g := range pendingG {
		m.pendingG.WithLabelValues(t).Set(gpus(g))
	}
	for k, g := range alloc {
		m.allocated.WithLabelValues(k.tenant, string(k.flavor), k.region).Set(gpus(g))
	}
	// A tenant's entries mostly follow each other (deferred work is
	// listed in input order): counted in runs, one map write per run.
	pendingW := map[[2]string]int{}
	var run [2]string
	n := 0
	for _, p := range plan.Pending {
		k := [2]string{tenantOf(string(p.Workload)), string(p.Code)}
		if k != run {
			if n > 0 {
				pendingW[run] += n
			}
			run, n = k, 0
		}
		n++
	}
	if n > 0 {
		pendingW[run] += n
	}
	for k, n := range pendingW {
		m.pendingW.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
	for _, p := range plan.Preemptions {
		m.preemptions.WithLabelValues(tenantOf(string(p.Workload))).Inc()
	}
	for _, r := range w.Reservations {
		per := 0
		if sku, ok := w.Catalog.SKU(r.SKU); ok {
			per = sku.GPUs
		}
		m.resCapacity.WithLabelValues(r.Tenant, r.Name).Set(float64(per * r.Count))
		m.resAllocated.WithLabelValues(r.Tenant, r.Name).Set(gpus(resUse[r.Key()]))
	}
}

// touch is what a plan does to one of its input's workloads: places it
// (its first placement), evicts it, or resizes it.
type touch struct {
	at        int // index in the input's workloads
	placed    bool
	placement sched.Placement
	evicted   bool
	resized   bool
	size      int
}

// touchedBy lists what plan does to ws's workloads, by their index in ws,
// in index order. The workloads are in name order (the live cache's), so
// each is found by binary search; a name not found that way (workloads in
// another order) is found by a pass over them.
func touchedBy(ws []*workload.Workload, plan sched.Plan) []touch {
	n := len(plan.Placements) + len(plan.Preemptions) + len(plan.Resizes)
	if n == 0 {
		return nil
	}
	at := make(map[workload.ID]int, n) // index in out
	var out []touch
	get := func(id workload.ID) *touch {
		if j, ok := at[id]; ok {
			return &out[j]
		}
		at[id] = len(out)
		out = append(out, touch{at: -1})
		return &out[len(out)-1]
	}
	for _, x := range plan.Placements {
		if t := get(x.Workload); !t.placed {
			t.placed, t.placement = true, x
		}
	}
	for _, x := range plan.Preemptions {
		get(x.Workload).evicted = true
	}
	for _, x := range plan.Resizes {
		t := get(x.Workload)
		t.resized, t.size = true, x.To
	}
	missed := false
	for id, j := range at {
		if i, ok := slices.BinarySearchFunc(ws, id, func(w *workload.Workload, id workload.ID) int { return strings.Compare(string(w.Name), string(id)) }); ok {
			out[j].at = i
		} else {
			missed = true
		}
	}
	if missed {
		for i, w := range ws {
			if j, ok := at[w.Name]; ok && out[j].at < 0 {
				out[j].at = i
			}
		}
	}
	// A plan's workload not in ws changes nothing here.
	out = slices.DeleteFunc(out, func(t touch) bool { return t.at < 0 })
	slices.SortFunc(out, func(a, b touch) int { return a.at - b.at })
	return out
}

// tenantGauges sets the per-tenant gauges from the quota entries' usage,
// the computation GET /v1/usage answers with (quota.go), so /metrics and
// `arbiter usage` agree.
func (m *metrics) tenantGauges(us []api.Usage) {
	m.tenantGuaranteed.Reset()
	m.tenantLimit.Reset()
	m.tenantUsed.Reset()
	m.tenantBorrowed.Reset()
	for _, u := range us {
		m.tenantGuaranteed.WithLabelValues(u.Tenant, u.Flavor, u.Region).Set(u.Guaranteed)
		if u.Limit != nil {
			m.tenantLimit.WithLabelValues(u.Tenant, u.Flavor, u.Region).Set(*u.Limit)
		}
		m.tenantUsed.WithLabelValues(u.Tenant, u.Flavor, u.Region).Set(u.CurrentValue)
		m.tenantBorrowed.WithLabelValues(u.Tenant, u.Flavor, u.Region).Set(u.Borrowed)
	}
}

// placed observes the waits of the workloads a committed plan placed for
// the first time. The loop calls it once per commit, after the store
// returned: a transaction the store ran again, or a plan refused as
// stale, observes nothing.
func (m *metrics) placed(first []store.FirstPlacement) {
	for _, f := range first {
		m.placementWait.WithLabelValues(f.Priority.String()).Observe(max(0, f.Waited.Seconds()))
	}
}

// stepDown forgets the gauges of the state, which only the leader's
// cycles set: a replica whose term ended exports none of them, so sums
// over replicas count the fleet once (counters, histograms and the
// last-cycle timestamp stay: they are this replica's history).
func (m *metrics) stepDown() {
	for _, g := range []*prometheus.GaugeVec{m.allocated, m.capacity, m.pendingW, m.pendingG, m.resCapacity, m.resAllocated,
		m.tenantGuaranteed, m.tenantLimit, m.tenantUsed, m.tenantBorrowed, m.nodes} {
		g.Reset()
	}
}

// cycleDone records that a cycle completed at now.
func (m *metrics) cycleDone(now time.Time) {
	m.lastCycle.WithLabelValues().Set(float64(now.UnixNano()) / 1e9)
}

// quiet adds the workloads a quiet cycle left pending (see settled) to the
// pending gauges.
func (m *metrics) quiet(ps []sched.Pending, ws []*workload.Workload) {
	m.quietCycles.Inc()
	for i, p := range ps {
		m.pendingW.WithLabelValues(ws[i].Tenant, string(p.Code)).Inc()
		m.pendingG.WithLabelValues(ws[i].Tenant).Add(gpus(ws[i].TotalGPUs()))
	}
}

func gpus(m resource.MilliGPU) float64 { return float64(m) / resource.PerGPU }

func tenantOf(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i]
		}
	}
	return key
}
