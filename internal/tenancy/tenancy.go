// Package tenancy holds who may use what: the tenant tree with per-flavor
// guarantees, limits and lending, partitions (node sets bound to a subtree)
// and capacity reservations.
//
// Semantics, per flavor key (GPU model, optionally one region):
//   - limit: the most a tenant's subtree may use, borrowing included; checked
//     at every level of the tree. No entry means no limit at that level.
//   - guaranteed: always available to the tenant; capacity it does not use
//     may be lent and is reclaimed by preemption when it needs it back.
//   - lendable: how much of its idle guarantee others may borrow (default:
//     all of it). The rest stays idle for it.
//   - weight, priority: how surplus is shared (the scheduler orders tenants
//     by usage relative to guarantee × weight, higher priority first).
//
// Limits are checked at every level. A guarantee on a tenant with
// children is for its whole subtree, its children's guarantees included
// (it must be at least their sum); the scheduler covers its members' work
// beyond their own guarantees with it and lets them reclaim it from
// outsiders (sched's tree.go). Weight and priority order tenants by their
// own entry. A key without region covers all regions. What counts against
// which entry — running work and reserved capacity — is defined once, in
// charge.go, for the scheduler and the server's usage report alike.
//
// Each tenant also has the priority classes its workloads may use
// (allowed_priorities; default every class but critical), capped by its
// ancestors' explicit lists (Tenant.Allowed).
//
//	tree, err := tenancy.NewTree(specs) // every problem, with positions
//	q := tree.Quota(i, "A100-80G", "eastus")
package tenancy

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// QuotaSpec is one flavor entry of a tenant.
type QuotaSpec struct {
	Pos        yamlfile.Pos
	Flavor     fleet.ModelID      `yaml:"flavor"`
	Region     string             `yaml:"region"`
	Guaranteed resource.MilliGPU  `yaml:"guaranteed"`
	Limit      *resource.MilliGPU `yaml:"limit"`
	Lendable   *resource.MilliGPU `yaml:"lendable"`
	Weight     float64            `yaml:"weight"`
	Priority   int                `yaml:"priority"`
}

// TenantSpec is a tenant as a config writes it.
type TenantSpec struct {
	Pos    yamlfile.Pos
	Name   string      `yaml:"name"`
	Parent string      `yaml:"parent"`
	Quota  []QuotaSpec `yaml:"quota"`
	// AllowedPriorities are the priority classes the tenant's workloads may
	// ask for; nil means workload.DefaultAllowed (every class but
	// critical). See Tenant.Allowed for inheritance.
	AllowedPriorities []workload.Priority `yaml:"allowed_priorities"`
}

// Key identifies a flavor scope: a GPU model in one region, or in all
// regions when Region is "".
type Key struct {
	Model  fleet.ModelID
	Region string
}

func (k Key) String() string {
	if k.Region == "" {
		return string(k.Model)
	}
	return fmt.Sprintf("%s in %s", k.Model, k.Region)
}

// Quota is a resolved quota entry.
type Quota struct {
	Key        Key
	Guaranteed resource.MilliGPU
	Limit      resource.MilliGPU // Unlimited when not set
	Lendable   resource.MilliGPU
	Weight     float64
	Priority   int
}

// Unlimited is the limit of an entry that sets none.
const Unlimited = resource.MilliGPU(1 << 62)

// Tenant is a node of the tree.
type Tenant struct {
	Name   string
	Index  int
	Parent int // -1 for a root
	Depth  int
	Quotas []Quota
	Leaf   bool
	// Allowed is the set of priority classes the tenant may submit: its
	// own list (or the default when it has none, see AllowedSet)
	// intersected with every ancestor's explicit list (NarrowedBy), so that
	// an organisation caps its whole subtree while a tenant that says
	// nothing gets the default.
	Allowed workload.PrioritySet
}

// AllowedSet is the set a tenant's own list allows: the list, or
// workload.DefaultAllowed when it is nil.
func AllowedSet(list []workload.Priority) workload.PrioritySet {
	if list == nil {
		return workload.DefaultAllowed
	}
	return workload.SetOf(list...)
}

// NarrowedBy is what an ancestor's list leaves its descendants: the list,
// or every class when it has none.
func NarrowedBy(list []workload.Priority) workload.PrioritySet {
	if list == nil {
		return workload.AllPriorities
	}
	return workload.SetOf(list...)
}

// ErrPriorityNotAllowed is returned (wrapped) for a workload whose
// priority class its tenant may not use.
var ErrPriorityNotAllowed = errors.New("priority class not allowed")

// CheckPriority returns an error wrapping ErrPriorityNotAllowed when
// allowed lacks p, naming the tenant and what it may use.
func CheckPriority(tenant string, allowed workload.PrioritySet, p workload.Priority) error {
	if allowed.Has(p) {
		return nil
	}
	return fmt.Errorf("%w: tenant %q may not use priority %s (allowed: %v)", ErrPriorityNotAllowed, tenant, p, allowed)
}

// MayUse checks tenant i's effective set (Tenant.Allowed).
func (t *Tree) MayUse(i int, p workload.Priority) error {
	return CheckPriority(t.Tenants[i].Name, t.Tenants[i].Allowed, p)
}

// Tree is the tenant tree. Index order is the config order, parents
// before children.
type Tree struct {
	Tenants []*Tenant
	byName  map[string]int
}

// NewTree resolves tenant specs into a tree, reporting every problem.
func NewTree(specs []TenantSpec) (*Tree, error) {
	t, err := NewTreePartial(specs)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// NewTreePartial is NewTree that, when there are problems, also returns
// the tree of the tenants it could resolve (a tenant without a name or
// defined twice is left out, a cycle is cut), so that a config's checks
// can go on and report every problem of the file in one run. Such a tree
// is for those checks only, never for scheduling.
func NewTreePartial(specs []TenantSpec) (*Tree, error) {
	var errs yamlfile.Errors
	t := &Tree{byName: map[string]int{}}
	var own [][]workload.Priority // per tenant, its own list
	for i, s := range specs {
		f := fmt.Sprintf("tenants[%d]", i)
		if s.Name == "" {
			errs.Add(s.Pos, f+".name", "a tenant needs a name")
			continue
		}
		if _, dup := t.byName[s.Name]; dup {
			errs.Add(s.Pos, f+".name", "tenant %q defined twice", s.Name)
			continue
		}
		t.byName[s.Name] = len(t.Tenants)
		t.Tenants = append(t.Tenants, &Tenant{Name: s.Name, Index: len(t.Tenants), Parent: -1, Leaf: true})
		own = append(own, s.AllowedPriorities)
	}
	for i, s := range specs {
		f := fmt.Sprintf("tenants[%d]", i)
		idx, ok := t.byName[s.Name]
		if !ok || t.Tenants[idx].Name != s.Name {
			continue
		}
		ten := t.Tenants[idx]
		if s.Parent != "" {
			p, ok := t.byName[s.Parent]
			if !ok {
				errs.Add(s.Pos, f+".parent", "unknown parent tenant %q", s.Parent)
			} else {
				ten.Parent = p
				t.Tenants[p].Leaf = false
			}
		}
		if s.AllowedPriorities != nil && len(s.AllowedPriorities) == 0 {
			errs.Add(s.Pos, f+".allowed_priorities", "list at least one priority class (leave the field out for the default: %v)", workload.DefaultAllowed)
		}
		seen := map[Key]bool{}
		for j, q := range s.Quota {
			qf := fmt.Sprintf("%s.quota[%d]", f, j)
			k := Key{Model: q.Flavor, Region: q.Region}
			if q.Flavor == "" {
				errs.Add(q.Pos, qf+".flavor", "a quota entry needs a flavor (GPU model)")
			}
			if seen[k] {
				errs.Add(q.Pos, qf, "second quota entry for %s", k)
			}
			seen[k] = true
			r := Quota{Key: k, Guaranteed: q.Guaranteed, Limit: Unlimited, Lendable: q.Guaranteed, Weight: q.Weight, Priority: q.Priority}
			if q.Limit != nil {
				r.Limit = *q.Limit
				if r.Limit < r.Guaranteed {
					errs.Add(q.Pos, qf+".limit", "limit %v is below guaranteed %v", r.Limit, r.Guaranteed)
				}
			}
			if q.Lendable != nil {
				r.Lendable = *q.Lendable
				if r.Lendable > r.Guaranteed {
					errs.Add(q.Pos, qf+".lendable", "lendable %v is more than guaranteed %v", r.Lendable, r.Guaranteed)
				}
			}
			if q.Weight < 0 {
				errs.Add(q.Pos, qf+".weight", "weight must not be negative")
			}
			if r.Weight == 0 {
				r.Weight = 1
			}
			ten.Quotas = append(ten.Quotas, r)
		}
	}
	// Depths, and cycles.
	for _, ten := range t.Tenants {
		d, p := 0, ten.Parent
		for p >= 0 {
			d++
			if d > len(t.Tenants) {
				errs.Add(specs[ten.Index].Pos, fmt.Sprintf("tenants[%d].parent", ten.Index), "tenant %q is its own ancestor", ten.Name)
				ten.Parent = -1
				break
			}
			p = t.Tenants[p].Parent
		}
		ten.Depth = d
	}
	// A parent's guarantee is for its whole subtree: it covers what its
	// children are guaranteed.
	if errs.Err() == nil {
		for _, ten := range t.Tenants {
			for j, q := range ten.Quotas {
				if q.Guaranteed == 0 || ten.Leaf {
					continue
				}
				var sum resource.MilliGPU
				var who []string
				for _, c := range t.Tenants {
					if c.Parent != ten.Index {
						continue
					}
					for _, cq := range c.Quotas {
						if cq.Key == q.Key && cq.Guaranteed > 0 {
							sum = sum.Add(cq.Guaranteed)
							who = append(who, fmt.Sprintf("%s %v", c.Name, cq.Guaranteed))
						}
					}
				}
				if sum > q.Guaranteed {
					errs.Add(specs[ten.Index].Quota[j].Pos, fmt.Sprintf("tenants[%d].quota[%d].guaranteed", ten.Index, j),
						"guaranteed %v for %s is below what its children are guaranteed (%v: %s): a parent's guarantee is for its whole subtree, children's shares included",
						q.Guaranteed, q.Key, sum, strings.Join(who, ", "))
				}
			}
		}
	}
	// Allowed priority classes, narrowed along the path.
	for _, ten := range t.Tenants {
		ten.Allowed = AllowedSet(own[ten.Index])
		for _, a := range t.Path(ten.Index)[1:] {
			ten.Allowed &= NarrowedBy(own[a])
		}
	}
	return t, errs.Err()
}

// Lookup returns the index of the named tenant.
func (t *Tree) Lookup(name string) (int, bool) { i, ok := t.byName[name]; return i, ok }

// Path returns i and its ancestors, leaf first.
func (t *Tree) Path(i int) []int {
	var out []int
	for ; i >= 0; i = t.Tenants[i].Parent {
		out = append(out, i)
	}
	return out
}

// InSubtree reports whether tenant i is root or below it.
func (t *Tree) InSubtree(i, root int) bool {
	for ; i >= 0; i = t.Tenants[i].Parent {
		if i == root {
			return true
		}
	}
	return false
}

// Entry returns tenant i's quota entry for a model in a region: the
// region-specific one when it exists, else the all-regions one. ok is false
// when the tenant has neither.
func (t *Tree) Entry(i int, m fleet.ModelID, region string) (q Quota, idx int, ok bool) {
	idx = -1
	for j, e := range t.Tenants[i].Quotas {
		if e.Key.Model != m {
			continue
		}
		if e.Key.Region == region {
			return e, j, true
		}
		if e.Key.Region == "" {
			idx = j
		}
	}
	if idx >= 0 {
		return t.Tenants[i].Quotas[idx], idx, true
	}
	return Quota{}, -1, false
}

// Partition is a set of nodes only one subtree may use.
type Partition struct {
	Pos    yamlfile.Pos
	Name   string          `yaml:"name"`
	Tenant string          `yaml:"tenant"`
	Blocks []fleet.BlockID `yaml:"blocks"`
	Nodes  []fleet.NodeID  `yaml:"nodes"`
}

// Reservation is a capacity reservation: Count machines of one SKU in a
// region (optionally a zone) held for the owner during [Start, End). Nodes
// are the machines it is bound to (all-or-nothing, see Bind).
type Reservation struct {
	Pos    yamlfile.Pos
	Name   string         `yaml:"name"`
	Owner  string         `yaml:"owner"`
	Region string         `yaml:"region"`
	Zone   string         `yaml:"zone"`
	SKU    fleet.SKUName  `yaml:"sku"`
	Count  int            `yaml:"count"`
	Start  time.Time      `yaml:"start"`
	End    time.Time      `yaml:"end"`
	Nodes  []fleet.NodeID `yaml:"nodes"`
}

// Active reports whether the reservation holds capacity at now.
func (r *Reservation) Active(now time.Time) bool {
	if !r.Start.IsZero() && now.Before(r.Start) {
		return false
	}
	if !r.End.IsZero() && !now.Before(r.End) {
		return false
	}
	return true
}

// Matches reports whether node n can serve the reservation.
func (r *Reservation) Matches(n *fleet.Node) bool {
	return n.Region == r.Region && n.SKU.Name == r.SKU && (r.Zone == "" || n.Zone == r.Zone)
}
