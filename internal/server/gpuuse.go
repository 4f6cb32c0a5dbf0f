package server

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy/effects"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
)

// GPU use (issue 23 point 3): agents send NVML's readings of their GPUs
// in every heartbeat. The server keeps each node's latest (in memory,
// checked: a node cannot report more than 1024 GPUs nor values out of
// range), and
//   - /metrics shows them per GPU (gpuCollector, at scrape time);
//   - each policy tick samples busy_utilization from them (busySample):
//     the mean busy ratio of the GPUs of nodes in service with a fresh
//     reading, per cluster, flavor, region and pool, and per tenant over
//     the GPUs its replicas hold; no fresh reading, no value;
//   - the same tick counts allocated GPUs that stayed idle (under
//     idleBelowPct for idleFor): arbiter_allocated_idle_gpus and each
//     replica's idle_gpus in workload show.
//
// A reading is fresh while its heartbeat is within NodeLostAfter (the
// lease) of now; a node marked lost drops its readings at once.

// Bounds of a heartbeat's GPU readings.
const (
	maxGPUIndex  = 1023           // as many GPUs as a heartbeat may carry
	maxGPUName   = 128            // UUID and model (NVML's buffers are 96 bytes)
	maxGPUMemMiB = int64(1) << 24 // 16 TiB per GPU
)

// idleBelowPct and idleFor say when an allocated GPU counts as idle:
// every reading under 5% busy for the policy window.
const (
	idleBelowPct = 5
	idleFor      = policyWindow
)

// checkGPUs refuses GPU readings a well-behaved agent never sends (the
// agent clamps NVML's own quirks), naming the field.
func checkGPUs(gpus []api.GPUInfo) error {
	seen := make(map[int]bool, len(gpus))
	bad := func(i int, field, format string, args ...any) error {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, fmt.Sprintf("gpus[%d].%s", i, field), format, args...)
	}
	for i, g := range gpus {
		switch {
		case g.Index < 0 || g.Index > maxGPUIndex:
			return bad(i, "index", "GPU index %d is out of range 0..%d", g.Index, maxGPUIndex)
		case seen[g.Index]:
			return bad(i, "index", "GPU index %d appears twice", g.Index)
		case len(g.UUID) > maxGPUName || !printable(g.UUID):
			return bad(i, "uuid", "a UUID is at most %d printable bytes", maxGPUName)
		case len(g.Model) > maxGPUName || !printable(g.Model):
			return bad(i, "model", "a model name is at most %d printable bytes", maxGPUName)
		case g.MemoryMiB < 0 || g.MemoryMiB > maxGPUMemMiB:
			return bad(i, "memory_mib", "memory %d MiB is out of range 0..%d", g.MemoryMiB, maxGPUMemMiB)
		case g.MemoryUsedMiB < 0 || g.MemoryUsedMiB > g.MemoryMiB:
			return bad(i, "memory_used_mib", "memory used %d MiB is out of range 0..memory_mib (%d)", g.MemoryUsedMiB, g.MemoryMiB)
		case g.UtilizationPct < 0 || g.UtilizationPct > 100:
			return bad(i, "utilization_pct", "utilization %d%% is out of range 0..100", g.UtilizationPct)
		}
		seen[g.Index] = true
	}
	return nil
}

// gpuReading is a node's latest readings and when they came.
type gpuReading struct {
	at   time.Time
	gpus []api.GPUInfo
}

// recordGPUs keeps a node's latest readings (checked by checkGPUs).
func (a *agents) recordGPUs(id fleet.NodeID, now time.Time, gpus []api.GPUInfo) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gpus == nil {
		a.gpus = map[fleet.NodeID]gpuReading{}
	}
	a.gpus[id] = gpuReading{at: now, gpus: append([]api.GPUInfo(nil), gpus...)}
}

// forgetGPUs drops the readings of nodes marked lost.
func (a *agents) forgetGPUs(ids []fleet.NodeID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		delete(a.gpus, id)
	}
}

// freshGPUs returns the readings no older than maxAge at now, by node
// and GPU index.
func (a *agents) freshGPUs(now time.Time, maxAge time.Duration) map[fleet.NodeID]map[int]api.GPUInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[fleet.NodeID]map[int]api.GPUInfo, len(a.gpus))
	for id, r := range a.gpus {
		if now.Sub(r.at) > maxAge {
			continue
		}
		m := make(map[int]api.GPUInfo, len(r.gpus))
		for _, g := range r.gpus {
			m[g.Index] = g
		}
		out[id] = m
	}
	return out
}

// gpuRun is one GPU of one replica run.
type gpuRun struct {
	workload  string
	startedAt time.Time
	replica   int
	gpu       int
}

// replicaRun is one replica run.
type replicaRun struct {
	workload  string
	startedAt time.Time
	replica   int
}

// gpuUse is what the last policy tick measured of the allocated GPUs.
type gpuUse struct {
	mu sync.Mutex
	// idleSince is when each allocated GPU's readings went under
	// idleBelowPct (without a break since).
	idleSince map[gpuRun]time.Time
	// tenantBusy is each tenant's mean busy ratio over the GPUs its
	// replicas hold that have a reading; tenantIdle its idle GPUs.
	tenantBusy map[string]float64
	tenantIdle map[string]int
	// idle are each replica run's idle GPUs, in index order.
	idle map[replicaRun][]int
}

// busySample measures busy_utilization from the fresh readings of the
// nodes in service, and updates the idle-GPU signal.
func (s *Server) busySample(wd *world, now time.Time) []effects.Observation {
	fresh := s.agents.freshGPUs(now, s.opts.NodeLostAfter)
	down := make(map[fleet.NodeID]bool, len(wd.Down))
	for _, id := range wd.Down {
		down[id] = true
	}
	var bt effects.BusyTotals
	for _, n := range wd.Fleet.Nodes {
		r := fresh[n.ID]
		if down[n.ID] || len(r) == 0 {
			continue
		}
		var busy float64
		measured := 0
		for i := 0; i < n.GPUs; i++ {
			if g, ok := r[i]; ok {
				busy += float64(g.UtilizationPct) / 100
				measured++
			}
		}
		bt.AddNode(effects.Node{ID: n.ID, Model: n.Model, Region: n.Region, Pool: n.Labels[sched.PoolLabel], GPUs: n.GPUs}, busy, float64(measured))
	}
	u := &s.gpuUse
	u.mu.Lock()
	defer u.mu.Unlock()
	since := make(map[gpuRun]time.Time, len(u.idleSince))
	u.tenantIdle, u.idle = map[string]int{}, map[replicaRun][]int{}
	for _, x := range wd.Workloads {
		if x.State != store.StateRunning || x.Running == nil {
			continue
		}
		var busy float64
		measured := 0
		for ri, rep := range x.Running.Replicas {
			r := fresh[rep.Node]
			if down[rep.Node] {
				continue
			}
			for _, gi := range rep.GPUs {
				g, ok := r[gi]
				if !ok {
					continue // unknown is not idle
				}
				busy += float64(g.UtilizationPct) / 100
				measured++
				if g.UtilizationPct >= idleBelowPct {
					continue
				}
				k := gpuRun{x.Key(), x.Running.StartedAt, ri, gi}
				t, ok := u.idleSince[k]
				if !ok {
					t = now
				}
				since[k] = t
				if now.Sub(t) >= idleFor {
					u.tenantIdle[x.Tenant]++
					rk := replicaRun{x.Key(), x.Running.StartedAt, ri}
					u.idle[rk] = append(u.idle[rk], gi)
				}
			}
		}
		bt.AddTenant(x.Tenant, busy, float64(measured))
	}
	u.idleSince = since
	tenants := make([]string, len(wd.Tenants))
	u.tenantBusy = map[string]float64{}
	for i, t := range wd.Tenants {
		tenants[i] = t.Name
		if v, ok := bt.Tenant(t.Name); ok {
			u.tenantBusy[t.Name] = v
		}
	}
	for _, gs := range u.idle {
		sort.Ints(gs)
	}
	return bt.Observations(tenants)
}

// stepDownGPUs forgets the GPU readings and what the policy ticks
// measured of them when a replica's term ends: agents heartbeat the new
// leader, and sums over replicas count each GPU once.
func (s *Server) stepDownGPUs() {
	s.agents.mu.Lock()
	s.agents.gpus = nil
	s.agents.mu.Unlock()
	u := &s.gpuUse
	u.mu.Lock()
	u.idleSince, u.tenantBusy, u.tenantIdle, u.idle = nil, nil, nil, nil
	u.mu.Unlock()
}

// idleGPUs returns a replica run's idle GPUs as the last tick counted
// them.
func (s *Server) idleGPUs(workload string, startedAt time.Time, replica int) []int {
	s.gpuUse.mu.Lock()
	defer s.gpuUse.mu.Unlock()
	return s.gpuUse.idle[replicaRun{workload, startedAt, replica}]
}

// gpuCollector exports the GPU readings at scrape time (the series of a
// node that stopped reporting, or was lost, disappear with its
// readings) and the last policy tick's per-tenant busy ratio and idle
// GPUs. Cardinality: registered nodes × their GPUs (at most 1024 each),
// and tenants.
type gpuCollector struct {
	s                       *Server
	util, memUsed, memTotal *prometheus.Desc
	tenantUtil, tenantIdle  *prometheus.Desc
}

func newGPUCollector(s *Server) *gpuCollector {
	gpu := []string{"node", "gpu"}
	return &gpuCollector{s: s,
		util: prometheus.NewDesc("arbiter_gpu_utilization_ratio",
			"How busy a GPU was (NVML's utilization, 0..1), from its agent's last heartbeat.", gpu, nil),
		memUsed: prometheus.NewDesc("arbiter_gpu_memory_used_bytes",
			"GPU memory in use (NVML), from its agent's last heartbeat.", gpu, nil),
		memTotal: prometheus.NewDesc("arbiter_gpu_memory_total_bytes",
			"GPU memory (NVML), from its agent's last heartbeat.", gpu, nil),
		tenantUtil: prometheus.NewDesc("arbiter_tenant_gpu_utilization_ratio",
			"Mean busy ratio (NVML, 0..1) of the GPUs a tenant's replicas hold, at the last policy tick (no series: no reading).", []string{"tenant"}, nil),
		tenantIdle: prometheus.NewDesc("arbiter_allocated_idle_gpus",
			"GPUs allocated to a tenant's replicas that NVML read under 5% busy for the last 5 minutes, at the last policy tick.", []string{"tenant"}, nil),
	}
}

func (c *gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.util, c.memUsed, c.memTotal, c.tenantUtil, c.tenantIdle} {
		ch <- d
	}
}

func (c *gpuCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	fresh := s.agents.freshGPUs(s.now(), s.opts.NodeLostAfter)
	nodes := make([]fleet.NodeID, 0, len(fresh))
	for id := range fresh {
		nodes = append(nodes, id)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	for _, id := range nodes {
		for idx, g := range fresh[id] {
			l := []string{string(id), strconv.Itoa(idx)}
			ch <- prometheus.MustNewConstMetric(c.util, prometheus.GaugeValue, float64(g.UtilizationPct)/100, l...)
			ch <- prometheus.MustNewConstMetric(c.memUsed, prometheus.GaugeValue, float64(g.MemoryUsedMiB)*(1<<20), l...)
			ch <- prometheus.MustNewConstMetric(c.memTotal, prometheus.GaugeValue, float64(g.MemoryMiB)*(1<<20), l...)
		}
	}
	u := &s.gpuUse
	u.mu.Lock()
	defer u.mu.Unlock()
	for t, v := range u.tenantBusy {
		ch <- prometheus.MustNewConstMetric(c.tenantUtil, prometheus.GaugeValue, v, t)
	}
	for t := range u.tenantBusy { // every tenant with a GPU measured: 0 is a value
		ch <- prometheus.MustNewConstMetric(c.tenantIdle, prometheus.GaugeValue, float64(u.tenantIdle[t]), t)
	}
}
