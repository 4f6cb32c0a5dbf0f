package store

import (
	"fmt"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// guarded are the kinds a plan's input is built from besides workloads: a
// change to any of them after the plan's base revision voids the plan.
var guarded = []Kind{KindTenant, KindNode, KindReservation, KindPartition}

// Applied says what ApplyPlan changed.
type Applied struct {
	Placed    int // workloads that became running
	Preempted int // running workloads evicted back to pending
	Resized   int // running elastic workloads grown or shrunk
	// First are the workloads placed for the first time (never preempted
	// before): how long each waited since its submission.
	First []FirstPlacement
}

// FirstPlacement is a workload's first placement: its priority class and
// the time from its submission to the plan's now.
type FirstPlacement struct {
	Priority workload.Priority
	Waited   time.Duration
}

// ApplyPlan commits a plan computed from the state at revision base. It
// fails with ErrConflict, changing nothing, when the tenants, nodes or
// reservations changed after base, or when a workload the plan places or
// evicts changed after base (cancelled, or already moved). Workloads
// submitted or cancelled-while-running after base do not void it: the
// first are simply not in the plan, the second only free capacity.
//
// Victims are evicted back to pending (an elastic one at its min);
// resized elastic workloads take their new size (the usage records of the
// replicas a shrink removes end at now, those a growth adds open at now);
// placed workloads run from now.
// Victims of a placement with AfterPreemption exit at once here (no agent
// runs them yet); a node agent will make the placement wait for them.
// Plans name workloads by WorkloadKey. Every change is logged as an event.
func ApplyPlan(tx WriteTx, base int64, plan sched.Plan, now time.Time) (Applied, error) {
	return ApplyPlanMetered(tx, base, plan, now, nil)
}

// ApplyPlanMetered is ApplyPlan that also keeps the usage records in the
// same transaction: every victim's open records end at now, and m (when
// not nil) makes the records each placed run opens.
func ApplyPlanMetered(tx WriteTx, base int64, plan sched.Plan, now time.Time, m Metering) (Applied, error) {
	var res Applied
	for _, k := range guarded {
		if r := tx.KindRevision(k); r > base {
			return res, fmt.Errorf("%w: %s changed at revision %d after the plan's base %d", ErrConflict, k, r, base)
		}
	}
	load := func(id workload.ID, want State) (*Workload, error) {
		w, err := Get[Workload](tx, string(id))
		if err != nil {
			return nil, fmt.Errorf("%w: plan names workload %s: %v", ErrConflict, id, err)
		}
		if w.Meta.Revision > base {
			return nil, fmt.Errorf("%w: workload %s changed at revision %d after the plan's base %d", ErrConflict, id, w.Meta.Revision, base)
		}
		if w.State != want {
			return nil, fmt.Errorf("%w: workload %s is %s, the plan expects %s", ErrConflict, id, w.State, want)
		}
		return w, nil
	}
	// Check everything before writing anything.
	victims := make([]*Workload, 0, len(plan.Preemptions))
	victimByID := map[workload.ID]*Workload{}
	for _, p := range plan.Preemptions {
		w, err := load(p.Workload, StateRunning)
		if err != nil {
			return res, err
		}
		victims = append(victims, w)
		victimByID[p.Workload] = w
	}
	resized := make([]*Workload, 0, len(plan.Resizes))
	for _, r := range plan.Resizes {
		if victimByID[r.Workload] != nil {
			return res, fmt.Errorf("store: plan both preempts and resizes %s", r.Workload)
		}
		w, err := load(r.Workload, StateRunning)
		if err != nil {
			return res, err
		}
		if w.Running == nil || len(w.Running.Replicas) != r.From || w.Spec.Elastic == nil {
			return res, fmt.Errorf("%w: plan resizes %s from %d replicas, it runs %d", ErrConflict, r.Workload, r.From, len(w.Running.Replicas))
		}
		if r.To < w.Spec.MinReplicas() || r.To > w.Spec.MaxReplicas() || (!r.Shrink() && len(r.Add) != r.To-r.From) {
			return res, fmt.Errorf("store: plan resizes %s to %d replicas (elastic %d–%d) with %d added", r.Workload, r.To, w.Spec.MinReplicas(), w.Spec.MaxReplicas(), len(r.Add))
		}
		resized = append(resized, w)
	}
	type placed struct {
		w  *Workload
		ps []sched.Placement
	}
	groups := plan.Placed()
	order := make([]placed, 0, len(groups))
	for _, g := range groups {
		w, evicted := victimByID[g.Workload] // evicted, then placed again
		if !evicted {
			var err error
			if w, err = load(g.Workload, StatePending); err != nil {
				return res, err
			}
		}
		order = append(order, placed{w: w, ps: g.Placements})
	}
	for i, w := range victims {
		p := plan.Preemptions[i]
		if err := CloseRun(tx, w, now); err != nil {
			return res, err
		}
		w.State, w.Running = StatePending, nil
		w.Spec.Replicas = w.Spec.MinReplicas()
		w.Preemptions++
		w.LastPreemption = victimReason(p, w.Tenant)
		if err := Put(tx, w, w.Meta.Revision); err != nil {
			return res, err
		}
		msg := fmt.Sprintf("preempted: %s", w.LastPreemption)
		if err := AppendEvent(tx, &Event{Time: now, Type: EventWorkloadPreempted, Object: WorkloadObject(w.Key()), Tenant: w.Tenant, Message: msg}); err != nil {
			return res, err
		}
		res.Preempted++
	}
	for i, w := range resized {
		r := plan.Resizes[i]
		if r.Shrink() {
			if err := closeReplicas(tx, w, r.To, r.From, now); err != nil {
				return res, err
			}
		}
		w.Running, w.Spec.Replicas = sched.Resized(w.Running, r, now), r.To
		if err := Put(tx, w, w.Meta.Revision); err != nil {
			return res, err
		}
		if m != nil && !r.Shrink() {
			recs := m(w, w.Running)
			for j := r.From; j < r.To && j < len(recs); j++ {
				if err := PutUsage(tx, &recs[j]); err != nil {
					return res, err
				}
			}
		}
		msg := fmt.Sprintf("resized from %d to %d replicas: %s", r.From, r.To, resizeReason(r, w.Tenant))
		if err := AppendEvent(tx, &Event{Time: now, Type: EventWorkloadResized, Object: WorkloadObject(w.Key()), Tenant: w.Tenant, Message: msg}); err != nil {
			return res, err
		}
		res.Resized++
	}
	for _, x := range order {
		w, ps := x.w, x.ps
		if len(ps) != w.Spec.Replicas {
			return res, fmt.Errorf("store: plan places %d of %d replicas of %s", len(ps), w.Spec.Replicas, w.Key())
		}
		a := sched.Assignment(ps, now)
		w.State, w.Running = StateRunning, a
		if err := Put(tx, w, w.Meta.Revision); err != nil {
			return res, err
		}
		if m != nil {
			for _, r := range m(w, a) {
				if err := PutUsage(tx, &r); err != nil {
					return res, err
				}
			}
		}
		msg := fmt.Sprintf("placed on %d node(s), %s in %s", len(ps), a.Flavor, a.Region)
		if err := AppendEvent(tx, &Event{Time: now, Type: EventWorkloadPlaced, Object: WorkloadObject(w.Key()), Tenant: w.Tenant, Message: msg}); err != nil {
			return res, err
		}
		res.Placed++
		if w.Preemptions == 0 {
			res.First = append(res.First, FirstPlacement{Priority: w.Spec.Priority, Waited: now.Sub(w.SubmittedAt)})
		}
	}
	return res, nil
}

// resizeReason is a resize's reason as the workload's tenant is told it
// (a claimant of another tenant is not named, as in victimReason).
func resizeReason(r sched.Resize, tenant string) string {
	return victimReason(sched.Preemption{By: r.By, Reason: r.Reason}, tenant)
}

// victimReason is a preemption's reason as the victim's tenant is told it
// (its LastPreemption and its event): the core writes its text for the
// admin and may name the claimant (a planned start evicting overrunning
// work does), so a claimant of another tenant is not named. Tenants' names
// are not withheld: they are the tenant tree's, not workloads'.
func victimReason(p sched.Preemption, tenant string) string {
	if p.By == "" {
		return p.Reason
	}
	if by, _ := SplitKey(string(p.By)); by == tenant {
		return p.Reason
	}
	return strings.ReplaceAll(p.Reason, string(p.By), "a workload of another tenant")
}
