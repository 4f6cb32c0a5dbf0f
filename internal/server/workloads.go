package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

func workloadOut(x *store.Workload) api.Workload {
	o := api.Workload{
		WorkloadSpec: api.SpecFrom(x.Spec), State: string(x.State), SubmittedAt: x.SubmittedAt,
		Preemptions: x.Preemptions, LastPreemption: x.LastPreemption, Revision: x.Meta.Revision,
	}
	o.Tenant = x.Tenant
	o.Command = commandOut(x.Command)
	if a := x.Running; a != nil {
		ra := &api.Assignment{Flavor: string(a.Flavor), Region: a.Region, OnReservation: a.OnReservation, StartedAt: a.StartedAt}
		for _, rep := range a.Replicas {
			ra.Replicas = append(ra.Replicas, api.Replica{Node: string(rep.Node), GPUs: rep.GPUs, Milli: int64(rep.Milli), MIG: rep.MIG})
		}
		o.Running = ra
	}
	if !x.State.Live() && !x.EndedAt.IsZero() {
		o.EndedAt, o.EndReason = x.EndedAt, x.EndReason
		for _, n := range x.EndNodes {
			o.EndNodes = append(o.EndNodes, string(n))
		}
		o.ExitCodes = lastExits(x)
	}
	return o
}

// lastExits are the exit codes of the last run's replicas, by replica
// (nil when no replica of it reported an exit).
func lastExits(x *store.Workload) []api.ReplicaExit {
	var last time.Time
	for _, e := range x.Exits {
		if e.StartedAt.After(last) {
			last = e.StartedAt
		}
	}
	var out []api.ReplicaExit
	for _, e := range x.Exits {
		if e.StartedAt.Equal(last) {
			out = append(out, api.ReplicaExit{Replica: e.Replica, Code: e.Code})
		}
	}
	slices.SortFunc(out, func(a, b api.ReplicaExit) int { return a.Replica - b.Replica })
	return out
}

// shape is the fleet submissions are checked against (workload.CheckFleet)
// without reading the whole store: recomputed at most once per node-kind
// revision.
func (s *Server) shape(r *http.Request) (*workload.FleetShape, error) {
	var rev int64
	s.st.View(r.Context(), func(tx store.ReadTx) error { rev = tx.KindRevision(store.KindNode); return nil })
	if c := s.shapeCache.Load(); c != nil && c.rev == rev {
		return c.shape, nil
	}
	wd, err := s.readWorld(r, false)
	if err != nil {
		return nil, err
	}
	sh := workload.ShapeOf(wd.Fleet)
	s.shapeCache.Store(&shapeAt{rev: rev, shape: sh})
	return sh, nil
}

type shapeAt struct {
	rev   int64
	shape *workload.FleetShape
}

// fleetProblems answers a spec the fleet cannot run: 400 naming the first
// field, every problem in the message.
func fleetProblems(probs []workload.Problem) error {
	msgs := make([]string, len(probs))
	for i, p := range probs {
		msgs[i] = p.String()
	}
	return apiErr(http.StatusBadRequest, api.CodeInvalid, probs[0].Field, "%s", strings.Join(msgs, "; "))
}

func (s *Server) submitWorkload(w http.ResponseWriter, r *http.Request) error {
	tenant := r.PathValue("tenant") // the router checked it is the caller's (tenantScoped)
	key, err := parseIdempotencyKey(r.Header)
	if err != nil {
		return err
	}
	var req api.WorkloadSpec
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	// A retried submission is answered before anything is checked again:
	// the fleet or the limits may have changed since the first.
	var claim *idemClaim
	if key != "" {
		fp, err := submitFingerprint(&req)
		if err != nil {
			return err
		}
		claim = &idemClaim{tenant: tenant, key: key, fingerprint: fp}
		var replay *store.Workload
		if err := s.st.View(r.Context(), func(tx store.ReadTx) error {
			replay, err = claim.replayOf(tx, s.now())
			return err
		}); err != nil {
			return err
		}
		if replay != nil {
			writeReplay(w, replay)
			return nil
		}
	}
	if req.Tenant != "" && req.Tenant != tenant {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "tenant", "tenant %q differs from the tenant in the path; leave it out", req.Tenant)
	}
	spec, ferrs := req.ToWorkload()
	if len(ferrs) > 0 {
		msgs := make([]string, len(ferrs))
		for i, fe := range ferrs {
			msgs[i] = fe.Field + ": " + fe.Msg
		}
		return apiErr(http.StatusBadRequest, api.CodeInvalid, ferrs[0].Field, "%s", strings.Join(msgs, "; "))
	}
	if !validName(req.Name) {
		return badName("name", req.Name)
	}
	if f, msg := req.Command.Validate(); f != "" {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, f, "%s", msg)
	}
	if err := s.checkWorkloadFields(&req); err != nil {
		return err
	}
	if err := s.checkGrace(spec); err != nil {
		return err
	}
	spec.Tenant = tenant
	cat := s.cat.Load()
	sh, err := s.shape(r)
	if err != nil {
		return err
	}
	if probs := workload.CheckFleet(&spec, cat, sh); len(probs) > 0 {
		return fleetProblems(probs)
	}
	// The stored time as it reads back (UTC, no monotonic reading), so that
	// the object handed to the live cache equals the stored one.
	obj := &store.Workload{Tenant: tenant, Spec: spec, State: store.StatePending, SubmittedAt: s.now().UTC().Round(0), Command: commandIn(req.Command)}
	size := storedSize(obj)
	var replay *store.Workload
	err = s.st.Batch(r.Context(), func(tx store.WriteTx) error {
		replay = nil
		if claim != nil { // a concurrent retry may have committed since
			var err error
			if replay, err = claim.replayOf(tx, obj.SubmittedAt); err != nil || replay != nil {
				return err
			}
		}
		if err := checkSubmitPriority(tx, tenant, spec.Priority); err != nil {
			return err
		}
		if err := s.checkQueued(tx, tenant, size); err != nil {
			return err
		}
		if spec.Reservation != "" {
			if _, ok := tx.GetRaw(store.KindReservation, store.ReservationKey(tenant, spec.Reservation)); !ok {
				return apiErr(http.StatusBadRequest, api.CodeInvalid, "reservation", "unknown reservation %q", spec.Reservation)
			}
		}
		if err := store.Put(tx, obj, store.MustNotExist); err != nil {
			return err
		}
		if claim != nil {
			if err := claim.keep(tx, obj, obj.SubmittedAt); err != nil {
				return err
			}
		}
		return store.AppendEvent(tx, &store.Event{Time: obj.SubmittedAt, Type: store.EventWorkloadSubmitted, Object: store.WorkloadObject(obj.Key()), Tenant: tenant, ObjectRevision: obj.Meta.Revision})
	})
	if err != nil {
		return err
	}
	if replay != nil {
		writeReplay(w, replay)
		return nil
	}
	s.live.offer(obj)
	s.metrics.submissions.Inc()
	s.notify(true)
	writeJSON(w, http.StatusCreated, workloadOut(obj))
	return nil
}

func (s *Server) listWorkloadsWith(w http.ResponseWriter, r *http.Request, prefix string) error {
	q := r.URL.Query()
	state := q.Get("state")
	if state != "" && !slices.Contains(api.WorkloadStates, state) {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "state", "state must be one of %s, got %q", strings.Join(api.WorkloadStates, ", "), clip(state, 64))
	}
	name, err := nameParam(q)
	if err != nil {
		return err
	}
	// Starting and WaitingForGPUs are stored as Running.
	stored := state
	if state == api.StateStarting || state == api.StateWaitingForGPUs {
		stored = api.StateRunning
	}
	pg, err := s.newPage(r)
	if err != nil {
		return err
	}
	acts := s.policies.inForceNow()
	err = s.st.View(r.Context(), func(tx store.ReadTx) error {
		sh := newShower(tx)
		var serr error
		conv := func(x *store.Workload) (any, bool) {
			if stored != "" && string(x.State) != stored {
				return nil, false
			}
			shown, err := sh.show(x)
			if err != nil {
				serr = err
				return nil, false
			}
			o := workloadOut(x)
			o.State = shown
			if len(acts) > 0 {
				s.effectsOf(tx, x, acts, s.lastPending(x)).apply(&o)
			}
			return o, state == "" || shown == state
		}
		if name != "" {
			return errors.Join(scanNamed(tx, pg, prefix, name, conv), serr)
		}
		return errors.Join(scanPage(tx, pg, prefix, conv), serr)
	})
	if err != nil {
		return err
	}
	pg.write(w)
	return nil
}

func (s *Server) listWorkloads(w http.ResponseWriter, r *http.Request) error {
	tenant := r.PathValue("tenant") // the router checked it is the caller's (tenantScoped)
	return s.listWorkloadsWith(w, r, tenant+"/")
}

// listAllWorkloads lists every tenant's workloads for the admin and the
// caller's own for a tenant token; ?name= keeps those of that name (one
// per tenant at most: how the CLI finds a workload's tenant).
func (s *Server) listAllWorkloads(w http.ResponseWriter, r *http.Request) error {
	return s.listWorkloadsWith(w, r, ownPrefix(who(r)))
}

func (s *Server) loadWorkload(r *http.Request) (*store.Workload, error) {
	tenant := r.PathValue("tenant") // the router checked it is the caller's (tenantScoped)
	name := r.PathValue("name")
	var x *store.Workload
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		var err error
		x, err = store.Get[store.Workload](tx, store.WorkloadKey(tenant, name))
		return err
	})
	if err != nil {
		return nil, notFound("workload", name)
	}
	return x, nil
}

func (s *Server) getWorkload(w http.ResponseWriter, r *http.Request) error {
	x, err := s.loadWorkload(r)
	if err != nil {
		return err
	}
	o := workloadOut(x)
	if o.Running != nil {
		for i := range o.Running.Replicas {
			o.Running.Replicas[i].IdleGPUs = s.idleGPUs(x.Key(), x.Running.StartedAt, i)
		}
	}
	acts := s.policies.inForceNow()
	err = s.st.View(r.Context(), func(tx store.ReadTx) error {
		s.effectsOf(tx, x, acts, s.lastPending(x)).apply(&o)
		o.State, err = shownState(tx, x)
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, o)
	return nil
}

func (s *Server) cancelWorkload(w http.ResponseWriter, r *http.Request) error {
	tenant := r.PathValue("tenant") // the router checked it is the caller's (tenantScoped)
	name := r.PathValue("name")
	var x *store.Workload
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		var err error
		if x, err = store.Get[store.Workload](tx, store.WorkloadKey(tenant, name)); err != nil {
			return notFound("workload", name)
		}
		if !x.State.Live() {
			return nil // cancelling twice is a no-op
		}
		by := "the admin"
		if c := who(r); !c.admin {
			by = "tenant " + tenant
		}
		if err := store.EndRun(tx, x, store.StateCancelled, s.now(), "cancelled by "+by); err != nil {
			return err
		}
		if err := store.Put(tx, x, x.Meta.Revision); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: x.EndedAt, Type: store.EventWorkloadCancelled, Object: store.WorkloadObject(x.Key()), Tenant: tenant})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	writeJSON(w, http.StatusOK, workloadOut(x))
	return nil
}

// lastPending returns the last cycle's pending entry for x, nil when
// there is none (x is not pending or not yet considered).
func (s *Server) lastPending(x *store.Workload) *sched.Pending {
	if x.State != store.StatePending {
		return nil
	}
	if p, ok := s.why.Load().Pending(x.Key()); ok {
		return &p
	}
	return nil
}

func (s *Server) whyWorkload(w http.ResponseWriter, r *http.Request) error {
	x, err := s.loadWorkload(r)
	if err != nil {
		return err
	}
	idx := s.why.Load()
	out := api.Why{Workload: string(x.Spec.Name), State: string(x.State), PlanRevision: idx.Revision}
	if acts := s.policies.inForceNow(); len(acts) > 0 {
		err = s.st.View(r.Context(), func(tx store.ReadTx) error {
			out.Effects = s.effectsOf(tx, x, acts, s.lastPending(x)).effects
			return nil
		})
		if err != nil {
			return err
		}
	}
	switch x.State {
	case store.StateRunning:
		a := x.Running
		out.Reason = fmt.Sprintf("running since %s: %d replica(s) of %v, %s in %s", a.StartedAt.UTC().Format("2006-01-02T15:04:05Z"), len(a.Replicas), x.Spec.GPUs, a.Flavor, a.Region)
		if a.OnReservation {
			out.Reason += fmt.Sprintf(", on reservation %s", x.Spec.Reservation)
		}
		s.setOverrun(&out, x, s.now())
		if x.Spec.Elastic != nil {
			out.Replicas, out.MinReplicas, out.MaxReplicas = len(a.Replicas), x.Spec.MinReplicas(), x.Spec.MaxReplicas()
			out.Reason += fmt.Sprintf("; elastic %d–%d", out.MinReplicas, out.MaxReplicas)
			switch c, ok := idx.Capped(x.Key()); {
			case out.Replicas >= out.MaxReplicas:
				out.NotLarger = "at its max"
			case ok:
				out.NotLarger = c.Reason
			default:
				out.NotLarger = "not yet considered for growth"
			}
			out.Details = append(out.Details, "not larger: "+out.NotLarger)
		}
	case store.StateCancelled:
		out.Reason = "cancelled"
		if x.EndReason != "" {
			out.Reason = x.EndReason
		}
		if !x.EndedAt.IsZero() {
			out.Reason = fmt.Sprintf("ended at %s: %s", x.EndedAt.UTC().Format("2006-01-02T15:04:05Z"), out.Reason)
		}
	case store.StateSucceeded, store.StateFailed:
		out.Reason = fmt.Sprintf("ended at %s: %s", x.EndedAt.UTC().Format("2006-01-02T15:04:05Z"), strings.ToLower(string(x.State)))
		if x.EndReason != "" {
			out.Reason += " (" + x.EndReason + ")"
		}
	default:
		if p, ok := idx.Pending(x.Key()); ok {
			caller := who(r)
			show := nameShown(caller)
			out.Code, out.Reason, out.Details = string(p.Code), pendingReason(p, caller.admin, show), slices.Clone(p.Details)
			setPlanned(&out, p, show)
			if len(p.Blockers) > 0 {
				b, err := json.Marshal(p.Blockers)
				if err != nil {
					return err
				}
				out.Blockers = b
			}
		} else {
			out.Reason = fmt.Sprintf("not yet considered: submitted at revision %d, the last scheduling cycle saw revision %d", x.Meta.Created, idx.Revision)
		}
		if x.LastPreemption != "" {
			out.Details = append(out.Details, "last preempted: "+x.LastPreemption)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
