package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

type metrics struct {
	reg         *prometheus.Registry
	allocated   *prometheus.GaugeVec
	capacity    *prometheus.GaugeVec
	pendingW    *prometheus.GaugeVec
	pendingG    *prometheus.GaugeVec
	resGPUs     *prometheus.GaugeVec
	cycle       prometheus.Histogram
	preemptions *prometheus.CounterVec
	conflicts   prometheus.Counter
	quietCycles prometheus.Counter
	// commitWrites is the store's group commits (writes per commit), when
	// the store reports them (watchCommits).
	commitWrites prometheus.Histogram
	firings      *prometheus.CounterVec
	requests     *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	submissions  prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		allocated: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_gpus_allocated",
			Help: "GPUs allocated to running workloads, by tenant, flavor and region."}, []string{"tenant", "flavor", "region"}),
		capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_gpus_capacity",
			Help: "GPUs of the fleet, by flavor and region (down nodes excluded)."}, []string{"flavor", "region"}),
		pendingW: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_pending_workloads",
			Help: "Workloads waiting after the last cycle, by tenant and reason code."}, []string{"tenant", "code"}),
		pendingG: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_pending_gpus",
			Help: "GPUs asked for by pending workloads, by tenant."}, []string{"tenant"}),
		resGPUs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "arbiter_reservation_gpus",
			Help: "Reservation capacity (state=reserved) and what its owner uses of it (state=allocated)."}, []string{"tenant", "reservation", "state"}),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "arbiter_schedule_cycle_seconds",
			Help: "Duration of a scheduling cycle: snapshot, schedule and apply.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "arbiter_preemptions_total",
			Help: "Workloads preempted, by the victim's tenant."}, []string{"tenant"}),
		quietCycles: prometheus.NewCounter(prometheus.CounterOpts{Name: "arbiter_quiet_cycles_total",
			Help: "Cycles answered without running the core: only submissions alike to work a settled cycle left pending had arrived."}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: "arbiter_plan_conflicts_total",
			Help: "Plans rejected because the state changed while they were computed."}),
		firings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "arbiter_policy_firings_total",
			Help: "Policy rule state changes, by policy, rule and event."}, []string{"policy", "rule", "event"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "arbiter_http_requests_total",
			Help: "API requests by route and status code."}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "arbiter_http_request_seconds",
			Help: "API request latency by route.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"route"}),
		submissions: prometheus.NewCounter(prometheus.CounterOpts{Name: "arbiter_workload_submissions_total",
			Help: "Workloads accepted (durably stored)."}),
	}
	m.reg.MustRegister(m.allocated, m.capacity, m.pendingW, m.pendingG, m.resGPUs, m.cycle, m.preemptions,
		m.conflicts, m.quietCycles, m.firings, m.requests, m.latency, m.submissions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
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
	dur := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "arbiter_store_commit_seconds",
		Help: "Duration of a group commit of batched writes: the transaction and its fsyncs.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)})
	wait := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "arbiter_store_commit_wait_seconds",
		Help: "How long the first write of a group commit waited for the commit to start.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)})
	writes := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "arbiter_store_commit_writes",
		Help: "Batched writes carried by a group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 11)})
	m.reg.MustRegister(dur, wait, writes)
	m.commitWrites = writes
	st.ObserveCommits(func(c store.CommitStats) {
		dur.Observe(c.Commit.Seconds())
		wait.Observe(c.Wait.Seconds())
		writes.Observe(float64(c.Writers))
	})
}

// observe sets the gauges from a cycle's input and plan.
func (m *metrics) observe(w *world, in sched.Input, plan sched.Plan) {
	m.allocated.Reset()
	m.pendingG.Reset()
	m.pendingW.Reset()
	m.capacity.Reset()
	m.resGPUs.Reset()
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
	// copying every workload.
	evicted := make(map[workload.ID]bool, len(plan.Preemptions))
	for _, x := range plan.Preemptions {
		evicted[x.Workload] = true
	}
	placed := make(map[workload.ID]sched.Placement, len(plan.Placements))
	for _, x := range plan.Placements {
		if _, ok := placed[x.Workload]; !ok {
			placed[x.Workload] = x
		}
	}
	type allocKey struct {
		tenant string
		flavor fleet.ModelID
		region string
	}
	pendingG := map[string]resource.MilliGPU{}
	alloc := map[allocKey]resource.MilliGPU{}
	for _, x := range in.Workloads {
		var flavor fleet.ModelID
		var region string
		var onRes, running bool
		if p, ok := placed[x.Name]; ok {
			flavor, region, onRes, running = p.Flavor, p.Region, p.OnReservation, true
		} else if x.Running != nil && !evicted[x.Name] {
			flavor, region, onRes, running = x.Running.Flavor, x.Running.Region, x.Running.OnReservation, true
		}
		if !running {
			pendingG[x.Tenant] = pendingG[x.Tenant].Add(x.TotalGPUs())
			continue
		}
		k := allocKey{x.Tenant, flavor, region}
		alloc[k] = alloc[k].Add(x.TotalGPUs())
		if onRes {
			resUse[x.Reservation] = resUse[x.Reservation].Add(x.TotalGPUs())
		}
	}
	for t, g := range pendingG {
		m.pendingG.WithLabelValues(t).Set(gpus(g))
	}
	for k, g := range alloc {
		m.allocated.WithLabelValues(k.tenant, string(k.flavor), k.region).Set(gpus(g))
	}
	pendingW := map[[2]string]int{}
	for _, p := range plan.Pending {
		pendingW[[2]string{tenantOf(string(p.Workload)), string(p.Code)}]++
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
		m.resGPUs.WithLabelValues(r.Tenant, r.Name, "reserved").Set(float64(per * r.Count))
		m.resGPUs.WithLabelValues(r.Tenant, r.Name, "allocated").Set(gpus(resUse[r.Key()]))
	}
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
