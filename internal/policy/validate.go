package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// Targets is what exists in the fleet and tenant tree, by kind: the names a
// policy may refer to. Validate and Resolve check targets against it.
type Targets struct {
	Tenants  []string
	Classes  []string // workload classes, such as batch_jobs or developer_instances
	Pools    []string
	Services []string // inference services
	Flavors  []string // GPU models, such as H100-80G
	Regions  []string
	// Open are kinds whose names need not exist yet: written with their
	// kind (class:x), any name is accepted. Kubernetes mode opens classes
	// and services, which any pod's labels may bring.
	Open []TargetKind
}

func (k Targets) names(kind TargetKind) []string {
	switch kind {
	case TargetTenant:
		return k.Tenants
	case TargetClass:
		return k.Classes
	case TargetPool:
		return k.Pools
	case TargetService:
		return k.Services
	case TargetFlavor:
		return k.Flavors
	case TargetRegion:
		return k.Regions
	}
	return nil
}

var namedKinds = []TargetKind{TargetTenant, TargetClass, TargetPool, TargetService, TargetFlavor, TargetRegion}

// Source says where the value of a metric of a target kind comes from.
type Source int

const (
	// FromWorld metrics are measured from the world (the nodes and the
	// workloads as the core sees them) by the policy runtime's sampler,
	// in the server and in the simulator alike.
	FromWorld Source = iota + 1
	// Pushed metrics come from outside: on the server, pushed by a metrics
	// source (POST /v1/metrics); in the simulator, from its service and
	// capacity models or a scenario's scripted samples.
	Pushed
	// FromAgents metrics are measured on the GPUs: on the server, from the
	// NVML readings node agents send in their heartbeats; in the
	// simulator, from its model of how busy each kind of work keeps its
	// GPUs. The policy runtime samples them (effects.BusyTotals) on both
	// sides, each from its own readings.
	FromAgents
)

func (s Source) String() string {
	switch s {
	case FromWorld:
		return "world"
	case Pushed:
		return "pushed"
	case FromAgents:
		return "agents"
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// MetricSources is the one table of policy metrics × target kinds: the
// pairs that have a value, and where it comes from. The loader accepts a
// condition only on these pairs; the server and the simulator sample by it
// (internal/policy/effects).
var MetricSources = map[Metric]map[TargetKind]Source{
	MetricUtilization: {TargetCluster: FromWorld, TargetTenant: FromWorld, TargetPool: FromWorld, TargetFlavor: FromWorld, TargetRegion: FromWorld},
	MetricPendingGPUs: {TargetCluster: FromWorld, TargetTenant: FromWorld, TargetFlavor: FromWorld, TargetRegion: FromWorld},
	MetricP50Latency:  {TargetCluster: Pushed, TargetService: Pushed, TargetClass: Pushed, TargetSelector: Pushed},
	MetricP95Latency:  {TargetCluster: Pushed, TargetService: Pushed, TargetClass: Pushed, TargetSelector: Pushed},
	MetricP99Latency:  {TargetCluster: Pushed, TargetService: Pushed, TargetClass: Pushed, TargetSelector: Pushed},
	MetricQueueWait: {TargetCluster: Pushed, TargetTenant: Pushed, TargetClass: Pushed, TargetPool: Pushed, TargetFlavor: Pushed,
		TargetRegion: Pushed, TargetSelector: Pushed},
	MetricSpotPrice: {TargetCluster: Pushed, TargetPool: Pushed, TargetFlavor: Pushed, TargetRegion: Pushed},
	MetricCapacityFailureRate: {TargetCluster: Pushed, TargetTenant: Pushed, TargetClass: Pushed, TargetPool: Pushed,
		TargetFlavor: Pushed, TargetRegion: Pushed},
	MetricSuccessRatio: {TargetCluster: Pushed, TargetService: Pushed, TargetClass: Pushed, TargetSelector: Pushed},
	MetricBusyUtilization: {TargetCluster: FromAgents, TargetTenant: FromAgents, TargetPool: FromAgents,
		TargetFlavor: FromAgents, TargetRegion: FromAgents},
}

// metricKinds says which target kinds each metric can be measured on
// (from MetricSources, in kind order).
var metricKinds = func() map[Metric][]TargetKind {
	out := map[Metric][]TargetKind{}
	for m, ks := range MetricSources {
		for k := TargetCluster; k < targetKindCount; k++ {
			if _, ok := ks[k]; ok {
				out[m] = append(out[m], k)
			}
		}
	}
	return out
}()

// Validate checks that every target the policy names exists in known and
// is of a kind its field accepts; it returns all problems (wrapped in
// ErrInvalid, as a yamlfile.Errors), each naming the field and the known
// names. It does not change p.
func (p *Policy) Validate(known Targets) error {
	return p.resolve(known, false)
}

// Resolve is Validate that also fills in the kind of every target written
// as a bare name ("developer_instances" → class:developer_instances), so
// that actions and metric queries carry the kind.
func (p *Policy) Resolve(known Targets) error {
	return p.resolve(known, true)
}

func (p *Policy) resolve(known Targets, set bool) error {
	v := resolver{known: known, set: set}
	for i := range p.Rules {
		r := &p.Rules[i]
		v.cond(&r.When)
		for j := range r.Actions {
			a := &r.Actions[j]
			targets := actionTargets(a)
			fields := make([]string, 0, len(targets))
			for f := range targets {
				fields = append(fields, f)
			}
			slices.Sort(fields)
			for _, f := range fields {
				v.target(targets[f], actionKinds[a.Type][baseField(f)], fieldPos(a.at, f, a.Pos), a.Path+"."+f, fmt.Sprintf("%s of %s", baseField(f), a.Type))
			}
			if a.Type == ActionReallocate {
				v.guarantee(a)
			}
		}
	}
	if err := v.errs.Err(); err != nil {
		return fmt.Errorf("%w:\n%w", ErrInvalid, err)
	}
	return nil
}

type resolver struct {
	known Targets
	set   bool
	errs  yamlfile.Errors
}

func (v *resolver) cond(c *Condition) {
	switch c.Kind {
	case CondMetric:
		if c.Prom != nil {
			return // the query's labels name its targets, not the fleet
		}
		v.target(&c.Target, metricKinds[c.Metric], fieldPos(c.at, "target", c.Pos), c.Path+"."+c.targetField, c.Metric.String())
	case CondExpr:
		env, err := newCELEnv(&exprScope{})
		if err != nil {
			return
		}
		ast, err := compileExpr(env, c.Expr)
		if err != nil {
			return
		}
		for _, t := range exprTargets(ast) {
			t := t
			v.target(&t, namedKindsAndCluster(), c.Pos, c.Path+".expr", "a metric in the expression")
		}
	case CondAll, CondAny:
		for i := range c.Children {
			v.cond(&c.Children[i])
		}
	}
}

func namedKindsAndCluster() []TargetKind {
	return append([]TargetKind{TargetCluster, TargetSelector}, namedKinds...)
}

// target checks one target against known and the kinds its field accepts.
func (v *resolver) target(t *Target, kinds []TargetKind, pos Pos, path, what string) {
	if t.Kind == TargetCluster || t.Kind == TargetSelector {
		return // always exist
	}
	if t.Kind != TargetUnresolved {
		if !slices.Contains(v.names(t.Kind), t.Name) && !slices.Contains(v.known.Open, t.Kind) {
			v.errs.Add(pos, path, "%s %q does not exist%s; %s", t.Kind, t.Name, didYouMean(t.Name, v.names(t.Kind)), v.knownList([]TargetKind{t.Kind}))
		}
		return
	}
	var fits, others []TargetKind
	for _, k := range namedKinds {
		if slices.Contains(v.names(k), t.Name) {
			if slices.Contains(kinds, k) {
				fits = append(fits, k)
			} else {
				others = append(others, k)
			}
		}
	}
	switch {
	case len(fits) == 1:
		if v.set {
			t.Kind = fits[0]
		}
	case len(fits) > 1:
		alts := make([]string, len(fits))
		for i, k := range fits {
			alts[i] = Target{Kind: k, Name: t.Name}.String()
		}
		v.errs.Add(pos, path, "%q is ambiguous: write %s", t.Name, strings.Join(alts, " or "))
	case len(others) > 0:
		v.errs.Add(pos, path, "%q is a %s, but %s needs a %s", t.Name, others[0], what, kindList(kinds))
	default:
		var candidates []string
		for _, k := range kinds {
			candidates = append(candidates, v.names(k)...)
		}
		v.errs.Add(pos, path, "target %q does not exist%s; write one of the known names (%s)", t.Name, didYouMean(t.Name, candidates), v.knownList(kinds))
	}
}

func (v *resolver) names(k TargetKind) []string { return v.known.names(k) }

func (v *resolver) knownList(kinds []TargetKind) string {
	var parts []string
	for _, k := range kinds {
		if k == TargetCluster || k == TargetSelector {
			continue
		}
		names := v.names(k)
		if len(names) == 0 {
			parts = append(parts, fmt.Sprintf("no %s", plural(k)))
			continue
		}
		shown := names
		if len(shown) > 8 {
			shown = append(slices.Clone(shown[:8]), "…")
		}
		parts = append(parts, fmt.Sprintf("%s: %s", plural(k), strings.Join(shown, ", ")))
	}
	return strings.Join(parts, "; ")
}

func plural(k TargetKind) string {
	if k == TargetClass {
		return "classes"
	}
	return k.String() + "s"
}

// guarantee checks which quota entry a reallocate's temporary guarantee
// raises: the entry, for the flavor its resources name (and the region,
// when they name one; else the all-regions entry), of each tenant they
// name. So a guarantee needs at least one tenant and exactly one flavor
// among the resources, and at most one region; a flavor or region named
// without a guarantee would do nothing, and is refused too.
func (v *resolver) guarantee(a *Action) {
	quiet := resolver{known: v.known, set: true}
	var tenants, flavors, regions int
	for i := range a.Resources {
		t := a.Resources[i]
		quiet.target(&t, actionKinds[ActionReallocate]["resources"], a.Pos, "", "")
		switch t.Kind {
		case TargetTenant:
			tenants++
		case TargetFlavor:
			flavors++
		case TargetRegion:
			regions++
		}
	}
	pos := fieldPos(a.at, "guarantee", a.Pos)
	switch {
	case a.Guarantee.Value > 0 && (tenants == 0 || flavors != 1 || regions > 1):
		v.errs.Add(pos, a.Path+".guarantee", "a guarantee raises a tenant's quota entry: list in resources the tenant(s), exactly one flavor and at most one region, such as [tenant:acme, flavor:H100-80G, region:eastus]")
	case a.Guarantee.Value <= 0 && flavors+regions > 0:
		v.errs.Add(fieldPos(a.at, "resources[0]", a.Pos), a.Path+".resources", "a flavor or region in resources names the quota entry of a guarantee: add guarantee: (GPUs), or remove it")
	}
}
