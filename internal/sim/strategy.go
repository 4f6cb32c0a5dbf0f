package sim

import (
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// Strategy is a way of dividing the fleet, as a file users copy and edit:
// tenant quotas (replacing the scenario's, tenant by tenant), partitions,
// scheduler options, and per-class priority overrides.
type Strategy struct {
	Name        string               `yaml:"name"`
	Description string               `yaml:"description"`
	Tenants     []tenancy.TenantSpec `yaml:"tenants"`
	Partitions  []tenancy.Partition  `yaml:"partitions"`
	Options     StrategyOptions      `yaml:"options"`
	Classes     []ClassOverride      `yaml:"classes"`
	// Policies names a policy file, relative to the strategy file.
	Policies string `yaml:"policies"`

	// readFile reads a file named relative to the strategy file.
	readFile func(name string) ([]byte, error)
	// fairShare is Options.FairShare resolved.
	fairShare sched.FairShare
	// tenantBound is Options.ShapesPerTenant resolved.
	tenantBound int
}

// StrategyOptions are the scheduler options a strategy sets.
type StrategyOptions = config.Options

// ClassOverride changes the priority or preemptibility of one workload
// class (a generator's or service's class label).
type ClassOverride struct {
	Pos         yamlfile.Pos
	Class       string             `yaml:"class"`
	Priority    *workload.Priority `yaml:"priority"`
	Preemptible *bool              `yaml:"preemptible"`
	// Regions and Flavors replace the class's acceptable regions and GPU
	// models (for internal work the operator may move freely).
	Regions []string        `yaml:"regions"`
	Flavors []fleet.ModelID `yaml:"flavors"`
}

// ParseStrategy decodes a strategy file, reporting every problem.
func ParseStrategy(file string, data []byte) (*Strategy, error) {
	var st Strategy
	decodeErr := yamlfile.Decode(file, data, &st)
	if yamlfile.Stopped(decodeErr) {
		return nil, decodeErr
	}
	var errs yamlfile.Errors
	if st.Name == "" {
		errs.Add(yamlfile.Pos{File: file, Line: 1, Col: 1}, "name", "a strategy needs a name")
	}
	if st.Options.HonourWindow != 0 {
		errs.Add(st.Options.Pos, "options.reservation_honour_window",
			"the honour window is the scenario's promise to reservation owners, not a strategy's choice: set it in the scenario")
	}
	st.fairShare = st.Options.FairShare.Resolve("options.fair_share", st.Options.Pos, &errs)
	st.tenantBound = st.Options.ShapesPerTenant.TenantBound()
	if err := yamlfile.Merge(decodeErr, errs).Err(); err != nil {
		return nil, err
	}
	return &st, nil
}

// LoadStrategy reads name.yaml from fsys.
func LoadStrategy(fsys fs.FS, name string) (*Strategy, error) {
	data, err := fs.ReadFile(fsys, name+".yaml")
	if err != nil {
		return nil, fmt.Errorf("sim: strategy %q: %w", name, err)
	}
	st, err := ParseStrategy(name+".yaml", data)
	if err != nil {
		return nil, err
	}
	dir := path.Dir(name)
	st.readFile = func(n string) ([]byte, error) { return fs.ReadFile(fsys, path.Join(dir, n)) }
	return st, nil
}

// LoadStrategyFile reads a strategy file from disk.
func LoadStrategyFile(file string) (*Strategy, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	st, err := ParseStrategy(file, data)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(file)
	st.readFile = func(n string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, n)) }
	return st, nil
}

// tenants returns the scenario's tenants with this strategy's quota
// entries in place of theirs; tenants the strategy names and the scenario
// does not are added.
func (st *Strategy) tenants(base []tenancy.TenantSpec) []tenancy.TenantSpec {
	out := make([]tenancy.TenantSpec, len(base))
	copy(out, base)
	for _, t := range st.Tenants {
		found := false
		for i := range out {
			if out[i].Name == t.Name {
				out[i].Quota = t.Quota
				if t.Parent != "" {
					out[i].Parent = t.Parent
				}
				found = true
			}
		}
		if !found {
			out = append(out, t)
		}
	}
	return out
}

// override applies the strategy's class overrides to a new workload.
func (st *Strategy) override(class string, w *workload.Spec) {
	for _, c := range st.Classes {
		if c.Class != class {
			continue
		}
		if c.Priority != nil {
			w.Priority = *c.Priority
		}
		if c.Preemptible != nil {
			w.Preemptible = *c.Preemptible
		}
		if len(c.Regions) > 0 {
			w.Regions = c.Regions
		}
		if len(c.Flavors) > 0 {
			w.Flavors = c.Flavors
		}
	}
}

// schedOptions converts the strategy's options for the scheduler.
func (st *Strategy) schedOptions() sched.Options {
	o := st.Options
	return sched.Options{Scorer: o.Scorer, DisablePreemption: o.DisablePreemption, OverflowBeforePreempt: o.OverflowBeforePreempt, FairShare: st.fairShare, TenantBound: cmp.Or(st.tenantBound, sched.DefaultTenantBound)}
}

// WithPolicyFile makes the strategy use the policy file at path (on disk)
// instead of its own.
func (st *Strategy) WithPolicyFile(path string) {
	st.Policies = path
	st.readFile = os.ReadFile
}
