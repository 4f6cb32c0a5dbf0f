package server

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// maxAttempts bounds how often one cycle recomputes a plan whose base
// changed while it was computed.
const maxAttempts = 4

// whyIndex holds the last cycle's pending reasons. The map by workload is
// built on the first lookup rather than in every cycle (a cycle over tens
// of thousands of pending workloads would otherwise build it each time
// for a `why` that may never come).
//
// A quiet cycle (see settled) adds an index of its new workloads in front
// of the last one (prev); the next full cycle starts the chain again.
type whyIndex struct {
	Revision int64
	Time     time.Time
	pending  []sched.Pending
	// capped are the running elastic workloads below their max and why
	// (a full cycle's; quiet cycles keep the last full one's).
	capped []sched.Capped
	prev   *whyIndex
	depth  int // links behind this one
	once   sync.Once
	byKey  map[string]sched.Pending
}

// Pending returns the last cycle's reason for the workload with this key,
// its text rendered.
func (x *whyIndex) Pending(key string) (sched.Pending, bool) {
	for ; x != nil; x = x.prev {
		x.once.Do(func() {
			x.byKey = make(map[string]sched.Pending, len(x.pending))
			for _, p := range x.pending {
				x.byKey[string(p.Workload)] = p
			}
		})
		if p, ok := x.byKey[key]; ok {
			if p.Reason == "" {
				p.Render() // a copy: the index stays terse
			}
			return p, true
		}
	}
	return sched.Pending{}, false
}

// Capped returns why the running elastic workload with this key is not
// larger, as the last full cycle said.
func (x *whyIndex) Capped(key string) (sched.Capped, bool) {
	for ; x != nil; x = x.prev {
		for _, c := range x.capped {
			if string(c.Workload) == key {
				return c, true
			}
		}
	}
	return sched.Capped{}, false
}

// maxWhyDepth bounds the chain of quiet cycles' indexes (a long timer
// interval could otherwise make it long): past it, the chain is merged.
const maxWhyDepth = 64

// chainWhy puts x in front of prev, merging the chain into x when it has
// grown past maxWhyDepth (newer answers win).
func chainWhy(prev, x *whyIndex) *whyIndex {
	if prev == nil {
		return x
	}
	if prev.depth+1 < maxWhyDepth {
		x.prev, x.depth = prev, prev.depth+1
		return x
	}
	var all []sched.Pending
	for l := prev; l != nil; l = l.prev {
		all = append(all, l.pending...)
	}
	// Oldest first, then x's own: a later entry for a key overrides.
	slices.Reverse(all)
	x.pending = append(all, x.pending...)
	return x
}

// settled is what the loop keeps of the last full cycle that placed and
// evicted nothing (sched.Plan.Classes). Until something other than new
// pending workloads changes, a cycle triggered by submissions that are
// each alike to a class's example would place nothing and leave each new
// workload pending with its class's reason, every older one as it was:
// the loop answers it so (a quiet cycle) instead of running the core over
// the whole queue. Timer and policy cycles always run the core.
type settled struct {
	rev       int64  // the revision answered up to
	active    []bool // each reservation's activity, in store order
	policyGen uint64
	classes   map[sched.AlikeKey][]sched.Class
}

// settledKinds are the kinds whose change may change any decision.
var settledKinds = []store.Kind{store.KindTenant, store.KindNode, store.KindReservation, store.KindPartition, store.KindPolicy, store.KindSetting}

func newSettled(w *world, in sched.Input, plan sched.Plan, policyGen uint64) *settled {
	if len(plan.Placements)+len(plan.Preemptions)+len(plan.Overflow) > 0 || (len(plan.Pending) > 0 && len(plan.Classes) == 0) {
		return nil
	}
	st := &settled{rev: w.Revision, policyGen: policyGen, classes: map[sched.AlikeKey][]sched.Class{}}
	for _, r := range in.Reservations {
		st.active = append(st.active, r.Active(in.Now))
	}
	for _, c := range plan.Classes {
		k := sched.KeyOf(c.Example)
		st.classes[k] = append(st.classes[k], c)
	}
	return st
}

// quiet returns the decisions for the workloads added since st, with the
// workloads in the same order and the snapshot's revision, or false when
// the cycle has to run the core. It reads only what changed since st
// (the event log names every workload written), so its cost does not grow
// with the queue.
func (st *settled) quiet(tx store.ReadTx, live *liveCache, now time.Time, policyGen uint64) ([]sched.Pending, []*workload.Workload, bool, error) {
	if st == nil || policyGen != st.policyGen || tx.Revision() < st.rev {
		return nil, nil, false, nil
	}
	for _, k := range settledKinds {
		if tx.KindRevision(k) > st.rev {
			return nil, nil, false, nil
		}
	}
	rs, err := store.List[store.Reservation](tx, "")
	if err != nil || len(rs) != len(st.active) {
		return nil, nil, false, err
	}
	for i, r := range rs {
		tr := tenancy.Reservation{Start: r.Start, End: r.End}
		if tr.Active(now) != st.active[i] {
			return nil, nil, false, nil
		}
	}
	changed, full, err := changedWorkloads(tx, st.rev)
	if err != nil || full {
		return nil, nil, false, err
	}
	var out []sched.Pending
	var ws []*workload.Workload
	for _, ch := range changed {
		x := live.peekFresh(ch.key, ch.rev)
		if x == nil {
			if x, err = store.Get[store.Workload](tx, ch.key); err != nil {
				return nil, nil, false, nil
			}
		}
		// New since st, unchanged since, and pending.
		if x.Meta.Created <= st.rev || x.Meta.Revision != x.Meta.Created || x.State != store.StatePending || x.Running != nil {
			return nil, nil, false, nil
		}
		sw := schedWorkload(x)
		p, ok := st.decide(sw)
		if !ok {
			return nil, nil, false, nil
		}
		out, ws = append(out, p), append(ws, sw)
	}
	return out, ws, true, nil
}

// decide returns the decision of w's class, if it has one.
func (st *settled) decide(w *workload.Workload) (sched.Pending, bool) {
	for _, c := range st.classes[sched.KeyOf(w)] {
		if sched.Alike(c.Example, w) {
			p := c.Pending
			p.Workload = w.Name
			return p, true
		}
	}
	return sched.Pending{}, false
}

// scheduleLoop runs a cycle at start, on every change and on the timer;
// policies are evaluated on their own timer. Cycles triggered by changes
// are paced: at least MinInterval apart and, while the process is short
// of CPU (pacer), after a cycle that cost d of CPU at least 3d later, so
// that scheduling takes at most about a quarter of the CPU while a storm
// of submissions arrives; with CPU to spare, resting would only delay
// placements (docs/perf.md: the others' wait behind a noisy queue). The cost is
// the cycle's own CPU time (cpuCost), not its wall time: while the API's
// handlers share the cores a cycle's wall time is longer than its cost
// (up to 1.5× in BenchmarkSubmitMixed at 10,000 nodes), and pacing on it
// left cycles idle for the contention, not for the work.
func (s *Server) scheduleLoop(ctx context.Context) {
	tick := time.NewTicker(s.opts.Interval)
	defer tick.Stop()
	ptick := time.NewTicker(s.opts.PolicyInterval)
	defer ptick.Stop()
	s.policies.tick(ctx)
	s.cycle(ctx, false)
	var cost time.Duration
	pace := newPacer()
	for {
		last := time.Now()
		kicked := false
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			kicked = true
		case <-tick.C:
		case <-ptick.C:
			s.policies.tick(ctx)
		}
		if wait := max(s.opts.MinInterval, pace.rest(cost)) - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		cost = cpuCost(func() { s.cycle(ctx, kicked) })
	}
}

// schedule runs the core on in with the server's sched.Cache when no
// other cycle holds it (a Cache is one goroutine's at a time; a concurrent
// cycle runs without, and its plan is the same).
func (s *Server) schedule(in sched.Input) sched.Plan {
	if !s.schedMu.TryLock() {
		return sched.Schedule(in)
	}
	defer s.schedMu.Unlock()
	cached := in
	cached.Cache = &s.schedCache
	plan := sched.Schedule(cached)
	if s.opts.checkCache != nil {
		s.opts.checkCache(plan, sched.Schedule(in))
	}
	return plan
}

// Cycle runs one scheduling cycle now (tests and tools; the loop calls it
// on its own). Concurrent cycles are safe: a plan computed from a stale
// snapshot is rejected and recomputed.
func (s *Server) Cycle(ctx context.Context) { s.cycle(ctx, false) }

// TickPolicies evaluates the policies once now.
func (s *Server) TickPolicies(ctx context.Context) { s.policies.tick(ctx) }

// quietCycle answers the cycle without running the core when only work
// alike to what the last settled cycle left pending has arrived since
// (see settled), and reports whether it did.
func (s *Server) quietCycle(ctx context.Context, now time.Time, gen uint64) bool {
	s.settledMu.Lock()
	st := s.settled
	s.settledMu.Unlock()
	if st == nil {
		return false
	}
	var news []sched.Pending
	var ws []*workload.Workload
	var rev int64
	ok := false
	err := s.st.View(ctx, func(tx store.ReadTx) error {
		var err error
		rev = tx.Revision()
		news, ws, ok, err = st.quiet(tx, &s.live, now, gen)
		return err
	})
	if err != nil || !ok {
		return false
	}
	next := *st
	next.rev = rev
	s.settledMu.Lock()
	if s.settled == st {
		s.settled = &next
	}
	s.settledMu.Unlock()
	s.why.Store(chainWhy(s.why.Load(), &whyIndex{Revision: rev, Time: now, pending: news}))
	s.metrics.quiet(news, ws)
	s.metrics.cycleDone(now)
	return true
}

// cycle takes a snapshot, runs the core and applies the plan in one
// transaction that fails if the snapshot went stale; then it tries again
// on a fresh snapshot, at most maxAttempts times. A cycle triggered by
// submissions (kicked) may be quiet (see settled).
func (s *Server) cycle(ctx context.Context, kicked bool) {
	start := time.Now()
	defer func() { s.metrics.cycle.Observe(time.Since(start).Seconds()) }()
	now := s.now()
	gen := s.policies.generation()
	if s.bindApproaching(ctx, now) {
		kicked = false // the core must see the newly bound machines
	}
	if kicked && s.quietCycle(ctx, now, gen) {
		return
	}
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		var w *world
		var orphans []string
		err := s.st.View(ctx, func(tx store.ReadTx) error {
			var err error
			if w, err = loadWorldWith(tx, s.cat.Load(), true, &s.live); err != nil {
				return err
			}
			orphans, err = orphanUsage(tx, w)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("scheduler: reading state", "err", err)
			}
			return
		}
		if attempt > 1 {
			now, gen = s.now(), s.policies.generation()
		}
		s.closeOrphanUsage(ctx, orphans, now)
		in := w.input(now, w.Tree)
		in.Options = s.opts.Scheduling
		// Pending reasons are rendered from their blockers when asked for
		// (whyIndex.Pending), not for every pending workload every cycle:
		// the same text (Pending.Render is the one renderer), without a
		// long queue's strings held between cycles.
		in.Options.TerseReasons = true
		in.History = s.fair.current()
		all, held, affected := s.policies.applyEffects(w, &in)
		// applyEffects leaves the prices policies set in in.SpotPrices:
		// they are an input of the market, which gives the core its prices
		// and adds the spot work they force out.
		in.SpotPrices, in.Evict = s.spot.input(w.Fleet, now, all, spotSet(in.SpotPrices), in.Evict)
		plan := s.schedule(in)
		plan.Pending = append(plan.Pending, held...)
		if len(plan.Placements)+len(plan.Preemptions)+len(plan.Resizes) > 0 {
			var res store.Applied
			err = s.st.Update(ctx, func(tx store.WriteTx) error {
				var err error
				res, err = store.ApplyPlanMetered(tx, w.Revision, plan, now, metering(w, in.SpotPrices, s.opts.Pricing))
				return err
			})
			if errors.Is(err, store.ErrConflict) {
				s.metrics.conflicts.Inc()
				s.log.Debug("scheduler: plan went stale, recomputing", "attempt", attempt, "err", err)
				continue
			}
			if err != nil {
				if ctx.Err() == nil {
					s.log.Error("scheduler: applying plan", "err", err)
				}
				return
			}
			// Observed here, once per committed plan: the store may have
			// run the transaction more than once, and res is its last run.
			s.metrics.placed(res.First)
			s.notify(false)
			s.log.Info("scheduler: plan applied", "base", w.Revision, "placed", res.Placed, "preempted", res.Preempted, "resized", res.Resized, "pending", len(plan.Pending))
		}
		s.repriceSpot(ctx, w, in.SpotPrices, now)
		s.why.Store(&whyIndex{Revision: w.Revision, Time: now, pending: plan.Pending, capped: plan.Capped})
		s.saveSpot(ctx, now, false)
		s.fair.set(plan.History)
		s.saveFairShare(ctx, now, false)
		observed := in
		observed.Workloads = all
		s.metrics.observe(w, observed, plan)
		s.metrics.cycleDone(now)
		s.settledMu.Lock()
		s.settled = nil
		if !affected { // alike ignores the labels these actions may match
			s.settled = newSettled(w, in, plan, gen)
		}
		s.settledMu.Unlock()
		return
	}
	s.log.Warn("scheduler: plan kept going stale; retrying at the next trigger", "attempts", maxAttempts)
}
