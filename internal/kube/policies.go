package kube

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/policy/effects"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
)

// PolicyGVR is the ArbiterPolicy resource: a policy file (either format,
// as `arbiter policy apply` takes) in spec.source.
var PolicyGVR = schema.GroupVersionResource{Group: "arbiter.dev", Version: "v1alpha1", Resource: "arbiterpolicies"}

// MaxPolicySource bounds an ArbiterPolicy's spec.source (the CRD's schema
// says the same).
const MaxPolicySource = 256 << 10

// Pod labels that give a workload the labels policies target: its class
// and its inference service. Every other pod label is the workload's too,
// for selectors.
const (
	LabelClass   = "arbiter.dev/class"
	LabelService = "arbiter.dev/service"
)

// Policies runs the ArbiterPolicies with the same engine and runtime as
// the server and the simulator (internal/policy, internal/policy/effects):
// each cycle it samples the metrics the runtime measures from the cycle's
// world, evaluates every policy and puts the effects of the actions in
// force into the core's input. Rule state lives in each policy's status
// (status.state), so that a new leader resumes rules in force without
// firing them again. A Policies is used from one goroutine.
type Policies struct {
	windows *policy.Windows
	rt      *effects.State
	byName  map[string]*policyRun
}

// policyRun is one ArbiterPolicy as compiled.
type policyRun struct {
	generation int64
	eng        *policy.Engine
	rules      []string
	err        error
	active     []policy.ActiveAction
	// firings counts firings and reverts (carried in status); last is the
	// latest one's text.
	firings int64
	last    string
	// missing lists the metrics without data at the last evaluation.
	missing []string
}

// NewPolicies makes an empty runner.
func NewPolicies() *Policies {
	return &Policies{windows: policy.NewWindows(effects.Window), rt: effects.NewState(), byName: map[string]*policyRun{}}
}

// PolicyFiring is a firing or revert of one cycle, for an Event.
type PolicyFiring struct {
	Policy string
	Text   string
	Event  policy.Event
}

// PolicyResult is what the policies did in one cycle.
type PolicyResult struct {
	// Held are workloads a cap holds back: pending for the why.
	Held []sched.Pending
	// Firings are this cycle's state changes.
	Firings []PolicyFiring
}

// savedState is what status.state carries between leaders.
type savedState struct {
	Generation int64                        `json:"generation"`
	Engine     policy.EngineState           `json:"engine"`
	CapBase    map[string]resource.MilliGPU `json:"capBase,omitempty"`
}

// Run compiles what changed among us, samples, evaluates and applies the
// effects to c.Input.
func (p *Policies) Run(c *Cycle, us []*unstructured.Unstructured, now time.Time) PolicyResult {
	p.sync(c, us)
	var res PolicyResult
	if len(p.byName) == 0 {
		return res
	}
	world := runtimeWorld(c)
	tenants := make([]string, 0, len(c.Tenants))
	for name := range c.Tenants {
		tenants = append(tenants, name)
	}
	sort.Strings(tenants)
	effects.Observe(p.windows, now, effects.Sample(world, tenants, c.Input.Down))
	var active []effects.Active
	for _, name := range p.names() {
		r := p.byName[name]
		if r.eng == nil {
			continue
		}
		step := r.eng.Evaluate(now, p.windows)
		r.active = step.Active
		r.missing = r.missing[:0]
		for _, err := range step.Errors {
			r.missing = append(r.missing, err.Error())
		}
		for _, f := range step.Firings {
			r.firings++
			r.last = f.String()
			res.Firings = append(res.Firings, PolicyFiring{Policy: name, Text: f.String(), Event: f.Event})
		}
		for _, a := range step.Active {
			active = append(active, effects.Active{Policy: name, ActiveAction: a})
		}
	}
	eff := p.rt.Compute(world, active)
	if !eff.Any() {
		return res
	}
	in := &c.Input
	in.Tenants = eff.AdjustTree(in.Tenants)
	in.Workloads = eff.Apply(in.Workloads)
	in.Workloads, in.Evict, res.Held = eff.Caps(in.Workloads)
	if len(eff.Drained) > 0 {
		in.Down = append(slices.Clip(in.Down), eff.Drained...)
	}
	if len(eff.Spot) > 0 {
		in.SpotPrices = eff.SpotPrices()
	}
	return res
}

func (p *Policies) names() []string {
	names := make([]string, 0, len(p.byName))
	for n := range p.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// sync compiles the policies that are new or changed (a new generation),
// retries those that failed (a target they name may exist now), and drops
// those deleted. A policy compiled afresh resumes the rule state its
// status carries when that state is of the same generation.
func (p *Policies) sync(c *Cycle, us []*unstructured.Unstructured) {
	seen := map[string]bool{}
	var known *policy.Targets
	for _, u := range us {
		name := u.GetName()
		seen[name] = true
		r := p.byName[name]
		if r != nil && r.generation == u.GetGeneration() && r.err == nil {
			continue
		}
		if known == nil {
			k := knownTargets(c)
			known = &k
		}
		nr := &policyRun{generation: u.GetGeneration()}
		if r != nil && r.generation == nr.generation {
			nr.firings, nr.last = r.firings, r.last
		} else {
			nr.firings, _, _ = unstructured.NestedInt64(u.Object, "status", "firings")
			nr.last, _, _ = unstructured.NestedString(u.Object, "status", "lastFiring")
		}
		var pol *policy.Policy
		pol, nr.eng, nr.err = compilePolicy(u, *known)
		if nr.err == nil {
			for _, rule := range pol.Rules {
				nr.rules = append(nr.rules, rule.Name)
			}
			p.restore(name, nr, u)
		}
		p.byName[name] = nr
	}
	for name := range p.byName {
		if !seen[name] {
			delete(p.byName, name)
		}
	}
}

// restore puts back the rule state and cap bases status.state carries.
func (p *Policies) restore(name string, r *policyRun, u *unstructured.Unstructured) {
	raw, _, _ := unstructured.NestedString(u.Object, "status", "state")
	if raw == "" {
		return
	}
	var st savedState
	if err := json.Unmarshal([]byte(raw), &st); err != nil || st.Generation != r.generation {
		return
	}
	r.eng.Restore(st.Engine)
	for k, v := range st.CapBase {
		p.rt.SetBase(name+"\x00"+k, v)
	}
}

// ErrPolicy is the sentinel of an ArbiterPolicy that does not compile.
var ErrPolicy = errors.New("kube: bad ArbiterPolicy")

// compilePolicy loads spec.source and resolves its targets.
func compilePolicy(u *unstructured.Unstructured, known policy.Targets) (*policy.Policy, *policy.Engine, error) {
	src, ok, _ := unstructured.NestedString(u.Object, "spec", "source")
	switch {
	case !ok || strings.TrimSpace(src) == "":
		return nil, nil, &SpecError{Kind: "ArbiterPolicy", Name: u.GetName(), Field: "spec.source", Msg: "empty: put the policy file's YAML here"}
	case len(src) > MaxPolicySource:
		return nil, nil, &SpecError{Kind: "ArbiterPolicy", Name: u.GetName(), Field: "spec.source", Msg: fmt.Sprintf("%d bytes, more than %d", len(src), MaxPolicySource)}
	}
	pol, err := policy.Load(u.GetName()+".yaml", []byte(src))
	if err == nil {
		err = pol.Resolve(known)
	}
	if err != nil {
		return nil, nil, &SpecError{Kind: "ArbiterPolicy", Name: u.GetName(), Field: "spec.source", Msg: strings.TrimPrefix(err.Error(), "policy: ")}
	}
	eng, err := policy.NewEngine(pol)
	if err != nil {
		return nil, nil, &SpecError{Kind: "ArbiterPolicy", Name: u.GetName(), Field: "spec.source", Msg: err.Error()}
	}
	return pol, eng, nil
}

// knownTargets lists what policies may name in this cycle: tenants, GPU
// models, regions, classes (kinds, priority classes, the class label),
// pools (the low-priority pool and the nodes' pool labels) and services.
// Classes and services written with their kind (class:x) may be ones no
// pod has yet: a pod's labels bring them.
func knownTargets(c *Cycle) policy.Targets {
	classes := map[string]bool{"vm": true, "training": true, "inference": true, "batch": true,
		"critical": true, "high": true, "normal": true, "low": true, "spot": true}
	pools := map[string]bool{effects.LowPriorityPool: true}
	services := map[string]bool{}
	for _, w := range c.Input.Workloads {
		if v := w.Labels["class"]; v != "" {
			classes[v] = true
		}
		if v := w.Labels["service"]; v != "" {
			services[v] = true
		}
	}
	for _, n := range c.Input.Fleet.Nodes {
		if v := n.Labels[sched.PoolLabel]; v != "" {
			pools[v] = true
		}
	}
	k := policy.Targets{Classes: sortedSet(classes), Pools: sortedSet(pools), Services: sortedSet(services),
		Regions: slices.Clone(c.Input.Fleet.Regions), Open: []policy.TargetKind{policy.TargetClass, policy.TargetService}}
	for name := range c.Tenants {
		k.Tenants = append(k.Tenants, name)
	}
	sort.Strings(k.Tenants)
	for _, m := range c.Input.Fleet.Catalog.ModelNames() {
		k.Flavors = append(k.Flavors, string(m))
	}
	return k
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// runtimeWorld is the cycle as the policy runtime sees it.
func runtimeWorld(c *Cycle) effects.World {
	w := effects.World{Workloads: c.Input.Workloads}
	for _, n := range c.Input.Fleet.Nodes {
		w.Nodes = append(w.Nodes, effects.Node{ID: n.ID, Model: n.Model, Region: n.Region, Pool: n.Labels[sched.PoolLabel], GPUs: n.GPUs})
	}
	return w
}

// policyStatus is an ArbiterPolicy's status object: whether it compiled
// (and why not), its rules, those in force, its firings and the rule
// state a new leader resumes.
func (p *Policies) policyStatus(name string) map[string]any {
	r := p.byName[name]
	if r == nil {
		return nil
	}
	st := map[string]any{"valid": r.err == nil, "message": "", "rules": strs(r.rules), "active": []any{},
		"firings": r.firings, "lastFiring": r.last, "state": "", "observedGeneration": r.generation}
	if r.err != nil {
		st["message"] = r.err.Error()
		return st
	}
	if len(r.missing) > 0 {
		st["message"] = strings.Join(r.missing, "; ")
	}
	inForce := map[string]bool{}
	var active []string
	for _, a := range r.active {
		if !inForce[a.Rule] {
			inForce[a.Rule] = true
			active = append(active, a.Rule)
		}
	}
	st["active"] = strs(active)
	saved := savedState{Generation: r.generation, Engine: r.eng.State()}
	prefix := name + "\x00"
	for k, v := range p.rt.Bases() {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			if saved.CapBase == nil {
				saved.CapBase = map[string]resource.MilliGPU{}
			}
			saved.CapBase[rest] = v
		}
	}
	if b, err := json.Marshal(saved); err == nil {
		st["state"] = string(b)
	}
	return st
}

func strs(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// podLabels are the workload labels of a pod: its own labels (the API
// server bounds them), with the class and service labels under the
// names policies target.
func podLabels(l map[string]string) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l)+2)
	for k, v := range l {
		out[k] = v
	}
	if v := l[LabelClass]; v != "" {
		out["class"] = v
	}
	if v := l[LabelService]; v != "" {
		out["service"] = v
	}
	return out
}
