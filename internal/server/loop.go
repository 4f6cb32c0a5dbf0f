package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
)

// maxAttempts bounds how often one cycle recomputes a plan whose base
// changed while it was computed.
const maxAttempts = 4

// whyIndex holds the last cycle's pending reasons. The map by workload is
// built on the first lookup rather than in every cycle (a cycle over tens
// of thousands of pending workloads would otherwise build it each time
// for a `why` that may never come).
type whyIndex struct {
	Revision int64
	Time     time.Time
	pending  []sched.Pending
	once     sync.Once
	byKey    map[string]sched.Pending
}

// Pending returns the last cycle's reason for the workload with this key.
func (x *whyIndex) Pending(key string) (sched.Pending, bool) {
	x.once.Do(func() {
		x.byKey = make(map[string]sched.Pending, len(x.pending))
		for _, p := range x.pending {
			x.byKey[string(p.Workload)] = p
		}
	})
	p, ok := x.byKey[key]
	return p, ok
}

// scheduleLoop runs a cycle at start, on every change and on the timer;
// policies are evaluated on their own timer. Cycles triggered by changes
// are paced: at least MinInterval apart and, after a cycle that took d,
// at least 3d later, so that scheduling takes at most about a quarter of
// the CPU while a storm of submissions arrives.
func (s *Server) scheduleLoop(ctx context.Context) {
	tick := time.NewTicker(s.opts.Interval)
	defer tick.Stop()
	ptick := time.NewTicker(s.opts.PolicyInterval)
	defer ptick.Stop()
	s.policies.tick(ctx)
	s.cycle(ctx)
	var took time.Duration
	for {
		last := time.Now()
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-tick.C:
		case <-ptick.C:
			s.policies.tick(ctx)
		}
		if wait := max(s.opts.MinInterval, 3*took) - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		start := time.Now()
		s.cycle(ctx)
		took = time.Since(start)
	}
}

// Cycle runs one scheduling cycle now (tests and tools; the loop calls it
// on its own). Concurrent cycles are safe: a plan computed from a stale
// snapshot is rejected and recomputed.
func (s *Server) Cycle(ctx context.Context) { s.cycle(ctx) }

// TickPolicies evaluates the policies once now.
func (s *Server) TickPolicies(ctx context.Context) { s.policies.tick(ctx) }

// cycle takes a snapshot, runs the core and applies the plan in one
// transaction that fails if the snapshot went stale; then it tries again
// on a fresh snapshot, at most maxAttempts times.
func (s *Server) cycle(ctx context.Context) {
	start := time.Now()
	defer func() { s.metrics.cycle.Observe(time.Since(start).Seconds()) }()
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		var w *world
		err := s.st.View(ctx, func(tx store.ReadTx) error {
			var err error
			w, err = loadWorldWith(tx, s.cat.Load(), true, &s.live)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("scheduler: reading state", "err", err)
			}
			return
		}
		now := s.now()
		in := w.input(now, s.policies.adjust(w))
		plan := sched.Schedule(in)
		if len(plan.Placements)+len(plan.Preemptions) > 0 {
			var res store.Applied
			err = s.st.Update(ctx, func(tx store.WriteTx) error {
				var err error
				res, err = store.ApplyPlan(tx, w.Revision, plan, now)
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
			s.notify(false)
			s.log.Info("scheduler: plan applied", "base", w.Revision, "placed", res.Placed, "preempted", res.Preempted, "pending", len(plan.Pending))
		}
		s.why.Store(&whyIndex{Revision: w.Revision, Time: now, pending: plan.Pending})
		s.metrics.observe(w, in, plan)
		return
	}
	s.log.Warn("scheduler: plan kept going stale; retrying at the next trigger", "attempts", maxAttempts)
}
