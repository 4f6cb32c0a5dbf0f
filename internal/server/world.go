package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// world is the state at one revision, resolved into the scheduler's model.
// Workloads and reservations are named by their store keys
// ("tenant/name") so that names never collide across tenants.
type world struct {
	Revision     int64
	Catalog      *fleet.Catalog
	Fleet        *fleet.Fleet
	Tree         *tenancy.Tree
	Tenants      []*store.Tenant
	Nodes        []*store.Node
	Reservations []*store.Reservation
	Partitions   []*store.Partition // in store (name) order
	Workloads    []*store.Workload  // live ones (pending, running)
	// sched holds the scheduler's copies of Workloads when the live cache
	// supplied them (shared: never changed); nil means input makes them.
	sched []*workload.Workload
	Down  []fleet.NodeID
	// Cordoned are the up nodes closed to new work (running work stays).
	Cordoned []fleet.NodeID
}

const settingCatalog = "catalog"

// loadCatalog returns the built-in catalog merged with the stored overrides.
func loadCatalog(tx store.ReadTx) (*fleet.Catalog, error) {
	cat := fleet.Builtin()
	s, err := store.Get[store.Setting](tx, settingCatalog)
	if err != nil {
		return cat, nil
	}
	var o fleet.Catalog
	if err := json.Unmarshal(s.Value, &o); err != nil {
		return nil, fmt.Errorf("server: stored catalog: %w", err)
	}
	if err := cat.Merge(&o); err != nil {
		return nil, fmt.Errorf("server: stored catalog: %w", err)
	}
	return cat, nil
}

// loadWorld reads everything the scheduler needs. withWorkloads false
// skips workloads (cheap reads for fleet and tenant answers).
func loadWorld(tx store.ReadTx, cat *fleet.Catalog, withWorkloads bool) (*world, error) {
	return loadWorldWith(tx, cat, withWorkloads, nil)
}

// loadWorldWith reads live workloads through the cache when one is given,
// and the nodes and the fleet built from them through its copy of the last
// ones read while no node changed (their kind's revision) under the same
// catalog: a world's nodes, fleet and node lists are shared read-only.
func loadWorldWith(tx store.ReadTx, cat *fleet.Catalog, withWorkloads bool, cache *liveCache) (*world, error) {
	w := &world{Revision: tx.Revision(), Catalog: cat}
	rev := tx.KindRevision(store.KindNode)
	if f, ok := cache.fleetAt(rev, cat); ok {
		w.Nodes, w.Fleet, w.Down, w.Cordoned = f.nodes, f.fleet, f.down, f.cordoned
	} else {
		if err := loadFleet(tx, cat, w); err != nil {
			return nil, err
		}
		cache.keepFleet(cachedFleet{rev: rev, cat: cat, nodes: w.Nodes, fleet: w.Fleet, down: w.Down, cordoned: w.Cordoned})
	}
	var err error
	if w.Tenants, err = store.List[store.Tenant](tx, ""); err != nil {
		return nil, err
	}
	if w.Tree, err = buildTree(w.Tenants); err != nil {
		return nil, err
	}
	if w.Reservations, err = store.List[store.Reservation](tx, ""); err != nil {
		return nil, err
	}
	if w.Partitions, err = store.List[store.Partition](tx, ""); err != nil {
		return nil, err
	}
	if withWorkloads {
		if cache != nil {
			w.Workloads, w.sched, err = cache.live(tx)
		} else {
			w.Workloads, err = listLive(tx)
		}
		if err != nil {
			return nil, err
		}
	}
	return w, nil
}

// buildTree orders tenants parents first and builds the tree.
func buildTree(ts []*store.Tenant) (*tenancy.Tree, error) {
	byName := map[string]*store.Tenant{}
	for _, t := range ts {
		byName[t.Name] = t
	}
	var specs []tenancy.TenantSpec
	done := map[string]bool{}
	var visit func(t *store.Tenant, depth int)
	visit = func(t *store.Tenant, depth int) {
		if done[t.Name] || depth > len(ts) {
			return
		}
		if p, ok := byName[t.Parent]; ok {
			visit(p, depth+1)
		}
		done[t.Name] = true
		specs = append(specs, tenantSpec(t))
	}
	for _, t := range ts {
		visit(t, 0)
	}
	return tenancy.NewTree(specs)
}

func tenantSpec(t *store.Tenant) tenancy.TenantSpec {
	s := tenancy.TenantSpec{Name: t.Name, Parent: t.Parent, AllowedPriorities: t.AllowedPriorities}
	for _, q := range t.Quotas {
		s.Quota = append(s.Quota, tenancy.QuotaSpec{
			Flavor: q.Flavor, Region: q.Region, Guaranteed: q.Guaranteed,
			Limit: q.Limit, Lendable: q.Lendable, Weight: q.Weight, Priority: q.Priority,
		})
	}
	return s
}

// input builds the scheduler's input. Workloads are copies named by key.
func (w *world) input(now time.Time, tree *tenancy.Tree) sched.Input {
	in := sched.Input{
		Now: now, Seed: uint64(w.Revision), Fleet: w.Fleet, Tenants: tree, Down: w.Down, Cordoned: w.Cordoned,
	}
	in.Reservations = w.reservations()
	for _, p := range w.Partitions {
		in.Partitions = append(in.Partitions, tenancy.Partition{Name: p.Name, Tenant: p.Tenant, Blocks: p.Blocks, Nodes: p.Nodes})
	}
	if w.sched != nil {
		in.Workloads = w.sched
		return in
	}
	for _, x := range w.Workloads {
		in.Workloads = append(in.Workloads, schedWorkload(x))
	}
	return in
}

// after is the world as plan leaves it, for what is computed from the
// state (the per-tenant gauges): the workloads it evicts pending, those it
// places running from now. The changed workloads are copies; w is not
// changed.
//
// The workloads are in key order (the live cache's, the store's), so the
// few a plan changes are found by binary search, not by a pass that
// hashes every queued workload; a key not found that way (workloads in
// another order) falls back to the pass.
func (w *world) after(plan sched.Plan, now time.Time) *world {
	if len(plan.Placements)+len(plan.Preemptions)+len(plan.Resizes) == 0 {
		return w
	}
	find := func(id workload.ID) int {
		i, ok := slices.BinarySearchFunc(w.Workloads, string(id), func(x *store.Workload, k string) int { return strings.Compare(x.Key(), k) })
		if !ok {
			return -1
		}
		return i
	}
	change := make(map[workload.ID]*workload.Assignment, len(plan.Placements)+len(plan.Preemptions))
	resized := map[workload.ID]int{}
	for _, p := range plan.Preemptions {
		change[p.Workload] = nil
	}
	var rs map[workload.ID]sched.Resize
	for _, r := range plan.Resizes {
		if i := find(r.Workload); i >= 0 {
			if x := w.Workloads[i]; x.Running != nil {
				change[r.Workload], resized[r.Workload] = sched.Resized(x.Running, r, now), r.To
			}
			continue
		}
		if rs == nil {
			rs = map[workload.ID]sched.Resize{}
		}
		rs[r.Workload] = r
	}
	for _, x := range w.Workloads {
		if len(rs) == 0 {
			break
		}
		if r, ok := rs[workload.ID(x.Key())]; ok && x.Running != nil {
			change[r.Workload], resized[r.Workload] = sched.Resized(x.Running, r, now), r.To
		}
	}
	for _, g := range plan.Placed() {
		change[g.Workload] = sched.Assignment(g.Placements, now)
	}
	c := *w
	c.sched = nil
	c.Workloads = slices.Clone(w.Workloads)
	set := func(i int, id workload.ID, a *workload.Assignment) {
		y := *w.Workloads[i]
		y.Running = a
		if n, ok := resized[id]; ok {
			y.Spec.Replicas = n
		} else if a == nil {
			y.Spec.Replicas = y.Spec.MinReplicas()
		}
		c.Workloads[i] = &y
	}
	missed := false
	for id, a := range change {
		if i := find(id); i >= 0 {
			set(i, id, a)
		} else {
			missed = true
		}
	}
	if missed {
		for i, x := range w.Workloads {
			id := workload.ID(x.Key())
			if a, ok := change[id]; ok && c.Workloads[i] == x {
				set(i, id, a)
			}
		}
	}
	return &c
}

// reservations are the stored reservations in the scheduler's model,
// named by key.
func (w *world) reservations() []tenancy.Reservation {
	var out []tenancy.Reservation
	for _, r := range w.Reservations {
		out = append(out, reservationModel(r))
	}
	return out
}

// reservationModel is one stored reservation in the scheduler's model.
func reservationModel(r *store.Reservation) tenancy.Reservation {
	return tenancy.Reservation{
		Name: r.Key(), Owner: r.Tenant, Region: r.Region, Zone: r.Zone, SKU: r.SKU,
		Count: r.Count, Start: r.Start, End: r.End, Nodes: r.Nodes,
	}
}

// schedWorkload is the scheduler's view of a stored workload.
func schedWorkload(x *store.Workload) *workload.Workload {
	c := &workload.Workload{Spec: x.Spec, SubmittedAt: x.SubmittedAt, Running: x.Running}
	c.Name = workload.ID(x.Key())
	c.Tenant = x.Tenant
	if x.Spec.Reservation != "" {
		c.Reservation = store.ReservationKey(x.Tenant, x.Spec.Reservation)
	}
	return c
}

// partitioned returns the nodes of every partition: its blocks' nodes
// and its own.
func (w *world) partitioned() map[fleet.NodeID]string {
	out := map[fleet.NodeID]string{}
	for _, p := range w.Partitions {
		for _, id := range partitionNodes(w.Fleet, p) {
			out[id] = p.Name
		}
	}
	return out
}

// partitionNodes lists the nodes a partition covers, blocks first.
func partitionNodes(f *fleet.Fleet, p *store.Partition) []fleet.NodeID {
	var ids []fleet.NodeID
	for _, b := range p.Blocks {
		for _, n := range f.BlockNodes(b) {
			ids = append(ids, n.ID)
		}
	}
	return append(ids, p.Nodes...)
}

// loadFleet reads the nodes into w, in registration order, and builds the
// fleet and the lists of down and cordoned nodes from them.
func loadFleet(tx store.ReadTx, cat *fleet.Catalog, w *world) error {
	var err error
	if w.Nodes, err = store.List[store.Node](tx, ""); err != nil {
		return err
	}
	sort.SliceStable(w.Nodes, func(i, j int) bool { return w.Nodes[i].Seq < w.Nodes[j].Seq })
	var nodes []*fleet.Node
	for _, n := range w.Nodes {
		sku, ok := cat.SKU(n.SKU)
		if !ok {
			continue // registered with an SKU the catalog no longer knows
		}
		nodes = append(nodes, &fleet.Node{
			ID: n.ID, Region: n.Region, Zone: n.Zone, Block: n.Block, SKU: sku, Model: sku.Model,
			GPUs: sku.GPUs, CPU: resource.MilliCPU(sku.VCPUs) * 1000, Memory: resource.MiB(sku.MemoryGiB) * 1024,
			Labels: n.Labels,
		})
		if n.Down || n.Drained {
			w.Down = append(w.Down, n.ID)
		} else if n.Cordoned {
			w.Cordoned = append(w.Cordoned, n.ID)
		}
	}
	// Clipped: a caller that appends to a shared list copies it.
	w.Down, w.Cordoned = slices.Clip(w.Down), slices.Clip(w.Cordoned)
	w.Fleet, err = fleet.FromNodes(cat, nodes)
	return err
}
