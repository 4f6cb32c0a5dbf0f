package sim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy/effects"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/spot"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Step is the simulator's time step: services, policies, spot prices and
// metrics move once per step; arrivals and completions fall on step
// boundaries.
const Step = time.Minute

// job is one workload's life in the simulation.
type job struct {
	w         *workload.Workload
	tally     tallied // what it adds to the run's gpuTally
	seq       int
	gen       int // generator index, -1 for a service replica
	svc       int // service index for replicas
	region    int // service region index for replicas
	class     string
	customer  bool
	submitted time.Time
	deadline  time.Time // capacity failure when still pending then (zero: none)
	remaining time.Duration
	// plannedAt is the first planned start the core gave it in this
	// wait (zero: none yet).
	plannedAt time.Time
	// progressFrom is when the current run makes progress (its start, or
	// later when it waits for victims' grace periods).
	progressFrom time.Time
	placedAt     time.Time
	version      int
	done         bool
	running      bool // w.Running != nil, next to progressFrom (stepServices reads both)
	everPlaced   bool
	resEligible  bool // its reservation had room when it was submitted
	overflowed   bool
	lastReason   string // why it was pending at the last cycle (text, when rendered)
	// lastCode classifies lastReason; considered: a cycle saw it.
	lastCode     sched.ReasonCode
	considered   bool
	basePriority workload.Priority
	basePreempt  bool
	baseRegions  []string // the spec's regions and pools, before a migrate narrows them
	basePools    []string
	// A named run (a training job of a generator with a fixed count, such
	// as the flagship): what a reader follows it by (results' training_jobs).
	// declared is the flavor/region pairs the workload itself lists,
	// before the strategy's classes widen them (the overflow layer).
	declared    map[string]bool
	named       bool
	runtime     time.Duration // its whole runtime
	waitFrom    time.Time     // pending since (submission, or its last preemption)
	longestWait time.Duration
	lostGPUH    float64
	preempts    int
	preemptedBy []Preempted // a named run's first preemptions
	completedAt time.Time
}

func (j *job) gpus() resource.MilliGPU { return j.w.TotalGPUs() }

type event struct {
	at      time.Time
	seq     int
	kind    int // evArrival, evComplete
	gen     int
	job     *job
	version int
}

const (
	evArrival = iota
	evComplete
	evTrace // a trace pod arrives; gen is its index
)

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// Sim is one run of a scenario under one strategy.
type Sim struct {
	genLabels []map[string]string // per generator, its jobs' labels (labelsOf)
	sc        *Scenario
	st        *Strategy
	rng       *rand.Rand
	cfg       *config.Config
	in        sched.Input
	now       time.Time
	end       time.Time
	jobs      []*job // active (pending or running), in submission order
	seq       int
	evSeq     int
	q         eventQueue
	dirty     bool
	// nextCycle is the earliest time of the next scheduling cycle.
	nextCycle time.Time

	// nodeUsed is milli-GPU allocated per node index; keyUsed and keyCap
	// the same per (model, region) of recorder.spotKeys.
	nodeUsed []int64
	nodeKey  []int
	keyUsed  []int64
	keyCap   []int64
	usedAll  int64
	capacity resource.MilliGPU

	services []*serviceState
	// probes are the scenario's probes of its services (probes.go).
	probes []*simProbe
	pods   []tracePod // trace pods to replay
	pol    *policyRun
	// tally keeps the live jobs' GPUs per policy target for the policy
	// sample (nil without policies).
	tally *gpuTally
	// spotJobs are the live jobs with a max price, in submission order
	// (the ended ones dropped each step).
	spotJobs []*job
	// spotSet holds the spot prices policies set (model, region → USD per
	// GPU-hour), an input of the market; nil while none is in force.
	spotSet map[spot.Key]float64
	cache   sched.Cache
	// afterStep, when set (by tests), runs at the end of every step;
	// beforeSpot and afterSpot around the spot market's step.
	afterStep             func()
	beforeSpot, afterSpot func()
	skus                  map[tenancy.Key]*fleet.SKU
	market                *spot.Market // one per recorder.spotKeys, in order
	metrics               *recorder
	progress              func(done, total time.Duration)
	samples               []MetricSample
	onStep                func(StepRecord)
	// stepEvicted collects this step's evictions, for onStep.
	stepEvicted []workload.ID
	// byName indexes the active jobs by workload name (kept as jobs are
	// submitted and dropped, instead of rebuilt every cycle); wsBuf is the
	// cycle's workload list, reused.
	byName map[workload.ID]*job
	wsBuf  []*workload.Workload
	// nextExpire is at or before the earliest patience deadline of an
	// active job (zero: none), so expire skips steps where none can pass.
	nextExpire time.Time
}

// Options tune a run.
type Options struct {
	Seed uint64
	// Duration overrides the scenario's duration when > 0.
	Duration time.Duration
	// Progress, when set, is called every simulated hour.
	Progress func(done, total time.Duration)
	// Samples are scripted metric samples the strategy's policies read
	// (as a metrics source pushes them to the server), sorted by time.
	Samples []MetricSample
	// OnStep, when set, is called at the end of every step with what the
	// step did (the differential test compares it with the server's).
	OnStep func(StepRecord)
}

// New prepares a run of scenario sc under strategy st.
func New(sc *Scenario, st *Strategy, opt Options) (*Sim, error) {
	fleetSpec := sc.Fleet
	catalog := sc.Catalog
	var pods []tracePod
	if sc.Trace != nil {
		cat := &fleet.Catalog{}
		if catalog != nil {
			c := *catalog
			cat = &c
		}
		full := fleet.Builtin()
		if err := full.Merge(cat); err != nil {
			return nil, err
		}
		spec, ps, err := loadTrace(sc.Trace, full)
		if err != nil {
			return nil, err
		}
		fleetSpec.Regions = append(append([]fleet.RegionSpec(nil), fleetSpec.Regions...), spec.Regions...)
		catalog, pods = full, ps
	}
	f := config.File{
		Now:          sc.Start,
		Seed:         opt.Seed,
		Catalog:      catalog,
		Fleet:        fleetSpec,
		Tenants:      st.tenants(sc.Tenants),
		Partitions:   st.Partitions,
		Reservations: append([]tenancy.Reservation(nil), sc.Reservations...),
		Options:      st.Options,
		Metering:     sc.Metering,
	}
	cfg, err := config.Resolve(sc.Name, f)
	if err != nil {
		return nil, fmt.Errorf("sim: scenario %s with strategy %s: %w", sc.Name, st.Name, err)
	}
	s := &Sim{
		sc:       sc,
		st:       st,
		rng:      rand.New(rand.NewPCG(opt.Seed, 0xa4b17e4)),
		cfg:      cfg,
		in:       cfg.Input(),
		now:      sc.Start,
		progress: opt.Progress,
		samples:  opt.Samples,
		onStep:   opt.OnStep,
		byName:   map[workload.ID]*job{},
	}
	dur := sc.Duration
	if opt.Duration > 0 {
		dur = opt.Duration
	}
	s.end = sc.Start.Add(dur)
	s.nodeUsed = make([]int64, len(cfg.Fleet.Nodes))
	s.nodeKey = make([]int, len(cfg.Fleet.Nodes))
	for _, n := range cfg.Fleet.Nodes {
		s.capacity += resource.GPUs(n.GPUs)
	}
	for gi, g := range sc.Generators {
		if err := s.checkGenerator(g); err != nil {
			return nil, err
		}
		if g.Count > 0 {
			s.push(event{at: sc.Start.Add(g.At), kind: evArrival, gen: gi})
		} else {
			s.scheduleArrival(gi, sc.Start.Add(g.At))
		}
	}
	for i := range pods {
		if at := sc.Start.Add(pods[i].at); at.Before(s.end) {
			s.push(event{at: at, kind: evTrace, gen: i})
		}
	}
	s.pods = pods
	s.services, err = newServices(s, opt.Seed)
	if err != nil {
		return nil, err
	}
	s.probes = s.newProbes(opt.Seed)
	s.market = spot.New(cfg.Fleet)
	s.metrics = newRecorder(s)
	s.keyUsed = make([]int64, len(s.metrics.spotKeys))
	s.keyCap = make([]int64, len(s.metrics.spotKeys))
	for i, n := range cfg.Fleet.Nodes {
		for ki, k := range s.metrics.spotKeys {
			if k.Model == n.Model && k.Region == n.Region {
				s.nodeKey[i] = ki
				s.keyCap[ki] += int64(n.GPUs) * resource.PerGPU
			}
		}
	}
	if err := s.loadPolicy(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Sim) checkGenerator(g Generator) error {
	if _, ok := s.cfg.Tree.Lookup(g.Tenant); !ok {
		return fmt.Errorf("sim: generator %s: unknown tenant %q", g.Name, g.Tenant)
	}
	for _, r := range g.Regions {
		if !s.cfg.Fleet.HasRegion(r) {
			return fmt.Errorf("sim: generator %s: region %q is not in the fleet", g.Name, r)
		}
	}
	return nil
}

func (s *Sim) push(e event) {
	e.seq = s.evSeq
	s.evSeq++
	heap.Push(&s.q, e)
}

// scheduleArrival draws the next Poisson arrival of generator gi after t,
// thinning a daily cycle: rate(t) = r·(1 + a·cos(2π(h − peak)/24)).
func (s *Sim) scheduleArrival(gi int, t time.Time) {
	g := &s.sc.Generators[gi]
	maxRate := g.RatePerHour * (1 + g.DailyAmp)
	for {
		gap := s.rng.ExpFloat64() / maxRate
		t = t.Add(time.Duration(gap * float64(time.Hour)))
		if !t.Before(s.end) || (g.Until > 0 && !t.Before(s.sc.Start.Add(g.Until))) {
			return
		}
		h := float64(t.Hour()) + float64(t.Minute())/60
		rate := g.RatePerHour * (1 + g.DailyAmp*math.Cos(2*math.Pi*(h-g.PeakHour)/24))
		if s.rng.Float64()*maxRate <= rate {
			s.push(event{at: t, kind: evArrival, gen: gi})
			return
		}
	}
}

// Run simulates to the end and returns the results.
func (s *Sim) Run() *StrategyResult {
	total := s.end.Sub(s.sc.Start)
	for t := s.sc.Start; t.Before(s.end); t = t.Add(Step) {
		s.now = t
		s.events(t)
		s.expire()
		s.stepServices()
		s.stepPolicy()
		s.spotPrices()
		if s.dirty && !t.Before(s.nextCycle) {
			s.cycle()
			s.nextCycle = t.Add(s.sc.Cycle)
		}
		s.metrics.sample()
		if s.afterStep != nil {
			s.afterStep()
		}
		if s.onStep != nil {
			s.onStep(s.stepRecord())
		}
		if s.progress != nil && t.Sub(s.sc.Start)%time.Hour == 0 {
			s.progress(t.Sub(s.sc.Start), total)
		}
	}
	s.now = s.end
	return s.metrics.finish()
}

// events handles arrivals and completions up to t.
func (s *Sim) events(t time.Time) {
	for len(s.q) > 0 && !s.q[0].at.After(t) {
		e := heap.Pop(&s.q).(event)
		switch e.kind {
		case evArrival:
			g := &s.sc.Generators[e.gen]
			n := 1
			if g.Count > 0 {
				n = g.Count
			} else {
				s.scheduleArrival(e.gen, e.at)
			}
			for i := 0; i < n; i++ {
				s.submit(s.newJob(e.gen))
			}
		case evTrace:
			s.submit(s.traceJob(e.gen))
		case evComplete:
			j := e.job
			if j.done || j.version != e.version || j.w.Running == nil {
				continue
			}
			j.completedAt = s.now
			s.metrics.completed(j)
			s.finish(j)
		}
	}
}

func (s *Sim) newJob(gi int) *job {
	g := &s.sc.Generators[gi]
	var total float64
	for _, sz := range g.Sizes {
		total += sz.Weight
	}
	x := s.rng.Float64() * total
	sz := g.Sizes[len(g.Sizes)-1]
	for _, c := range g.Sizes {
		if x < c.Weight {
			sz = c
			break
		}
		x -= c.Weight
	}
	lo, hi := math.Log(float64(g.RuntimeMin)), math.Log(float64(g.RuntimeMax))
	runtime := time.Duration(math.Exp(lo + s.rng.Float64()*(hi-lo)))
	class := g.Class
	if class == "" {
		class = g.Name
	}
	s.seq++
	w := &workload.Workload{Spec: workload.Spec{
		Name:               workload.ID(fmt.Sprintf("%s-%06d", g.Name, s.seq)),
		Kind:               g.Kind,
		Tenant:             g.Tenant,
		Priority:           g.Priority,
		Preemptible:        g.Preemptible,
		GPUs:               sz.GPUs,
		MIG:                sz.MIG,
		Replicas:           sz.Replicas,
		Elastic:            sizeElastic(sz),
		Flavors:            g.Flavors,
		Regions:            g.Regions,
		Topology:           g.Topology,
		ExpectedRuntime:    runtime,
		CheckpointInterval: g.CheckpointInterval,
		GracePeriod:        g.GracePeriod,
		Reservation:        g.Reservation,
		MaxPrice:           g.MaxPrice,
		Labels:             s.labelsOf(gi, class),
	}, SubmittedAt: s.now}
	decl := s.widen(class, &w.Spec)
	j := &job{w: w, gen: gi, svc: -1, class: class, customer: g.Customer, remaining: runtime, declared: decl,
		basePriority: w.Priority, basePreempt: w.Preemptible,
		named: g.Count > 0 && g.Kind == workload.KindTraining, runtime: runtime}
	s.applyClass(j)
	if g.Patience > 0 {
		j.deadline = s.now.Add(g.Patience)
	}
	return j
}

// sizeElastic is a size's elastic bounds, nil unless it sets max_replicas.
func sizeElastic(sz Size) *workload.Elastic {
	if sz.MaxReplicas == 0 {
		return nil
	}
	return &workload.Elastic{Min: sz.Replicas, Max: sz.MaxReplicas, Step: max(sz.Step, 1)}
}

// rate is how fast j progresses: 1 at its size, or for an elastic job
// its replicas over its min (its work is measured at its min).
func (j *job) rate() float64 {
	if j.w.Elastic == nil || j.w.Elastic.Min <= 0 {
		return 1
	}
	return float64(j.w.Replicas) / float64(j.w.Elastic.Min)
}

// progressed takes the work j did since progressFrom off its remaining
// work, and moves progressFrom to now.
func (s *Sim) progressed(j *job) {
	if s.now.After(j.progressFrom) {
		if r := j.rate(); r == 1 {
			j.remaining -= s.now.Sub(j.progressFrom)
		} else {
			j.remaining -= time.Duration(float64(s.now.Sub(j.progressFrom)) * r)
		}
		j.progressFrom = s.now
	}
}

// resize applies an elastic job's resize (a growth's replicas take their
// GPUs, a shrink's give theirs back): its run so far is metered at the
// old size, its progress taken at the old rate, and its completion moved
// to what the new rate gives.
func (s *Sim) resize(j *job, r sched.Resize) {
	a := j.w.Running
	s.metrics.ran(j, j.placedAt, s.now)
	s.progressed(j)
	for i := r.To; i < r.From && i < len(a.Replicas); i++ {
		n, _ := s.cfg.Fleet.Node(a.Replicas[i].Node)
		s.use(n.Index, -int64(a.Replicas[i].Milli)*int64(len(a.Replicas[i].GPUs)))
	}
	for _, p := range r.Add {
		n, _ := s.cfg.Fleet.Node(p.Node)
		s.use(n.Index, p.Milli*int64(len(p.GPUs)))
	}
	j.w.Running, j.w.Replicas = sched.Resized(a, r, s.now), r.To
	j.placedAt = s.now
	s.tally.track(j)
	s.metrics.res.Events++
	j.version++
	if j.remaining > 0 && j.svc < 0 {
		end := j.progressFrom.Add(time.Duration(float64(max(j.remaining, 0)) / j.rate())).Truncate(Step).Add(Step)
		j.w.ExpectedRuntime = end.Sub(j.w.Running.StartedAt)
		s.push(event{at: end, kind: evComplete, job: j, version: j.version})
	}
	s.dirty = true
}

// labelsOf returns generator gi's workload labels: its class and its
// labels. One map is shared by all the generator's jobs (nothing writes
// a workload's labels), so that the cycles' label lookups stay in cache.
func (s *Sim) labelsOf(gi int, class string) map[string]string {
	if s.genLabels == nil {
		s.genLabels = make([]map[string]string, len(s.sc.Generators))
	}
	if l := s.genLabels[gi]; l != nil {
		return l
	}
	l := map[string]string{"class": class}
	for k, v := range s.sc.Generators[gi].Labels {
		if k != "class" {
			l[k] = v
		}
	}
	s.genLabels[gi] = l
	return l
}

// requeued sets an evicted job's expected runtime to the work it has
// left, which the core plans around while it waits.
func (j *job) requeued() {
	if j.remaining > 0 && j.svc < 0 {
		j.w.ExpectedRuntime = j.remaining
	}
}

func (s *Sim) submit(j *job) {
	j.seq = s.seq
	j.submitted = s.now
	j.waitFrom = s.now
	j.w.SubmittedAt = s.now
	s.jobs = append(s.jobs, j)
	if j.w.MaxPrice > 0 { // fixed from now on
		s.spotJobs = append(s.spotJobs, j)
	}
	s.tally.track(j)
	s.byName[j.w.Name] = j
	if !j.deadline.IsZero() && (s.nextExpire.IsZero() || j.deadline.Before(s.nextExpire)) {
		s.nextExpire = j.deadline
	}
	s.metrics.submitted(j)
	s.dirty = true
}

// widen applies the strategy's class overrides to spec and returns the
// flavor/region pairs the spec listed before them ("MODEL/REGION", as
// sched.Overflow names its destination).
func (s *Sim) widen(class string, spec *workload.Spec) map[string]bool {
	decl := make(map[string]bool, len(spec.Flavors)*len(spec.Regions))
	for _, f := range spec.Flavors {
		for _, r := range spec.Regions {
			decl[string(f)+"/"+r] = true
		}
	}
	s.st.override(class, spec)
	return decl
}

// finish ends a job (completed, cancelled or failed) and frees its GPUs.
func (s *Sim) finish(j *job) {
	if j.w.Running != nil {
		s.release(j)
	}
	j.done = true
	s.tally.track(j)
	s.metrics.ended++
	s.dirty = true
}

// release frees a running job's GPUs and records its run.
func (s *Sim) release(j *job) {
	for _, r := range j.w.Running.Replicas {
		n, _ := s.cfg.Fleet.Node(r.Node)
		s.use(n.Index, -int64(r.Milli)*int64(len(r.GPUs)))
	}
	s.metrics.ran(j, j.placedAt, s.now)
	s.metrics.res.Events++ // a run ends: completion, preemption or cancel
	s.progressed(j)
	j.w.Running, j.running = nil, false
	j.w.Replicas = j.w.MinReplicas() // an elastic job waits at its min
	j.version++
	s.tally.track(j)
}

// expire turns pending requests past their patience into capacity failures.
func (s *Sim) expire() {
	if s.nextExpire.IsZero() || s.now.Before(s.nextExpire) {
		return // no deadline has passed
	}
	s.nextExpire = time.Time{}
	for _, j := range s.jobs {
		if j.done || j.deadline.IsZero() {
			continue
		}
		if j.w.Running == nil && !s.now.Before(j.deadline) {
			s.metrics.capacityFailure(j)
			s.finish(j)
			continue
		}
		if s.nextExpire.IsZero() || j.deadline.Before(s.nextExpire) {
			s.nextExpire = j.deadline
		}
	}
}

// cycle runs the scheduler over the active jobs and applies the plan.
func (s *Sim) cycle() {
	s.dirty = false
	live := s.jobs[:0]
	for _, j := range s.jobs {
		if !j.done {
			live = append(live, j)
		} else if s.byName[j.w.Name] == j {
			delete(s.byName, j.w.Name)
		}
	}
	for i := len(live); i < len(s.jobs); i++ {
		s.jobs[i] = nil
	}
	s.jobs = live
	ws := s.wsBuf[:0]
	for _, j := range s.jobs {
		ws = append(ws, j.w)
		j.considered = true
	}
	s.wsBuf = ws
	byName := s.byName
	in := s.in
	in.Now = s.now
	in.Workloads = ws
	in.Options = s.st.schedOptions()
	in.Options.HonourWindow = s.sc.HonourWindow
	in.Options.Planning = s.sc.planning
	in.Options.TerseReasons = debugFailures == nil // the run reads no messages
	in.Cache = &s.cache
	// Spot work is admitted below spot.AdmitFraction of its max price
	// and evicted above it: the gap keeps it from flapping. A price a
	// policy sets is the market's price (firm), as on the server.
	in.SpotPrices = sched.SpotInput(in.SpotPrices[:0], s.market.Quotes())
	var eff *effects.Effects
	var held []sched.Pending // workloads a policy's cap holds back
	if s.pol != nil {
		eff = s.pol.eff
	}
	if eff != nil && eff.Any() {
		// The actions in force, through the policy runtime, as the
		// server applies them.
		in.Tenants = eff.AdjustTree(in.Tenants)
		in.Workloads = eff.Apply(in.Workloads)
		in.Workloads, in.Evict, held = eff.Caps(in.Workloads)
		if len(eff.Drained) > 0 {
			in.Down = append(slices.Clip(in.Down), eff.Drained...)
		}
	}
	plan := sched.Schedule(in)
	s.in.History = plan.History // decayed usage, for the next cycle (fair share)
	s.metrics.cycles++
	// Why each pending workload waits: the core's reason, or the policy
	// cap that held it back before the core saw it.
	for _, ps := range [][]sched.Pending{plan.Pending, held} {
		for _, p := range ps {
			if j := byName[p.Workload]; j != nil {
				j.lastReason, j.lastCode = p.Reason, p.Code
				if p.Planned != nil && j.plannedAt.IsZero() {
					j.plannedAt = p.Planned.Start // the first plan of this wait
					s.metrics.res.PlannedStarts++
				}
			}
		}
	}

	// Victims exit first; their grace delays the claimants' progress.
	grace := map[workload.ID]time.Duration{}
	for _, p := range plan.Preemptions {
		j := byName[p.Workload]
		if j == nil || j.w.Running == nil {
			continue
		}
		g := j.w.GracePeriod
		if p.Notice {
			g = max(g, sched.SpotNotice)
		}
		if p.By != "" {
			grace[p.By] = max(grace[p.By], g)
		}
		lost := j.w.WorkLost(s.now) / (float64(j.gpus()) / resource.PerGPU)
		s.metrics.preempted(j, p, time.Duration(lost*float64(time.Second)))
		s.stepEvicted = append(s.stepEvicted, j.w.Name)
		rate := j.rate()
		s.release(j)
		j.remaining += time.Duration(lost * rate * float64(time.Second))
		j.requeued()
		j.waitFrom = s.now
		s.dirty = true
	}
	for _, r := range plan.Resizes {
		j := byName[r.Workload]
		if j == nil || j.w.Running == nil || len(j.w.Running.Replicas) != r.From {
			continue
		}
		if r.Shrink() && r.By != "" {
			grace[r.By] = max(grace[r.By], j.w.GracePeriod)
		}
		s.resize(j, r)
	}
	for _, g := range plan.Placed() {
		ps := g.Placements
		j := byName[g.Workload]
		a := sched.Assignment(ps, s.now.Add(grace[g.Workload]))
		for _, p := range ps {
			n, _ := s.cfg.Fleet.Node(p.Node)
			s.use(n.Index, p.Milli*int64(len(p.GPUs)))
		}
		j.w.Running, j.running = a, true
		s.tally.track(j)
		j.placedAt = s.now
		if j.w.Elastic != nil {
			s.dirty = true // placed at its min: the next cycle may grow it
		}
		j.longestWait = max(j.longestWait, s.now.Sub(j.waitFrom))
		if !j.plannedAt.IsZero() {
			s.metrics.plannedStarted(!s.now.After(j.plannedAt.Add(s.sc.Cycle)))
			j.plannedAt = time.Time{}
		}
		s.metrics.res.Events++
		j.progressFrom = a.StartedAt
		j.version++
		if !j.everPlaced {
			j.everPlaced = true
			j.deadline = time.Time{} // an evicted VM waits; it is not a new request
			s.metrics.firstPlaced(j)
		}
		if j.remaining > 0 && j.svc < 0 {
			end := j.progressFrom.Add(j.remaining).Truncate(Step).Add(Step)
			// The core plans with exact runtimes (as Slurm's backfill
			// with accurate time limits): this run's, from its start
			// (victims' grace included) to its completion.
			j.w.ExpectedRuntime = end.Sub(a.StartedAt)
			s.push(event{at: end, kind: evComplete, job: j, version: j.version})
		}
	}
	// Overflow is a placement the overflow layer made: onto a flavor or
	// region the strategy's classes added to what the workload itself
	// lists. A later choice of its own list is not overflow.
	for _, o := range plan.Overflow {
		if j := byName[o.Workload]; j != nil && !j.overflowed && !j.declared[o.To] {
			j.overflowed = true
			s.metrics.overflowed(j, o.To)
		}
	}
}

// spotPrices steps the spot market with the utilization of each (model,
// region) and evicts spot work whose max price the price passes.
func (s *Sim) spotPrices() {
	s.spotSet = s.policySpot()
	if s.beforeSpot != nil {
		s.beforeSpot() // tests may set spotSet
	}
	s.market.Step(s.keyUsed, s.spotSet)
	s.metrics.spot = s.metrics.spot[:0]
	for _, q := range s.market.Quotes() {
		s.metrics.spot = append(s.metrics.spot, q.PerGPUHour)
	}
	// Only jobs with a max price can be bound (policies do not set prices
	// of jobs): visit those, in submission order as in s.jobs.
	s.spotJobs = compact(s.spotJobs)
	for _, j := range s.spotJobs {
		if j.w.Running == nil || !spot.Bound(s.effective(j.w)) {
			continue
		}
		a := j.w.Running
		n, _ := s.cfg.Fleet.Node(a.Replicas[0].Node)
		if spot.Evicts(s.metrics.spot[s.nodeKey[n.Index]], j.w.MaxPrice) {
			s.metrics.spotEvicted(j)
			lost := j.w.WorkLost(s.now) / (float64(j.gpus()) / resource.PerGPU)
			rate := j.rate()
			s.release(j)
			j.remaining += time.Duration(lost * rate * float64(time.Second))
			j.requeued()
			s.dirty = true
		}
	}
	if s.afterSpot != nil {
		s.afterSpot()
	}
}

// skuOf returns the SKU of the first node of a (model, region).
func (s *Sim) skuOf(k tenancy.Key) *fleet.SKU {
	if sku, ok := s.skus[k]; ok {
		return sku
	}
	var sku *fleet.SKU
	for _, n := range s.cfg.Fleet.Nodes {
		if n.Model == k.Model && n.Region == k.Region {
			sku = n.SKU
			break
		}
	}
	if s.skus == nil {
		s.skus = map[tenancy.Key]*fleet.SKU{}
	}
	s.skus[k] = sku
	return sku
}

// reservationRoom reports whether j's reservation has room for it now:
// what runs on it and the owner's earlier claims still waiting for it (the
// core serves those first, oldest first) leave enough of the count. A
// claim made while the owner's own work fills the reservation is not a
// promise the reservation made.
func (s *Sim) reservationRoom(j *job) bool {
	var capacity, used resource.MilliGPU
	for _, r := range s.cfg.File.Reservations {
		if r.Name == j.w.Reservation {
			if sku, ok := s.cfg.Fleet.Catalog.SKU(r.SKU); ok {
				capacity = resource.GPUs(sku.GPUs * r.Count)
			}
		}
	}
	for _, o := range s.jobs {
		if o != j && !o.done && o.w.Reservation == j.w.Reservation && (o.w.Running == nil || o.w.Running.OnReservation) {
			used += o.gpus()
		}
	}
	return used+j.gpus() <= capacity
}

// GPUs is the fleet's GPU count.
func (s *Sim) GPUs() int { return int(s.capacity / resource.PerGPU) }

// Firings is the run's policy log.
func (s *Sim) Firings() []Firing {
	if s.pol == nil {
		return nil
	}
	return s.pol.firing
}

// use records milli-GPU taken (d > 0) or given back on node i.
func (s *Sim) use(i int, d int64) {
	s.nodeUsed[i] += d
	s.keyUsed[s.nodeKey[i]] += d
	s.usedAll += d
}

// traceJob makes the job of trace pod i.
func (s *Sim) traceJob(i int) *job {
	p := &s.pods[i]
	w := &workload.Workload{Spec: p.spec, SubmittedAt: s.now}
	class := w.Labels["class"]
	decl := s.widen(class, &w.Spec)
	remaining := p.runtime
	if remaining == 0 {
		remaining = s.end.Sub(s.now) + time.Hour
	}
	s.seq++
	j := &job{w: w, gen: -1, svc: -1, class: class, remaining: remaining, declared: decl, basePriority: w.Priority, basePreempt: w.Preemptible}
	s.applyClass(j)
	return j
}

// policySpot returns the spot prices the policies in force set, as the
// market's input (nil: none).
func (s *Sim) policySpot() map[spot.Key]float64 {
	if s.pol == nil || s.pol.eff == nil || len(s.pol.eff.Spot) == 0 {
		return nil
	}
	out := make(map[spot.Key]float64, len(s.pol.eff.Spot))
	for k, p := range s.pol.eff.Spot {
		out[spot.Key{Model: k.Model, Region: k.Region}] = p
	}
	return out
}

// effective is w as the scheduler sees it with the policy actions in
// force (a spot job a policy raised is no longer bound by its max price),
// as the server's market sees it.
func (s *Sim) effective(w *workload.Workload) *workload.Workload {
	if s.pol == nil || s.pol.eff == nil {
		return w
	}
	o, _ := s.pol.eff.Override(w)
	return o
}
