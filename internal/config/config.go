// Package config loads Arbiter's YAML config — catalog overrides, fleet,
// tenants, partitions, reservations and workloads — validates it as a
// whole, and turns it into the scheduler's Input.
//
//	c, err := config.Load("examples/schedule.yaml") // all problems, file:line:col
//	plan := sched.Schedule(c.Input())
//
// Every problem is reported with its position and field path; nothing is
// scheduled from a config that has one.
package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/probe"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// File is the config as written.
type File struct {
	Now          time.Time             `yaml:"now"`
	Seed         uint64                `yaml:"seed"`
	Options      Options               `yaml:"options"`
	Catalog      *fleet.Catalog        `yaml:"catalog"`
	Fleet        fleet.Spec            `yaml:"fleet"`
	Tenants      []tenancy.TenantSpec  `yaml:"tenants"`
	Partitions   []tenancy.Partition   `yaml:"partitions"`
	Reservations []tenancy.Reservation `yaml:"reservations"`
	Workloads    []Workload            `yaml:"workloads"`
	Down         []fleet.NodeID        `yaml:"down"`
	// Limits bound what tenants may hold and send (arbiter serve; see
	// limits.go).
	Limits Limits `yaml:"limits"`
	// Probes are the endpoints the server probes (arbiter serve; see
	// internal/probe).
	Probes []probe.Spec `yaml:"probes"`
	// Metering is the usage records' retention, price overrides and the
	// tenants' price plans (docs/cost.md).
	Metering *MeteringSpec `yaml:"metering"`
}

// Options are the scheduler options as written.
type Options struct {
	Pos                   yamlfile.Pos
	Scorer                string `yaml:"scorer"`
	DisablePreemption     bool   `yaml:"disable_preemption"`
	OverflowBeforePreempt bool   `yaml:"overflow_before_preempt"`
	// HonourWindow is how soon a reservation's owner gets its idle
	// capacity back; it is lent only to work that leaves within it
	// (default sched.DefaultHonourWindow).
	HonourWindow time.Duration `yaml:"reservation_honour_window"`
	// Planning configures planned starts (backfill); left out, the
	// defaults (sched.DefaultPlanning).
	Planning *PlanningSpec `yaml:"planning"`
	// FairShare turns on fair share over time (decayed usage); left out,
	// tenants are ordered by current usage.
	FairShare *FairShareSpec `yaml:"fair_share"`
	// ShapesPerTenant is the most shapes (classes of alike work) of one
	// tenant's pending work a cycle decides (sched.Options.TenantBound):
	// left out, sched.DefaultTenantBound; 0, no bound.
	ShapesPerTenant ShapeBound `yaml:"shapes_per_tenant"`
}

// ShapeBound is options.shapes_per_tenant as written.
type ShapeBound struct {
	N   int
	Set bool
}

// maxShapesPerTenant bounds options.shapes_per_tenant (a bound this high
// is no bound: 0 says so).
const maxShapesPerTenant = 10_000_000

// UnmarshalYAMLScalar reads a whole number of shapes, 0 for no bound.
func (b *ShapeBound) UnmarshalYAMLScalar(v string) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > maxShapesPerTenant {
		return fmt.Errorf("want a whole number of shapes from 1 to %d, or 0 for no bound, got %q", maxShapesPerTenant, v)
	}
	b.N, b.Set = n, true
	return nil
}

// TenantBound is the sched.Options.TenantBound the bound describes:
// sched.DefaultTenantBound when left out, -1 (none) for 0.
func (b ShapeBound) TenantBound() int {
	switch {
	case !b.Set:
		return sched.DefaultTenantBound
	case b.N == 0:
		return -1
	}
	return b.N
}

// Workload is a workload as written, with its position. Read its spec
// with WorkloadSpec, which fills the defaults the API fills.
type Workload struct {
	Pos yamlfile.Pos
	// Priority is the priority class as written, nil when left out (it
	// shadows Spec.Priority, whose zero value, spot, cannot tell).
	Priority      *workload.Priority `yaml:"priority"`
	workload.Spec `yaml:",inline"`
	SubmittedAt   time.Time            `yaml:"submitted_at"`
	Running       *workload.Assignment `yaml:"running"`
}

// WorkloadSpec returns the spec as written with the defaults filled in
// (workload.Spec.Defaults: priority normal, replicas 1, as through the API).
func (w *Workload) WorkloadSpec() workload.Spec {
	s := w.Spec
	if w.Priority != nil {
		s.Priority = *w.Priority
	}
	if s.Elastic != nil && s.Replicas == 0 && w.Running != nil {
		// A running elastic workload's size is what runs.
		s.Replicas = len(w.Running.Replicas)
	}
	s.Defaults(w.Priority != nil)
	return s
}

// Config is a loaded, validated config.
type Config struct {
	File      File
	Fleet     *fleet.Fleet
	Tree      *tenancy.Tree
	Workloads []*workload.Workload
	// Planning is the resolved options.planning.
	Planning sched.Planning
	// FairShare is the resolved options.fair_share.
	FairShare sched.FairShare
	// TenantBound is the resolved options.shapes_per_tenant.
	TenantBound int
	// Metering is the resolved metering section.
	Metering Metering
}

// Load reads and validates one config file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes and validates config data named file in messages. Every
// problem of the file is reported, those of values that did not decode
// and those of the rest, in one error.
func Parse(file string, data []byte) (*Config, error) {
	var f File
	err := yamlfile.Decode(file, data, &f)
	if yamlfile.Stopped(err) {
		return nil, err
	}
	return ResolveDecoded(file, f, err)
}

// Resolve validates a decoded config and builds the fleet, tree and
// workloads. Reservations without nodes are bound here, all or nothing.
func Resolve(file string, f File) (*Config, error) { return ResolveDecoded(file, f, nil) }

// ResolveDecoded is Resolve after decodeErr, the problems of decoding f
// (nil, or a yamlfile.Errors of field problems that yamlfile.Stopped
// accepts): it goes on checking what did decode and reports both, less
// what only repeats a decode problem (yamlfile.Merge). Node references,
// the fleet check of workloads and the binding of reservations are
// checked only against a whole fleet: with a node group left out they
// would fail for no fault of their own.
func ResolveDecoded(file string, f File, decodeErr error) (*Config, error) {
	var errs yamlfile.Errors
	at := yamlfile.Pos{File: file, Line: 1, Col: 1}
	add := func(err error) {
		var es yamlfile.Errors
		if errors.As(err, &es) {
			errs = append(errs, es...)
		} else if err != nil {
			errs.Add(at, "", "%v", err)
		}
	}
	whole := !decodedUnder(decodeErr, "catalog", "fleet")
	cat := fleet.Builtin()
	if f.Catalog != nil {
		if err := cat.Merge(f.Catalog); err != nil {
			add(err)
			whole = false
		}
	}
	checkNames(&f, &errs)
	_, probeErrs := probe.Check(file, "probes", f.Probes)
	errs = append(errs, probeErrs...)
	fl, err := fleet.BuildPartial(f.Fleet, cat)
	if err != nil {
		add(err)
		whole = false
	}
	checkNodeIDs(&f, fl, &errs)
	tree, err := tenancy.NewTreePartial(f.Tenants)
	add(err)
	if f.Now.IsZero() {
		f.Now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if !validScorer(f.Options.Scorer) {
		pos := at
		if f.Options.Pos.Line > 0 {
			pos = f.Options.Pos // the options mapping
		}
		errs.Add(pos, "options.scorer", "unknown scorer %q (known: %v)", f.Options.Scorer, sched.ScorerNames())
	}
	optAt := at
	if f.Options.Pos.Line > 0 {
		optAt = f.Options.Pos
	}
	planning := f.Options.Planning.Resolve("options.planning", optAt, &errs)
	fairShare := f.Options.FairShare.Resolve("options.fair_share", optAt, &errs)
	metering := f.Metering.Resolve("metering", at, cat, fl.Regions, &errs)
	for ti, t := range f.Tenants {
		for qi, q := range t.Quota {
			if _, ok := cat.Model(q.Flavor); !ok {
				errs.Add(q.Pos, fmt.Sprintf("tenants[%d].quota[%d].flavor", ti, qi), "unknown GPU model %q (known: %v)", q.Flavor, cat.ModelNames())
			}
			if q.Region != "" && !fl.HasRegion(q.Region) {
				errs.Add(q.Pos, fmt.Sprintf("tenants[%d].quota[%d].region", ti, qi), "region %q is not in the fleet (regions: %v)", q.Region, fl.Regions)
			}
		}
	}
	// Partitions: known tenant, known blocks and nodes, no node twice.
	inPartition := map[fleet.NodeID]string{}
	for pi, p := range f.Partitions {
		pf := fmt.Sprintf("partitions[%d]", pi)
		if _, ok := tree.Lookup(p.Tenant); !ok {
			errs.Add(p.Pos, pf+".tenant", "unknown tenant %q", p.Tenant)
		}
		var ids []fleet.NodeID
		for _, b := range p.Blocks {
			nodes := fl.BlockNodes(b)
			if len(nodes) == 0 && whole {
				errs.Add(p.Pos, pf+".blocks", "unknown block %q", b)
			}
			for _, n := range nodes {
				ids = append(ids, n.ID)
			}
		}
		for _, id := range p.Nodes {
			if _, ok := fl.Node(id); !ok && whole {
				errs.Add(p.Pos, pf+".nodes", "unknown node %q", id)
			}
			ids = append(ids, id)
		}
		for _, id := range ids {
			if other, dup := inPartition[id]; dup {
				errs.Add(p.Pos, pf, "node %s is already in partition %s", id, other)
				break
			}
			inPartition[id] = p.Name
		}
	}
	// Workloads.
	names := map[workload.ID]bool{}
	shape := workload.ShapeOf(fl)
	var ws []*workload.Workload
	for wi := range f.Workloads {
		w := f.Workloads[wi]
		w.Spec = w.WorkloadSpec()
		wf := fmt.Sprintf("workloads[%d]", wi)
		for _, fe := range w.Spec.Validate() {
			errs.Add(w.Pos, wf+"."+fe.Field, "%s", fe.Msg)
		}
		if names[w.Name] {
			errs.Add(w.Pos, wf+".name", "workload %q defined twice", w.Name)
		}
		names[w.Name] = true
		if w.Tenant != "" {
			if ti, ok := tree.Lookup(w.Tenant); !ok {
				errs.Add(w.Pos, wf+".tenant", "unknown tenant %q", w.Tenant)
			} else if err := tree.MayUse(ti, w.Spec.Priority); err != nil {
				errs.Add(w.Pos, wf+".priority", "%v (see the tenant's allowed_priorities)", err)
			}
		}
		if whole {
			for _, p := range workload.CheckFleet(&w.Spec, cat, shape) {
				errs.Add(w.Pos, wf+"."+p.Field, "%s", p.Msg)
			}
		}
		if w.Reservation != "" && !hasReservation(f.Reservations, w.Reservation) {
			errs.Add(w.Pos, wf+".reservation", "unknown reservation %q", w.Reservation)
		}
		wl := &workload.Workload{Spec: w.Spec, SubmittedAt: w.SubmittedAt, Running: w.Running}
		if wl.SubmittedAt.IsZero() {
			wl.SubmittedAt = f.Now
		}
		if r := wl.Running; r != nil {
			if r.StartedAt.IsZero() {
				r.StartedAt = f.Now
			}
			if len(r.Replicas) != w.Replicas {
				errs.Add(w.Pos, wf+".running.replicas", "%d replicas running, spec says %d", len(r.Replicas), w.Replicas)
			}
			for ri, rep := range r.Replicas {
				want := w.GPUs.WholeGPUs()
				if w.GPUs < resource.PerGPU {
					want = 1
				}
				if len(rep.GPUs) != want {
					errs.Add(w.Pos, fmt.Sprintf("%s.running.replicas[%d].gpus", wf, ri), "%d GPU indices, the spec needs %d", len(rep.GPUs), want)
				}
				if n, ok := fl.Node(rep.Node); ok && whole && (n.Model != r.Flavor || n.Region != r.Region) {
					errs.Add(w.Pos, fmt.Sprintf("%s.running.replicas[%d].node", wf, ri), "node %s is %s in %s, not %s in %s", n.ID, n.Model, n.Region, r.Flavor, r.Region)
				}
			}
		}
		ws = append(ws, wl)
	}
	if err := f.Limits.Validate(); err != nil {
		errs.Add(at, "limits", "%v", err)
	}
	c := &Config{File: f, Fleet: fl, Tree: tree, Workloads: ws, Planning: planning, FairShare: fairShare, TenantBound: f.Options.ShapesPerTenant.TenantBound(), Metering: metering}
	c.bindReservations(&errs, whole)
	if err := yamlfile.Merge(decodeErr, errs).Err(); err != nil {
		return nil, err
	}
	in := c.Input()
	if err := sched.Check(&in); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}

// decodedUnder reports whether decodeErr has a problem in one of the
// given top-level sections.
func decodedUnder(decodeErr error, sections ...string) bool {
	var es yamlfile.Errors
	if !errors.As(decodeErr, &es) {
		return false
	}
	for _, e := range es {
		for _, s := range sections {
			if rest, ok := strings.CutPrefix(e.Field, s); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
				return true
			}
		}
	}
	return false
}

func hasReservation(rs []tenancy.Reservation, name string) bool {
	for _, r := range rs {
		if r.Name == name {
			return true
		}
	}
	return false
}

func validScorer(name string) bool {
	for _, n := range sched.ScorerNames() {
		if n == name {
			return true
		}
	}
	return name == ""
}

// bindReservations validates reservations and binds those without nodes
// whose window opens within tenancy.BindLead of now (all when now is
// unset); the others keep only their place in the capacity calendar
// (tenancy.CheckCalendar), as on a server. A machine is taken for a
// reservation when another one overlapping it in time holds it. Without
// a whole fleet it checks the reservations' own fields only.
func (c *Config) bindReservations(errs *yamlfile.Errors, whole bool) {
	f := &c.File
	taken := map[fleet.NodeID][]int{} // the reservations holding each node
	partitioned := map[fleet.NodeID]bool{}
	for _, p := range f.Partitions {
		for _, b := range p.Blocks {
			for _, n := range c.Fleet.BlockNodes(b) {
				partitioned[n.ID] = true
			}
		}
		for _, id := range p.Nodes {
			partitioned[id] = true
		}
	}
	busy := map[fleet.NodeID]bool{}
	blocking := map[fleet.NodeID]bool{}
	for _, w := range c.Workloads {
		if w.Running == nil {
			continue
		}
		for _, r := range w.Running.Replicas {
			busy[r.Node] = true
			if !w.Preemptible {
				blocking[r.Node] = true
			}
		}
	}
	names := map[string]bool{}
	for ri := range f.Reservations {
		r := &f.Reservations[ri]
		rf := fmt.Sprintf("reservations[%d]", ri)
		if names[r.Name] || r.Name == "" {
			errs.Add(r.Pos, rf+".name", "reservation needs a unique name, got %q", r.Name)
		}
		names[r.Name] = true
		if _, ok := c.Tree.Lookup(r.Owner); !ok {
			errs.Add(r.Pos, rf+".owner", "unknown tenant %q", r.Owner)
		}
		if !c.Fleet.HasRegion(r.Region) {
			errs.Add(r.Pos, rf+".region", "region %q is not in the fleet", r.Region)
		}
		if _, ok := c.Fleet.Catalog.SKU(r.SKU); !ok {
			errs.Add(r.Pos, rf+".sku", "unknown SKU %q", r.SKU)
			continue
		}
		if r.Count < 1 {
			errs.Add(r.Pos, rf+".count", "count must be at least 1")
			continue
		}
		if !r.End.IsZero() && !r.End.After(r.Start) {
			errs.Add(r.Pos, rf+".end", "end must be after start")
		}
		if !whole {
			continue
		}
		if len(r.Nodes) > 0 {
			if len(r.Nodes) != r.Count {
				errs.Add(r.Pos, rf+".nodes", "%d nodes listed for count %d", len(r.Nodes), r.Count)
			}
			for _, id := range r.Nodes {
				n, ok := c.Fleet.Node(id)
				if !ok || !r.Matches(n) {
					errs.Add(r.Pos, rf+".nodes", "node %q is not a %s in %s", id, r.SKU, r.Region)
				}
				taken[id] = append(taken[id], ri)
			}
			continue
		}
		due := f.Now.IsZero() || r.BindDue(f.Now)
		var ids []fleet.NodeID
		if due {
			var err error
			ids, err = tenancy.Bind(r, c.Fleet, func(n *fleet.Node) tenancy.NodeUse {
				res := slices.ContainsFunc(taken[n.ID], func(o int) bool { return f.Reservations[o].Overlaps(r) })
				return tenancy.NodeUse{Reserved: res, Partitioned: partitioned[n.ID], Busy: busy[n.ID], Blocking: blocking[n.ID]}
			})
			if err != nil {
				errs.Add(r.Pos, rf, "%v", err)
				continue
			}
		}
		usable := func(n *fleet.Node) bool { return !partitioned[n.ID] }
		// Only reservations: no cycle has run when the file is loaded, so
		// there are no planned holds to count (a server passes them to
		// tenancy.CheckCalendarWith, see internal/server/resvplans.go).
		if err := tenancy.CheckCalendar(r, f.Reservations[:ri], c.Fleet, usable, f.Now); err != nil {
			errs.Add(r.Pos, rf, "%v", err)
			continue
		}
		r.Nodes = ids
		for _, id := range ids {
			taken[id] = append(taken[id], ri)
		}
	}
}

// Input returns the scheduler input the config describes.
func (c *Config) Input() sched.Input {
	return sched.Input{
		Now:          c.File.Now,
		Seed:         c.File.Seed,
		Fleet:        c.Fleet,
		Tenants:      c.Tree,
		Partitions:   c.File.Partitions,
		Reservations: c.File.Reservations,
		Workloads:    c.Workloads,
		Down:         c.File.Down,
		Options: sched.Options{
			Scorer:                c.File.Options.Scorer,
			DisablePreemption:     c.File.Options.DisablePreemption,
			OverflowBeforePreempt: c.File.Options.OverflowBeforePreempt,
			HonourWindow:          honourWindow(c.File.Options.HonourWindow),
			Planning:              c.Planning,
			FairShare:             c.FairShare,
			TenantBound:           c.TenantBound,
		},
	}
}

// honourWindow is the configured honour window, or the default.
func honourWindow(d time.Duration) time.Duration {
	if d <= 0 {
		return sched.DefaultHonourWindow
	}
	return d
}
