package sim

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/config"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/probe"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// Scenario is what a simulation replays: a fleet, tenants, reservations,
// workload generators and inference services, for a duration.
type Scenario struct {
	Name        string        `yaml:"name"`
	Description string        `yaml:"description"`
	Duration    time.Duration `yaml:"duration"`
	Start       time.Time     `yaml:"start"`
	Cycle       time.Duration `yaml:"cycle"` // scheduling cycle when something changed
	// HonourWindow is the reservations' promise: a claim on a reservation
	// with room is placed on it within this long (default 5m). Reserved
	// capacity is lent only to work that leaves within it once evicted.
	HonourWindow time.Duration `yaml:"reservation_honour_window"`
	// Planning configures the core's planned starts (backfill) for every
	// strategy; left out, sched.DefaultPlanning.
	Planning *config.PlanningSpec `yaml:"planning"`
	// planning is Planning resolved.
	planning     sched.Planning
	Catalog      *fleet.Catalog        `yaml:"catalog"`
	Fleet        fleet.Spec            `yaml:"fleet"`
	Tenants      []tenancy.TenantSpec  `yaml:"tenants"`
	Reservations []tenancy.Reservation `yaml:"reservations"`
	// Metering is the config's metering section (docs/cost.md): its
	// price overrides and tenants' price plans price cost.csv (its
	// retention means nothing here).
	Metering   *config.MeteringSpec `yaml:"metering"`
	Generators []Generator          `yaml:"generators"`
	Services   []Service            `yaml:"services"`
	// Probes are the server config's probes, modelled: each attempt is one
	// request to the service it targets (see probes.go).
	Probes []probe.Spec `yaml:"probes"`
	// probes is Probes checked, with their defaults.
	probes []probe.Probe
	// Classes group workload class labels into the classes results are
	// reported by (see ClassGroup); a label none lists is its own class.
	Classes []ClassGroup `yaml:"classes"`
	// Economics holds the prices the catalog does not: the internal
	// price of the provider's own training.
	Economics EconomicsSpec `yaml:"economics"`
	// Strategies are the names run when none are asked for.
	Strategies []string `yaml:"strategies"`
	// Trace, when set, replays a real cluster trace: its machines join the
	// fleet and its pods arrive and leave at their recorded times.
	Trace *TraceInput `yaml:"trace"`
}

// Generator makes a stream of workloads (or one, with Count).
type Generator struct {
	Pos   yamlfile.Pos
	Name  string `yaml:"name"`
	Class string `yaml:"class"` // label policies target; default: the name
	// Labels are further labels of its workloads (selectors and
	// services match them); "class" is always Class.
	Labels      map[string]string `yaml:"labels"`
	Kind        workload.Kind     `yaml:"kind"`
	Tenant      string            `yaml:"tenant"`
	Priority    workload.Priority `yaml:"priority"`
	Preemptible bool              `yaml:"preemptible"`
	Flavors     []fleet.ModelID   `yaml:"flavors"`
	Regions     []string          `yaml:"regions"`
	Topology    workload.Topology `yaml:"topology"`
	// Arrivals: RatePerHour Poisson arrivals, modulated by a daily cycle of
	// the given amplitude (0..1) peaking at PeakHour UTC; or Count
	// workloads at At (then RatePerHour is ignored).
	RatePerHour float64       `yaml:"rate_per_hour"`
	DailyAmp    float64       `yaml:"daily_amplitude"`
	PeakHour    float64       `yaml:"peak_hour"`
	Count       int           `yaml:"count"`
	At          time.Duration `yaml:"at"`
	Until       time.Duration `yaml:"until"` // stop generating after (0: never)
	// Sizes: one shape is drawn per workload, by weight.
	Sizes []Size `yaml:"sizes"`
	// Runtime is drawn log-uniformly in [RuntimeMin, RuntimeMax].
	RuntimeMin         time.Duration `yaml:"runtime_min"`
	RuntimeMax         time.Duration `yaml:"runtime_max"`
	CheckpointInterval time.Duration `yaml:"checkpoint_interval"`
	GracePeriod        time.Duration `yaml:"grace_period"`
	// Patience: a request still pending after it is a capacity failure
	// ("capacity not available"). 0: waits forever.
	Patience    time.Duration `yaml:"patience"`
	Reservation string        `yaml:"reservation"`
	MaxPrice    float64       `yaml:"max_price"`
	// Customer marks workloads whose capacity failures and revenue count
	// as customers'.
	Customer bool `yaml:"customer"`
}

// Size is one workload shape with a relative weight.
type Size struct {
	GPUs     resource.MilliGPU `yaml:"gpus"`
	Replicas int               `yaml:"replicas"`
	Weight   float64           `yaml:"weight"`
	// MaxReplicas, when set, makes the workloads elastic (opt-in): they
	// start with Replicas, the core grows them into idle capacity up to
	// MaxReplicas, Step at a time (0: 1), and shrinks them before it
	// preempts anything. An elastic job's work is measured at Replicas:
	// at n replicas it progresses n/Replicas as fast (linear scaling).
	MaxReplicas int `yaml:"max_replicas"`
	Step        int `yaml:"step"`
	// MIG, when set, is the MIG profile of each replica's one instance
	// (workload.Spec.MIG); gpus is then left out (it becomes the
	// profile's share of a GPU).
	MIG string `yaml:"mig"`
}

// Service is an inference service (the coding-assistant case): replicas in
// several regions behind a router, scaled to keep the time to first token
// (TTFT) p99 under the SLO.
type Service struct {
	Pos      yamlfile.Pos
	Name     string            `yaml:"name"`
	Class    string            `yaml:"class"`
	Tenant   string            `yaml:"tenant"`
	Priority workload.Priority `yaml:"priority"`
	Flavor   fleet.ModelID     `yaml:"flavor"`
	// Regions serving the service; users come from UserRegions with their
	// local peak hour.
	Regions []string     `yaml:"regions"`
	Users   []UserRegion `yaml:"users"`
	// SLO bounds the time to first token at p99, as users see it: network
	// round trip, queueing, overhead and prefill.
	SLO time.Duration `yaml:"slo_ttft_p99"`
	// OldSLO is the end-to-end p99 SLO of earlier scenarios, refused with
	// a pointer to slo_ttft_p99.
	OldSLO time.Duration `yaml:"slo_p99"`
	// ContextCacheHit is the share of each prompt's tokens found in the
	// replica's prefix cache (the user's context from their previous
	// request), in [0, 1): only the rest is prefilled.
	ContextCacheHit float64 `yaml:"context_cache_hit"`
	MinReplicas     int     `yaml:"min_replicas"`
	MaxReplicas     int     `yaml:"max_replicas"`
	// Elastic (opt-in) makes each serving region one elastic inference
	// workload (workload.Elastic) instead of one 1-replica workload per
	// replica: min max(1, min_replicas), max what the region's autoscaler
	// wants each step (within [min, max_replicas]). The core grows it
	// toward that as idle capacity allows and, on reclaim, shrinks it
	// down to min before it preempts other work. Needs max_replicas.
	Elastic bool `yaml:"elastic"`
	// Scale multiplies the built-in coding-assistant load (350 requests/s
	// on average per user region on weekdays).
	Scale float64 `yaml:"scale"`
	// Routing is how the router spreads users over Regions: performance
	// (nearest healthy region, the default), priority (Regions in order,
	// failing over when unhealthy) or weighted (by Weights, same order as
	// Regions; equal when omitted).
	Routing string    `yaml:"routing"`
	Weights []float64 `yaml:"weights"`
}

// UserRegion is where a service's users are.
type UserRegion struct {
	Region   string  `yaml:"region"`
	PeakHour float64 `yaml:"peak_hour"`
	Share    float64 `yaml:"share"`
}

//go:embed contention.yaml
var contentionYAML []byte

// ContentionYAML returns the embedded default scenario as written.
func ContentionYAML() []byte { return contentionYAML }

// LoadScenario reads a scenario file; "" is the embedded contention scenario.
func LoadScenario(path string) (*Scenario, error) {
	name, data := "contention.yaml (embedded)", contentionYAML
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		name = path
	}
	return ParseScenario(name, data)
}

// ParseScenario decodes and checks a scenario, reporting every problem.
func ParseScenario(file string, data []byte) (*Scenario, error) {
	s, decodeErr, errs := decodeScenario(file, data)
	if s == nil {
		return nil, decodeErr
	}
	if err := yamlfile.Merge(decodeErr, errs).Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// CheckScenario is ParseScenario for `arbiter validate`: it also checks
// the world every strategy starts from (the catalog, fleet, tenants and
// reservations, as a config), which a run checks when it starts. A
// scenario that replays a trace is checked without it, as the trace's
// machines join the fleet.
func CheckScenario(file string, data []byte) error {
	s, decodeErr, errs := decodeScenario(file, data)
	if s == nil {
		return decodeErr
	}
	errs = yamlfile.Merge(decodeErr, errs)
	if s.Trace == nil {
		f := config.File{Now: s.Start, Catalog: s.Catalog, Fleet: s.Fleet, Tenants: s.Tenants, Reservations: s.Reservations, Metering: s.Metering}
		if _, err := config.ResolveDecoded(file, f, decodeErr); err != nil {
			var world yamlfile.Errors
			if !errors.As(err, &world) {
				world = yamlfile.Errors{{Pos: yamlfile.Pos{File: file, Line: 1, Col: 1}, Msg: strings.TrimPrefix(err.Error(), file+": ")}}
			}
			// Those the decode already reported are in both lists.
			errs = yamlfile.Merge(errs, world)
		}
	}
	return errs.Err()
}

// decodeScenario decodes and checks a scenario; s is nil when nothing
// decoded (decodeErr says why). decodeErr and errs are the problems of
// the decoding and of the checks.
func decodeScenario(file string, data []byte) (_ *Scenario, decodeErr error, _ yamlfile.Errors) {
	var s Scenario
	decodeErr = yamlfile.Decode(file, data, &s)
	if yamlfile.Stopped(decodeErr) {
		return nil, decodeErr, nil
	}
	var errs yamlfile.Errors
	at := yamlfile.Pos{File: file, Line: 1, Col: 1}
	if s.Trace != nil && (s.Trace.Tenant == "" || s.Trace.Region == "" || s.Trace.Dir == "" || s.Trace.Workload == "") {
		errs.Add(at, "trace", "a trace needs format, dir, workload, tenant and region")
	}
	if s.Duration <= 0 {
		errs.Add(at, "duration", "a scenario needs a duration, such as 30d")
	}
	if s.Cycle <= 0 {
		s.Cycle = time.Minute
	}
	switch {
	case s.HonourWindow < 0:
		errs.Add(at, "reservation_honour_window", "a window is a positive duration, such as 5m")
	case s.HonourWindow == 0:
		s.HonourWindow = sched.DefaultHonourWindow
	}
	s.planning = s.Planning.Resolve("planning", at, &errs)
	if s.Start.IsZero() {
		s.Start = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // a Monday
	}
	for i, g := range s.Generators {
		f := fmt.Sprintf("generators[%d]", i)
		if g.Name == "" {
			errs.Add(g.Pos, f+".name", "a generator needs a name")
		}
		if len(g.Sizes) == 0 {
			errs.Add(g.Pos, f+".sizes", "list at least one size: {gpus: 8, replicas: 1, weight: 1}")
		}
		for j, sz := range g.Sizes {
			if sz.MIG != "" {
				// Checked as a workload's spec is, against the
				// generator's flavors; gpus is the profile's share.
				sp := workload.Spec{Name: "size", Tenant: "size", MIG: sz.MIG, GPUs: sz.GPUs, Replicas: max(sz.Replicas, 1), Flavors: g.Flavors, Regions: g.Regions}
				sp.Defaults(true)
				for _, fe := range sp.Validate() {
					field := fmt.Sprintf("%s.sizes[%d].%s", f, j, fe.Field)
					if strings.HasPrefix(fe.Field, "flavors") {
						field = f + "." + fe.Field
					}
					errs.Add(g.Pos, field, "%s", fe.Msg)
				}
				s.Generators[i].Sizes[j].GPUs, sz.GPUs = sp.GPUs, sp.GPUs
			}
			if sz.GPUs <= 0 || sz.Replicas < 1 || sz.Weight < 0 {
				errs.Add(g.Pos, fmt.Sprintf("%s.sizes[%d]", f, j), "a size needs gpus > 0 (or a mig profile), replicas ≥ 1 and weight ≥ 0")
			}
			if sz.MaxReplicas != 0 || sz.Step != 0 {
				spec := workload.Spec{Replicas: sz.Replicas, Elastic: &workload.Elastic{Min: sz.Replicas, Max: sz.MaxReplicas, Step: sz.Step}}
				for _, fe := range spec.Validate() {
					if field, ok := map[string]string{"replicas.max": "max_replicas", "replicas.step": "step"}[fe.Field]; ok {
						errs.Add(g.Pos, fmt.Sprintf("%s.sizes[%d].%s", f, j, field), "%s", fe.Msg)
					}
				}
			}
		}
		if g.Count == 0 && g.RatePerHour <= 0 {
			errs.Add(g.Pos, f+".rate_per_hour", "give rate_per_hour > 0 or a count")
		}
		if g.RuntimeMin <= 0 || g.RuntimeMax < g.RuntimeMin {
			errs.Add(g.Pos, f+".runtime_min", "need 0 < runtime_min ≤ runtime_max")
		}
		if g.DailyAmp < 0 || g.DailyAmp > 1 {
			errs.Add(g.Pos, f+".daily_amplitude", "daily_amplitude is between 0 and 1")
		}
		if len(g.Flavors) == 0 || len(g.Regions) == 0 {
			errs.Add(g.Pos, f+".flavors", "list flavors and regions")
		}
	}
	for i, sv := range s.Services {
		f := fmt.Sprintf("services[%d]", i)
		if sv.Name == "" || sv.Tenant == "" || sv.Flavor == "" || len(sv.Regions) == 0 || len(sv.Users) == 0 {
			errs.Add(sv.Pos, f, "a service needs name, tenant, flavor, regions and users")
		}
		switch {
		case sv.OldSLO != 0:
			errs.Add(sv.Pos, f+".slo_p99", "slo_p99 (end-to-end) is no longer read: the SLO bounds the time to first token, write slo_ttft_p99: 200ms")
		case sv.SLO <= 0:
			errs.Add(sv.Pos, f+".slo_ttft_p99", "a service needs a time-to-first-token p99 SLO, such as slo_ttft_p99: 200ms")
		}
		if !(sv.ContextCacheHit >= 0 && sv.ContextCacheHit < 1) {
			errs.Add(sv.Pos, f+".context_cache_hit", "context_cache_hit is a share in [0, 1), such as 0.95")
		}
		if sv.Scale <= 0 {
			errs.Add(sv.Pos, f+".scale", "scale must be > 0")
		}
		switch sv.Routing {
		case "", "performance", "priority", "weighted":
		default:
			errs.Add(sv.Pos, f+".routing", "unknown routing %q: write performance, priority or weighted", sv.Routing)
		}
		if len(sv.Weights) > 0 && len(sv.Weights) != len(sv.Regions) {
			errs.Add(sv.Pos, f+".weights", "%d weights for %d regions", len(sv.Weights), len(sv.Regions))
		}
		for _, w := range sv.Weights {
			if w <= 0 {
				errs.Add(sv.Pos, f+".weights", "weights must be > 0")
				break
			}
		}
		if sv.Elastic {
			switch lo := max(1, sv.MinReplicas); {
			case sv.MinReplicas < 0:
				errs.Add(sv.Pos, f+".min_replicas", "min_replicas must be ≥ 0, got %d", sv.MinReplicas)
			case sv.MaxReplicas < lo || sv.MaxReplicas > workload.MaxReplicasBound:
				errs.Add(sv.Pos, f+".max_replicas", "an elastic service grows up to max_replicas: give one between %d (min_replicas, at least 1) and %d, got %d",
					lo, workload.MaxReplicasBound, sv.MaxReplicas)
			}
		}
	}
	s.checkProbes(file, &errs)
	s.checkClasses(&errs, at)
	if v := s.Economics.InternalGPUHourUSD; !(v >= 0) || math.IsInf(v, 1) {
		errs.Add(at, "economics.internal_gpu_hour_usd", "the internal price is USD per GPU-hour ≥ 0, such as 1.56")
	}
	return &s, decodeErr, errs
}

// Scale returns a copy of the scenario with f times the machines in every
// node group (at least one) and f times the arrival rates, one-off counts,
// inference load and services' replica bounds: the same contention at
// another size.
func (s *Scenario) Scale(f float64) *Scenario {
	c := *s
	c.Fleet.Regions = make([]fleet.RegionSpec, len(s.Fleet.Regions))
	for ri, r := range s.Fleet.Regions {
		r.Zones = append([]fleet.ZoneSpec(nil), r.Zones...)
		for zi, z := range r.Zones {
			z.Blocks = append([]fleet.BlockSpec(nil), z.Blocks...)
			for bi, b := range z.Blocks {
				b.Nodes = append([]fleet.GroupSpec(nil), b.Nodes...)
				for gi := range b.Nodes {
					b.Nodes[gi].Count = max(1, int(math.Round(float64(b.Nodes[gi].Count)*f)))
				}
				z.Blocks[bi] = b
			}
			r.Zones[zi] = z
		}
		c.Fleet.Regions[ri] = r
	}
	c.Generators = append([]Generator(nil), s.Generators...)
	for i := range c.Generators {
		c.Generators[i].RatePerHour *= f
		if c.Generators[i].Count > 0 {
			c.Generators[i].Count = max(1, int(math.Round(float64(c.Generators[i].Count)*f)))
		}
	}
	c.Services = append([]Service(nil), s.Services...)
	for i := range c.Services {
		c.Services[i].Scale *= f
		c.Services[i].MinReplicas = max(1, int(math.Round(float64(c.Services[i].MinReplicas)*f)))
		if m := c.Services[i].MaxReplicas; m > 0 {
			// The bound scales with the load, never below the scaled min.
			c.Services[i].MaxReplicas = max(c.Services[i].MinReplicas, int(math.Round(float64(m)*f)))
		}
	}
	c.Reservations = append([]tenancy.Reservation(nil), s.Reservations...)
	for i := range c.Reservations {
		c.Reservations[i].Count = max(1, int(math.Round(float64(c.Reservations[i].Count)*f)))
	}
	return &c
}
