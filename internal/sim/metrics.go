package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// StrategyResult is what one strategy did over the scenario. Field names
// are the results.json keys.
type StrategyResult struct {
	Strategy string `json:"strategy"`
	// Description is the strategy file's description: what it does.
	Description                 string  `json:"description,omitempty"`
	GPUUtilization              float64 `json:"gpu_utilization"`
	CustomerRequests            int     `json:"customer_requests"`
	CustomerCapacityFailures    int     `json:"customer_capacity_failures"`
	CustomerCapacityFailureRate float64 `json:"customer_capacity_failure_rate"`
	CustomerTimeToCapacityP95S  float64 `json:"customer_time_to_capacity_p95_s"`
	ReservationHonourRate       float64 `json:"reservation_honour_rate"`
	// Reservations counts the claims behind the rate: claims made while
	// the reservation had room, and those placed on it within WindowS.
	Reservations ReservationClaims `json:"reservations"`
	// InferenceSLOAttainment is the share of inference requests whose
	// time to first token met their service's SLO (turned away: missed).
	InferenceSLOAttainment float64 `json:"inference_slo_attainment"`
	// InferenceP99Ms is the time to first token p99 over every request
	// of every service (per service: Inference).
	InferenceP99Ms        float64 `json:"inference_p99_ms"`
	TrainingGPUHours      float64 `json:"training_gpu_hours"`
	TrainingJobsCompleted int     `json:"training_jobs_completed"`
	TrainingJCTP50H       float64 `json:"training_jct_p50_h"`
	WorkLostGPUHours      float64 `json:"work_lost_to_preemption_gpu_hours"`
	Preemptions           int     `json:"preemptions"`
	// CustomerVMPreemptions counts evictions of customers' (non-spot) VMs.
	CustomerVMPreemptions int `json:"customer_vm_preemptions"`
	SpotEvictions         int `json:"spot_evictions"`
	// Overflows counts workloads the overflow layer placed: onto a
	// flavor or region the strategy's classes added to what the workload
	// lists (OverflowByDestination: by MODEL/REGION).
	Overflows             int            `json:"overflows"`
	OverflowByDestination map[string]int `json:"overflow_by_destination,omitempty"`
	Fragmentation         float64        `json:"fragmentation"`
	// PlannedStarts counts the waits (after submission or a preemption)
	// in which the core gave the workload a planned start (backfill, see
	// sched.Planning); PlannedStartsKept, of those that then started, the
	// share that started by their first planned start (within a cycle).
	PlannedStarts        int     `json:"planned_starts"`
	PlannedStartsStarted int     `json:"planned_starts_started"`
	PlannedStartsKept    float64 `json:"planned_starts_kept"`
	plannedKept          int
	CostUSD              float64 `json:"cost_usd"`
	RevenueUSD           float64 `json:"revenue_usd"`
	SchedulingCycles     int     `json:"scheduling_cycles"`
	PolicyFirings        int     `json:"policy_firings"`
	// Events counts arrivals, placements, preemptions and ends: the state
	// changes the event loop processed.
	Events int `json:"events"`
	// Conservation: allocated + idle GPU-hours = capacity × time.
	CapacityGPUHours  float64 `json:"capacity_gpu_hours"`
	AllocatedGPUHours float64 `json:"allocated_gpu_hours"`
	IdleGPUHours      float64 `json:"idle_gpu_hours"`
	JobsSubmitted     int     `json:"jobs_submitted"`
	JobsEnded         int     `json:"jobs_ended"`
	JobsActiveAtEnd   int     `json:"jobs_active_at_end"`
	// TrainingJobs follows each named training run (a generator with a
	// fixed count, such as the flagship) to its end or to the end of
	// the scenario.
	TrainingJobs []TrainingJob `json:"training_jobs"`
	// Classes are the scenario's classes (see ClassGroup), keyed by name.
	Classes ClassResults `json:"classes"`
	// Inference is each service's latency over its requests, by name.
	Inference map[string]ServiceLatency `json:"inference"`
	// Economics is the run's money (see Economics).
	Economics Economics `json:"economics"`
	// Cost is the cost report of the run's usage records, metered as the
	// server meters them (package meter), by tenant, kind, region and
	// SKU: the cost.csv of arbiter sim. Not in results.json.
	Cost meter.Report `json:"-"`

	Series Series `json:"-"`
}

// ReservationClaims are a reservation's promises and how many were kept.
type ReservationClaims struct {
	Claims   int     `json:"claims"`
	Honoured int     `json:"honoured"`
	WindowS  float64 `json:"window_s"`
}

// TrainingJob is one named training run as a reader follows it.
type TrainingJob struct {
	Name string `json:"name"`
	GPUs int    `json:"gpus"`
	// Finished: it completed within the scenario; CompletionH is then the
	// hours from submission to completion.
	Finished    bool    `json:"finished"`
	CompletionH float64 `json:"completion_h,omitempty"`
	// Progress is the share of its runtime done at the end (1 when
	// finished): work lost to preemption is not progress.
	Progress     float64 `json:"progress"`
	Preemptions  int     `json:"preemptions"`
	LostGPUHours float64 `json:"lost_to_preemption_gpu_hours"`
	// PreemptedBy says, for its first preemptions, when, by whom (the
	// claimant and its class) and why: what a reader needs to see which
	// rule of the strategy let it be taken.
	PreemptedBy []Preempted `json:"preempted_by,omitempty"`
	// LongestWaitH is its longest time pending (after submission or a
	// preemption) before it ran again, or to the end if it never did.
	LongestWaitH float64 `json:"longest_wait_h"`
}

// Preempted is one preemption of a named run: when (hours from the
// scenario's start), by which claimant of which class (empty: a failed
// node or a policy), and the core's reason.
type Preempted struct {
	Hour   float64 `json:"hour"`
	By     string  `json:"by,omitempty"`
	Class  string  `json:"class,omitempty"`
	Reason string  `json:"reason"`
}

// maxPreemptedBy bounds TrainingJob.PreemptedBy.
const maxPreemptedBy = 3

// String says in words how the run ended, and what first preempted it.
func (t TrainingJob) String() string {
	s := fmt.Sprintf("%s: finished in %.0f h", t.Name, t.CompletionH)
	if !t.Finished {
		s = fmt.Sprintf("%s: did not finish, %.0f%% done", t.Name, 100*t.Progress)
	}
	if len(t.PreemptedBy) > 0 {
		p := t.PreemptedBy[0]
		by := "a failed node or a policy"
		if p.Class != "" {
			by = "class " + p.Class
		}
		s += fmt.Sprintf("; first preempted at hour %.0f by %s", p.Hour, by)
	}
	return s
}

// Series are the per-step time series of a run (one row per SampleEvery).
type Series struct {
	Times       []time.Duration
	Tenants     []string
	TenantGPUs  [][]float64 // [row][tenant]
	Services    []string
	P99Ms       [][]float64 // [row][service]: time to first token p99 of the step
	SLOMs       []float64   // per service: its TTFT p99 SLO
	Failures    []int       // cumulative customer capacity failures
	TrainingGPU []float64   // cumulative training GPU-hours
	Preemptions []int       // cumulative
	SpotKeys    []string
	SpotPrice   [][]float64 // [row][key], USD per GPU-hour
	Utilization []float64
}

// maxLatency caps reported latencies: a request that would wait longer
// has been turned away (it counts against the SLO).
const maxLatency = 60 * time.Second

// fragEvery is how often fragmentation is sampled.
const fragEvery = 10 * time.Minute

// SampleEvery is the spacing of time-series rows.
const SampleEvery = 30 * time.Minute

type recorder struct {
	s *Sim
	// usage sums the runs' usage records, as the server meters them
	// (package meter), into the cost report (StrategyResult.Cost).
	usage  *meter.Aggregator
	res    StrategyResult
	cycles int

	tenantIdx map[string]int
	spotKeys  []tenancy.Key
	spot      []float64

	custWait    []float64 // seconds from request to capacity
	trainingJCT []float64 // hours
	resClaims   int
	resHonoured int
	sloW, slo   float64 // arrivals-weighted SLO attainment
	idleMilli   float64 // milli-GPU·steps
	fragMilli   float64 // free milli on partly used nodes, per fragEvery
	fragFree    float64 // free milli, per fragEvery
	freeMilli   float64
	allocMilliS float64 // from runs: milli-GPU·seconds
	revenue     float64
	econ        econ
	ended       int
	named       []*job // named training runs, in submission order
	classes     *classBook
}

func newRecorder(s *Sim) *recorder {
	r := &recorder{s: s, tenantIdx: map[string]int{}, classes: newClassBook(s.sc)}
	r.res.Strategy, r.res.Description = s.st.Name, strings.TrimSpace(s.st.Description)
	owners := s.sc.workOwners()
	for _, t := range s.cfg.Tree.Tenants {
		if !owners[t.Name] {
			continue // a tenant no work names (a parent) never holds a GPU
		}
		r.tenantIdx[t.Name] = len(r.res.Series.Tenants)
		r.res.Series.Tenants = append(r.res.Series.Tenants, t.Name)
	}
	for _, k := range s.market.Keys() {
		r.spotKeys = append(r.spotKeys, tenancy.Key{Model: k.Model, Region: k.Region})
		r.res.Series.SpotKeys = append(r.res.Series.SpotKeys, k.String())
	}
	for _, st := range s.services {
		r.res.Series.Services = append(r.res.Series.Services, st.spec.Name)
		r.res.Series.SLOMs = append(r.res.Series.SLOMs, float64(st.spec.SLO)/float64(time.Millisecond))
	}
	return r
}

func (r *recorder) submitted(j *job) {
	r.res.JobsSubmitted++
	if j.named {
		r.named = append(r.named, j)
	}
	r.res.Events++
	if j.customerRequest() {
		r.res.CustomerRequests++
	}
	c := r.classes.of(j.class)
	c.Requests++
	if c.kinds == nil {
		c.kinds = map[string]bool{}
	}
	c.kinds[j.w.Kind.String()] = true
	if !j.deadline.IsZero() {
		c.Patient++
	}
	if j.w.Reservation != "" && r.s.reservationRoom(j) {
		j.resEligible = true
		r.resClaims++
	}
}

func (r *recorder) firstPlaced(j *job) {
	wait := r.s.now.Sub(j.submitted).Seconds()
	if j.customerRequest() {
		r.custWait = append(r.custWait, wait)
	}
	c := r.classes.of(j.class)
	c.waits = append(c.waits, wait)
	if j.resEligible && j.w.Running.OnReservation && wait <= r.s.sc.HonourWindow.Seconds() {
		r.resHonoured++
	}
}

func (r *recorder) capacityFailure(j *job) {
	c := r.classes.of(j.class)
	c.CapacityFailures++
	if c.CapacityFailuresByReason == nil {
		c.CapacityFailuresByReason = map[string]int{}
	}
	c.CapacityFailuresByReason[j.failureReason()]++
	r.econ.refused(r.s, j)
	if j.customerRequest() {
		r.res.CustomerCapacityFailures++
		if debugFailures != nil {
			debugFailures(r.s.st.Name, j.class, j.lastReason)
		}
	}
}

// debugPreempt, when set (by TestDebugRun), is told of every preemption.
var debugPreempt func(strategy, victim, by, reason string)

// debugFailures, when set (by TestDebugRun), is told of every customer
// capacity failure.
var debugFailures func(strategy, class, reason string)

func (r *recorder) completed(j *job) {
	if j.w.Kind == workload.KindTraining {
		r.res.TrainingJobsCompleted++
		r.trainingJCT = append(r.trainingJCT, r.s.now.Sub(j.submitted).Hours())
	}
}

func (r *recorder) preempted(j *job, p sched.Preemption, lost time.Duration) {
	r.res.Preemptions++
	j.preempts++
	if j.named && len(j.preemptedBy) < maxPreemptedBy {
		e := Preempted{Hour: roundTo(r.s.now.Sub(r.s.sc.Start).Hours(), 2), By: string(p.By), Reason: p.Reason}
		if c := r.s.byName[p.By]; c != nil {
			e.Class = c.class
		}
		j.preemptedBy = append(j.preemptedBy, e)
	}
	j.lostGPUH += lost.Hours() * float64(j.gpus()) / resource.PerGPU
	if j.customerRequest() {
		r.res.CustomerVMPreemptions++
	}
	c := r.classes.of(j.class)
	c.Preemptions++
	c.LostGPUHours += lost.Hours() * float64(j.gpus()) / resource.PerGPU
	if j.w.Priority == workload.PrioritySpot {
		c.SpotEvictions++
	}
	if debugPreempt != nil {
		debugPreempt(r.s.st.Name, j.class, string(p.By), p.Reason)
	}
	if j.w.Priority == workload.PrioritySpot {
		r.res.SpotEvictions++
	}
	r.res.WorkLostGPUHours += lost.Hours() * float64(j.gpus()) / resource.PerGPU
}

func (r *recorder) spotEvicted(j *job) {
	r.res.SpotEvictions++
	r.res.WorkLostGPUHours += (j.w.WorkLost(r.s.now)) / 3600
	c := r.classes.of(j.class)
	c.SpotEvictions++
	c.LostGPUHours += j.w.WorkLost(r.s.now) / 3600
}

// plannedStarted records the start of a job that had a planned start in
// this wait, and whether it started by it.
func (r *recorder) plannedStarted(kept bool) {
	r.res.PlannedStartsStarted++
	if kept {
		r.res.plannedKept++
	}
	r.res.PlannedStartsKept = float64(r.res.plannedKept) / float64(r.res.PlannedStartsStarted)
}

func (r *recorder) overflowed(_ *job, to string) {
	r.res.Overflows++
	if r.res.OverflowByDestination == nil {
		r.res.OverflowByDestination = map[string]int{}
	}
	r.res.OverflowByDestination[to]++
}

// ran records a finished run [from, to) of a job: allocation, training
// GPU-hours and revenue.
func (r *recorder) ran(j *job, from, to time.Time) {
	if !to.After(from) {
		return
	}
	r.econ.ran(r.s, j, from, to)
	r.meter(j, from, to)
	gpuH := to.Sub(from).Hours() * float64(j.gpus()) / resource.PerGPU
	r.allocMilliS += to.Sub(from).Seconds() * float64(j.gpus())
	if j.w.Kind == workload.KindTraining {
		r.res.TrainingGPUHours += gpuH
	}
	r.classes.of(j.class).GPUHours += gpuH
	if a := j.w.Running; j.customer && a != nil {
		if sku := r.s.skuOf(tenancy.Key{Model: a.Flavor, Region: a.Region}); sku != nil {
			p := r.s.cfg.Fleet.Catalog.PriceIn(sku, a.Region)
			price := p.OnDemand
			if j.w.Priority == workload.PrioritySpot {
				price = p.Spot
			}
			if a.OnReservation {
				price = p.Reserved1Y
			}
			r.revenue += gpuH * price / float64(sku.GPUs)
		}
	}
}

// sample records one step.
func (r *recorder) sample() {
	s := r.s
	r.freeMilli += float64(int64(s.capacity) - s.usedAll)
	if s.now.Sub(s.sc.Start)%fragEvery == 0 {
		// Fragmentation (free GPUs on partly used nodes) is sampled every
		// fragEvery: it needs a walk over the fleet.
		var free, frag float64
		for i, n := range s.cfg.Fleet.Nodes {
			f := float64(int64(n.GPUs)*resource.PerGPU - s.nodeUsed[i])
			free += f
			if s.nodeUsed[i] > 0 {
				frag += f
			}
		}
		r.fragFree += free
		r.fragMilli += frag
	}
	for _, st := range s.services {
		if st.arrivals > 0 {
			r.sloW += st.arrivals
			r.slo += st.arrivals * st.withinSLO
		}
	}
	if s.now.Sub(s.sc.Start)%SampleEvery != 0 {
		return
	}
	se := &r.res.Series
	se.Times = append(se.Times, s.now.Sub(s.sc.Start))
	row := make([]float64, len(se.Tenants))
	var used float64
	for _, j := range s.jobs {
		if !j.done && j.w.Running != nil {
			g := float64(j.gpus()) / resource.PerGPU
			if ti, ok := r.tenantIdx[j.w.Tenant]; ok {
				row[ti] += g
			}
			used += g
		}
	}
	se.TenantGPUs = append(se.TenantGPUs, row)
	se.Utilization = append(se.Utilization, used/(float64(s.capacity)/resource.PerGPU))
	prow := make([]float64, len(s.services))
	for i, st := range s.services {
		prow[i] = float64(min(st.ttft[2], maxLatency)) / float64(time.Millisecond)
	}
	se.P99Ms = append(se.P99Ms, prow)
	se.Failures = append(se.Failures, r.res.CustomerCapacityFailures)
	train := r.res.TrainingGPUHours
	for _, j := range s.jobs {
		if !j.done && j.w.Running != nil && j.w.Kind == workload.KindTraining && s.now.After(j.placedAt) {
			train += s.now.Sub(j.placedAt).Hours() * float64(j.gpus()) / resource.PerGPU
		}
	}
	se.TrainingGPU = append(se.TrainingGPU, train)
	se.Preemptions = append(se.Preemptions, r.res.Preemptions)
	se.SpotPrice = append(se.SpotPrice, append([]float64(nil), r.spot...))
}

// finish closes open runs at the end and computes the summary.
// trainingJob is a named run's account at the end of the scenario.
func (r *recorder) trainingJob(j *job) TrainingJob {
	s := r.s
	t := TrainingJob{Name: string(j.w.Name), GPUs: int(j.gpus() / resource.PerGPU), Preemptions: j.preempts, LostGPUHours: roundTo(j.lostGPUH, 1),
		PreemptedBy: j.preemptedBy}
	if !j.completedAt.IsZero() {
		t.Finished, t.Progress = true, 1
		t.CompletionH = roundTo(j.completedAt.Sub(j.submitted).Hours(), 2)
	} else if j.runtime > 0 {
		left := j.remaining
		if j.w.Running != nil && s.end.After(j.progressFrom) {
			left -= s.end.Sub(j.progressFrom)
		}
		t.Progress = roundTo(min(1, max(0, 1-float64(left)/float64(j.runtime))), 4)
	}
	wait := j.longestWait
	if j.w.Running == nil && !j.done {
		wait = max(wait, s.end.Sub(j.waitFrom))
	}
	t.LongestWaitH = roundTo(wait.Hours(), 2)
	return t
}

func (r *recorder) finish() *StrategyResult {
	s := r.s
	for _, j := range s.jobs {
		if !j.done && j.w.Running != nil {
			r.ran(j, j.placedAt, s.end)
		}
		if !j.done {
			r.res.JobsActiveAtEnd++
		}
	}
	for _, j := range r.named {
		r.res.TrainingJobs = append(r.res.TrainingJobs, r.trainingJob(j))
	}
	res := &r.res
	res.JobsEnded = r.ended
	res.SchedulingCycles = r.cycles
	hours := s.end.Sub(s.sc.Start).Hours()
	res.CapacityGPUHours = float64(s.capacity) / resource.PerGPU * hours
	res.AllocatedGPUHours = r.allocMilliS / resource.PerGPU / 3600
	res.IdleGPUHours = r.freeMilli / resource.PerGPU * Step.Hours()
	if res.CapacityGPUHours > 0 {
		res.GPUUtilization = res.AllocatedGPUHours / res.CapacityGPUHours
	}
	if r.fragFree > 0 {
		res.Fragmentation = r.fragMilli / r.fragFree
	}
	if res.CustomerRequests > 0 {
		res.CustomerCapacityFailureRate = float64(res.CustomerCapacityFailures) / float64(res.CustomerRequests)
	}
	res.CustomerTimeToCapacityP95S = quantile(r.custWait, 0.95)
	res.ReservationHonourRate = 1
	res.Reservations = ReservationClaims{Claims: r.resClaims, Honoured: r.resHonoured, WindowS: r.s.sc.HonourWindow.Seconds()}
	if r.resClaims > 0 {
		res.ReservationHonourRate = float64(r.resHonoured) / float64(r.resClaims)
	}
	res.InferenceSLOAttainment = 1
	if r.sloW > 0 {
		res.InferenceSLOAttainment = r.slo / r.sloW
	}
	res.Inference, res.InferenceP99Ms = r.inference()
	res.TrainingJCTP50H = quantile(r.trainingJCT, 0.5)
	for _, n := range s.cfg.Fleet.Nodes {
		p := s.cfg.Fleet.Catalog.PriceIn(n.SKU, n.Region)
		res.CostUSD += p.Reserved3Y * hours
	}
	res.RevenueUSD = r.revenue
	res.Classes = r.classes.finish()
	res.Economics = r.econ.economics(s, res.CostUSD)
	if r.usage == nil {
		r.usage = meter.NewAggregator(s.sc.Start, s.end, costGroupBy)
	}
	res.Cost = r.usage.Report()
	round(&res.GPUUtilization, 4)
	round(&res.CustomerCapacityFailureRate, 4)
	round(&res.CustomerTimeToCapacityP95S, 1)
	round(&res.ReservationHonourRate, 4)
	round(&res.InferenceSLOAttainment, 4)
	round(&res.InferenceP99Ms, 1)
	round(&res.TrainingGPUHours, 1)
	round(&res.TrainingJCTP50H, 2)
	round(&res.WorkLostGPUHours, 1)
	round(&res.Fragmentation, 4)
	round(&res.CostUSD, 0)
	round(&res.RevenueUSD, 0)
	round(&res.CapacityGPUHours, 2)
	round(&res.AllocatedGPUHours, 2)
	round(&res.IdleGPUHours, 2)
	return res
}

func round(x *float64, digits int) {
	p := math.Pow(10, float64(digits))
	*x = math.Round(*x*p) / p
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	ys := append([]float64(nil), xs...)
	sort.Float64s(ys)
	return ys[int(math.Ceil(q*float64(len(ys))))-1]
}

// customerRequest reports whether a job is a customer's request for
// capacity: a VM that is not spot (spot comes with no promise of capacity).
func (j *job) customerRequest() bool {
	return j.customer && j.w.Kind == workload.KindVM && j.basePriority != workload.PrioritySpot
}

// workOwners returns the tenants that own work in the scenario: those its
// generators, services and trace name.
func (sc *Scenario) workOwners() map[string]bool {
	out := map[string]bool{}
	for _, g := range sc.Generators {
		out[g.Tenant] = true
	}
	for _, sv := range sc.Services {
		out[sv.Tenant] = true
	}
	if sc.Trace != nil {
		out[sc.Trace.Tenant] = true
	}
	return out
}

// reasonNoCycle is the capacity failure reason of a request no scheduling
// cycle considered before its patience ran out.
const reasonNoCycle = "NoCycle"

// failureReason is why a request failed: the code of the blocker that
// kept it pending at the last cycle (sched.ReasonCode, PolicyHeld for a
// policy's cap), or reasonNoCycle.
func (j *job) failureReason() string {
	if !j.considered {
		return reasonNoCycle
	}
	return string(j.lastCode)
}

// costGroupBy are the dimensions of the simulator's cost report.
var costGroupBy = []meter.Dim{meter.DimTenant, meter.DimKind, meter.DimRegion, meter.DimSKU}

// meter adds the usage records of a run [from, to) of j, one per replica,
// priced as the server prices them at catalog prices (the simulator's
// economics take the catalog's spot price too), with the scenario's
// metering section's overrides and the tenants' price plans when it has
// them.
func (r *recorder) meter(j *job, from, to time.Time) {
	s, a := r.s, j.w.Running
	if a == nil {
		return
	}
	if r.usage == nil {
		r.usage = meter.NewAggregator(s.sc.Start, s.end, costGroupBy)
	}
	prio := j.w.Priority
	if j.basePriority == workload.PrioritySpot {
		prio = workload.PrioritySpot
	}
	charge := meter.ChargeOf(prio, a)
	prices := meter.Prices{Catalog: s.cfg.Fleet.Catalog, Pricing: s.cfg.Metering.Pricing}
	var path []string // the tenant's, for its price plan (only with plans)
	if prices.Pricing != nil && s.cfg.Tree != nil {
		if ti, ok := s.cfg.Tree.Lookup(j.w.Tenant); ok {
			for _, k := range s.cfg.Tree.Path(ti) {
				path = append(path, s.cfg.Tree.Tenants[k].Name)
			}
			slices.Reverse(path)
		}
	}
	for i, rep := range a.Replicas {
		rec := meter.Record{Workload: string(j.w.Name), Replica: i, Tenant: j.w.Tenant, Kind: j.w.Kind.String(), Class: j.class, Preemptible: j.w.Preemptible,
			Model: a.Flavor, Region: a.Region, Node: rep.Node, GPUs: meter.ReplicaGPUs(rep, j.w.GPUs), Start: from, End: to, Charge: charge}
		if n, ok := s.cfg.Fleet.Node(rep.Node); ok && n.SKU != nil {
			rec.SKU = n.SKU.Name
			rec.UnitPrice, rec.ListPrice, rec.ContractedPrice = prices.Quote(n.SKU, a.Region, charge, path)
		}
		r.usage.Add(&rec)
	}
}
