package server

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/policy/effects"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// policyRunner evaluates the applied policies on live metrics sampled
// from the state, records every firing, and applies the actions in force
// to the scheduler's input (actions.go) and sends notify actions
// (notifications.go).
type policyRunner struct {
	s       *Server
	mu      sync.Mutex
	engines map[string]*policy.Engine
	active  map[string][]policy.ActiveAction
	windows *policy.Windows
	// gen counts changes of the policy set and of the active actions,
	// which change the tenant tree the scheduler sees.
	gen uint64
	// hc posts notifications; delivered closes when the last batch is
	// sent (see sendNotifications).
	hc        *http.Client
	delivered chan struct{}
	// rt is the policy runtime's state: the bases of the caps in force
	// (see actions.go); last is the effects the last scheduling cycle
	// applied (what workload show and why report).
	rt   *effects.State
	last *effects.Effects
	// revs holds each policy's stored revision, notified each rule's
	// last notification (by policy, then rule), saved the state last
	// written (see policystate.go).
	revs     map[string]int64
	notified map[string]map[string]savedNotice
	saved    []byte
	// promSeries are the Prometheus queries' series recorded in windows
	// (promsource.go).
	promSeries map[string]bool
}

func (pr *policyRunner) generation() uint64 {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.gen
}

// policyWindow is the width of the metric windows policies read.
const policyWindow = effects.Window

func newPolicyRunner(s *Server) *policyRunner {
	pr := &policyRunner{s: s, engines: map[string]*policy.Engine{}, active: map[string][]policy.ActiveAction{},
		windows: policy.NewWindows(policyWindow), hc: &http.Client{Timeout: 10 * time.Second}, rt: effects.NewState(),
		revs: map[string]int64{}, notified: map[string]map[string]savedNotice{}}
	// A Prometheus result counts for two polls (promsource.go).
	pr.windows.SetMaxAge(2 * s.opts.PolicyInterval)
	return pr
}

// knownTargets lists what policies may name: tenants, GPU models, regions,
// workload classes (kinds, priority classes, "class" labels), pools
// ("pool" labels of nodes) and services ("service" labels), with the
// services and classes the probes measure (probed).
func knownTargets(wd *world, probed []policy.Target) policy.Targets {
	set := func(m map[string]bool) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	classes := map[string]bool{"vm": true, "training": true, "inference": true, "batch": true,
		"critical": true, "high": true, "normal": true, "low": true, "spot": true}
	// The low-priority pool may be named without any node in it (see
	// effects.LowPriorityPool), as in the simulator.
	pools, services, regions := map[string]bool{effects.LowPriorityPool: true}, map[string]bool{}, map[string]bool{}
	for _, x := range wd.Workloads {
		if c := x.Spec.Labels["class"]; c != "" {
			classes[c] = true
		}
		if v := x.Spec.Labels["service"]; v != "" {
			services[v] = true
		}
	}
	for _, t := range probed {
		switch t.Kind {
		case policy.TargetService:
			services[t.Name] = true
		case policy.TargetClass:
			classes[t.Name] = true
		}
	}
	for _, n := range wd.Nodes {
		if p := n.Labels["pool"]; p != "" {
			pools[p] = true
		}
		regions[n.Region] = true
	}
	k := policy.Targets{Classes: set(classes), Pools: set(pools), Services: set(services), Regions: set(regions)}
	for _, t := range wd.Tenants {
		k.Tenants = append(k.Tenants, t.Name)
	}
	for _, m := range wd.Catalog.ModelNames() {
		k.Flavors = append(k.Flavors, string(m))
	}
	return k
}

// compile loads, resolves and builds an engine for a policy's source;
// probed are the probes' targets.
func compile(wd *world, probed []policy.Target, name, file, source string) (*policy.Policy, *policy.Engine, error) {
	if file == "" {
		file = name + ".yaml"
	}
	p, err := policy.Load(file, []byte(source))
	if err == nil {
		err = p.Resolve(knownTargets(wd, probed))
	}
	if err != nil {
		field := "source"
		var ye yamlfile.Errors
		if errors.As(err, &ye) && len(ye) > 0 && ye[0].Field != "" {
			field = "source." + ye[0].Field
		}
		msg := strings.TrimPrefix(err.Error(), "policy: ")
		return nil, nil, apiErr(http.StatusBadRequest, api.CodeInvalid, field, "%s", msg)
	}
	eng, err := policy.NewEngine(p)
	if err != nil {
		return nil, nil, apiErr(http.StatusBadRequest, api.CodeInvalid, "source", "%v", err)
	}
	return p, eng, nil
}

func (pr *policyRunner) load(ctx context.Context) error {
	return pr.s.st.View(ctx, func(tx store.ReadTx) error {
		wd, err := loadWorldWith(tx, pr.s.cat.Load(), true, &pr.s.live)
		if err != nil {
			return err
		}
		ps, err := store.List[store.Policy](tx, "")
		if err != nil {
			return err
		}
		sp, err := readSavedPolicies(tx)
		if err != nil {
			pr.s.log.Warn("policy: saved rule state unreadable; rules start fresh", "err", err)
		}
		pr.mu.Lock()
		defer pr.mu.Unlock()
		for _, p := range ps {
			_, eng, err := compile(wd, pr.s.probes.targets(), p.Name, p.File, p.Source)
			if err != nil {
				pr.s.log.Warn("policy no longer valid; skipped", "policy", p.Name, "err", err)
				continue
			}
			pr.engines[p.Name], pr.revs[p.Name] = eng, p.Meta.Revision
			if pr.restore(sp, p.Name, p.Meta.Revision, eng) {
				pr.s.log.Info("policy: rule state resumed", "policy", p.Name)
			}
		}
		return nil
	})
}

// loaded reports whether the runner has an engine for policy name at
// stored revision rev.
func (pr *policyRunner) loaded(name string, rev int64) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	_, ok := pr.engines[name]
	return ok && pr.revs[name] == rev
}

// set replaces policy name's engine (nil: the policy was deleted) with
// one for its stored revision rev; its rules start fresh.
func (pr *policyRunner) set(name string, eng *policy.Engine, rev int64) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if eng == nil {
		delete(pr.engines, name)
		delete(pr.revs, name)
	} else {
		pr.engines[name], pr.revs[name] = eng, rev
	}
	delete(pr.active, name)
	delete(pr.notified, name)
	pr.gen++
}

// sample records the metrics policies read from the world, as the policy
// runtime measures them (effects.Sample; the simulator does the same).
func (pr *policyRunner) sample(wd *world, now time.Time) {
	tenants := make([]string, len(wd.Tenants))
	for i, t := range wd.Tenants {
		tenants[i] = t.Name
	}
	obs := effects.Sample(runtimeWorld(wd, nil), tenants, wd.Down)
	obs = append(obs, pr.s.busySample(wd, now)...) // busy_utilization, from the agents' readings
	effects.Observe(pr.windows, now, obs)
}

// tick samples metrics, evaluates every policy and records the firings.
func (pr *policyRunner) tick(ctx context.Context) {
	var wd *world
	err := pr.s.st.View(ctx, func(tx store.ReadTx) error {
		var err error
		wd, err = loadWorldWith(tx, pr.s.cat.Load(), true, &pr.s.live)
		return err
	})
	if err != nil {
		return
	}
	now := pr.s.now()
	pr.mu.Lock()
	pr.sample(wd, now)
	var firings []*store.Firing
	var notes []Notification
	names := make([]string, 0, len(pr.engines))
	for n := range pr.engines {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		step := pr.engines[n].Evaluate(now, pr.windows)
		if !reflect.DeepEqual(pr.active[n], step.Active) {
			pr.gen++
		}
		pr.active[n] = step.Active
		for _, f := range step.Firings {
			firings = append(firings, &store.Firing{Policy: n, Rule: f.Rule, Event: f.Event.String(), Time: f.Time, DryRun: f.DryRun, Text: f.String()})
			pr.s.metrics.firings.WithLabelValues(n, f.Rule, f.Event.String()).Inc()
			for _, note := range notifications(n, f) {
				notes = append(notes, note)
				pr.noteSent(note)
			}
		}
	}
	// The runtime records the bases of the caps that came into force now
	// (after a restart: at the first evaluation).
	// last is what workload show and why report until the next cycle.
	pr.last = pr.rt.Compute(runtimeWorld(wd, nil), pr.activeList())
	pr.s.hist.observe(now, wd, pr.windows)
	state := pr.snapshot()
	pr.mu.Unlock()
	if len(firings) == 0 && state == nil {
		return
	}
	err = pr.s.st.Update(ctx, func(tx store.WriteTx) error {
		if state != nil {
			if err := saveState(tx, state); err != nil {
				return err
			}
		}
		for _, f := range firings {
			if err := store.AppendFiring(tx, f); err != nil {
				return err
			}
			if err := store.AppendEvent(tx, &store.Event{Time: now, Type: store.EventPolicyFiring, Object: store.PolicyObject(f.Policy), Message: f.Text}); err != nil {
				return err
			}
		}
		for _, n := range notes {
			if err := store.AppendEvent(tx, &store.Event{Time: now, Type: store.EventPolicyNotification, Object: store.PolicyObject(n.Policy), Message: n.Text()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		pr.s.log.Error("policy: recording firings", "err", err)
		return
	}
	if state != nil {
		pr.mu.Lock()
		pr.saved = state
		pr.mu.Unlock()
	}
	if len(firings) == 0 {
		return
	}
	for _, f := range firings {
		pr.s.log.Info("policy firing", "policy", f.Policy, "rule", f.Rule, "event", f.Event, "text", f.Text)
	}
	pr.sendNotifications(ctx, notes)
	pr.s.notify(true)
}

// ---- handlers ----

func policyOut(p *store.Policy) api.Policy {
	o := api.Policy{Name: p.Name, File: p.File, AppliedAt: p.AppliedAt, Revision: p.Meta.Revision, Rules: []string{}}
	if pol, err := policy.Load(p.File, []byte(p.Source)); err == nil {
		o.Format = pol.Format.String()
		for _, r := range pol.Rules {
			o.Rules = append(o.Rules, r.Name)
		}
	}
	return o
}

func (s *Server) applyPolicy(w http.ResponseWriter, r *http.Request) error {
	var req api.PolicyApply
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if !validName(req.Name) {
		return badName("name", req.Name)
	}
	if strings.TrimSpace(req.Source) == "" {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "source", "source is empty: send the policy file's YAML")
	}
	if req.File == "" {
		req.File = req.Name + ".yaml"
	}
	if err := s.ApplyPolicy(r.Context(), req.Name, req.File, req.Source); err != nil {
		return err
	}
	var p *store.Policy
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		var err error
		p, err = store.Get[store.Policy](tx, req.Name)
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, policyOut(p))
	return nil
}

func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request) error {
	pg, err := s.newPage(r)
	if err != nil {
		return err
	}
	err = s.st.View(r.Context(), func(tx store.ReadTx) error {
		return scanPage(tx, pg, "", func(p *store.Policy) (any, bool) { return policyOut(p), true })
	})
	if err != nil {
		return err
	}
	pg.write(w)
	return nil
}

func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) error {
	var p *store.Policy
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		var err error
		p, err = store.Get[store.Policy](tx, r.PathValue("name"))
		return err
	})
	if err != nil {
		return notFound("policy", r.PathValue("name"))
	}
	writeJSON(w, http.StatusOK, policyOut(p))
	return nil
}

func (s *Server) deletePolicy(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		if err := store.Delete(tx, store.KindPolicy, name); err != nil {
			return notFound("policy", name)
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: store.EventPolicyDeleted, Object: store.PolicyObject(name)})
	})
	if err != nil {
		return err
	}
	s.policies.set(name, nil, 0)
	s.notify(true)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listFirings(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	pg, err := s.newPage(r)
	if err != nil {
		return err
	}
	err = s.st.View(r.Context(), func(tx store.ReadTx) error {
		if _, ok := tx.GetRaw(store.KindPolicy, name); !ok {
			return notFound("policy", name)
		}
		return scanPage(tx, pg, "", func(f *store.Firing) (any, bool) {
			return api.Firing{Seq: f.Seq, Policy: f.Policy, Rule: f.Rule, Event: f.Event, Time: f.Time, DryRun: f.DryRun, Text: f.Text}, f.Policy == name
		})
	})
	if err != nil {
		return err
	}
	pg.write(w)
	return nil
}

// ApplyPolicy applies a policy from its source, as POST /v1/policies does.
// Applying the stored policy again (same file name and source, as `serve
// --policy` does at every start) changes nothing: its rules keep their
// state, so that a rule in force stays so without firing again. Any
// other change starts its rules afresh.
func (s *Server) ApplyPolicy(ctx context.Context, name, file, source string) error {
	if err := s.checkPolicySource(source); err != nil {
		return err
	}
	var eng *policy.Engine
	p := &store.Policy{Name: name, File: file, Source: source, AppliedAt: s.now()}
	unchanged := false
	err := s.st.Update(ctx, func(tx store.WriteTx) error {
		if old, err := store.Get[store.Policy](tx, name); err == nil && old.File == file && old.Source == source && s.policies.loaded(name, old.Meta.Revision) {
			unchanged = true
			return nil
		}
		if err := s.checkPolicyCount(tx, name); err != nil {
			return err
		}
		wd, err := loadWorld(tx, s.cat.Load(), true)
		if err != nil {
			return err
		}
		if _, eng, err = compile(wd, s.probes.targets(), name, file, source); err != nil {
			return err
		}
		if err := store.Put(tx, p, store.Any); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: p.AppliedAt, Type: store.EventPolicyApplied, Object: store.PolicyObject(p.Name)})
	})
	if err != nil || unchanged {
		return err
	}
	s.policies.set(name, eng, p.Meta.Revision)
	s.notify(false)
	return nil
}
