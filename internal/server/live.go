package server

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// liveCache keeps the live (pending and running) workloads decoded between
// cycles. It follows the event log: every write of a workload appends an
// event naming it in the same transaction, so a snapshot at revision R is
// the cached set at revision C plus the workloads named by the events in
// (C, R]. A ConfigSeeded event, a snapshot older than the cache, or a
// minute without a full read makes it read everything again.
type liveCache struct {
	mu    sync.Mutex
	rev   int64
	byKey map[string]*liveEntry
	order []*liveEntry // byKey's entries in key order
	// byNode holds the running entries by the nodes their replicas use, so
	// that a reservation's utilization reads the work on its machines
	// only (runningOn).
	byNode   map[fleet.NodeID]map[string]*liveEntry
	lastFull time.Time
	// intern shares equal names, lists and label sets among the cached
	// workloads (a new one at each full read).
	intern *interner

	// fresh holds workloads just committed by the submit handler, which
	// has them decoded already: a cycle takes one instead of decoding the
	// stored copy when the workload's last event in the cycle's range
	// names the same revision. Entries at or below the cache's revision
	// are dropped each refresh.
	freshMu sync.Mutex
	fresh   map[string]*store.Workload
	handed  int // offered workloads taken (tests)

	// fleet is the last nodes and fleet loadWorldWith built (fleetAt).
	fleetMu sync.Mutex
	fleet   cachedFleet
}

// cachedFleet is a world's nodes part as built at node revision rev with
// catalog cat. Its values are shared by every world that takes them and
// never changed.
type cachedFleet struct {
	rev            int64
	cat            *fleet.Catalog
	nodes          []*store.Node
	fleet          *fleet.Fleet
	down, cordoned []fleet.NodeID
}

// fleetAt returns the kept nodes part when it was built at node revision
// rev with catalog cat (a nil cache keeps none).
func (c *liveCache) fleetAt(rev int64, cat *fleet.Catalog) (cachedFleet, bool) {
	if c == nil {
		return cachedFleet{}, false
	}
	c.fleetMu.Lock()
	defer c.fleetMu.Unlock()
	f := c.fleet
	return f, f.fleet != nil && f.rev == rev && f.cat == cat
}

// keepFleet keeps f, unless a newer one is kept already.
func (c *liveCache) keepFleet(f cachedFleet) {
	if c == nil {
		return
	}
	c.fleetMu.Lock()
	defer c.fleetMu.Unlock()
	if c.fleet.fleet == nil || f.rev >= c.fleet.rev {
		c.fleet = f
	}
}

// offer hands the cache a workload exactly as committed (the caller must
// not change it afterwards).
func (c *liveCache) offer(w *store.Workload) {
	c.freshMu.Lock()
	defer c.freshMu.Unlock()
	if c.fresh == nil {
		c.fresh = map[string]*store.Workload{}
	}
	c.fresh[w.Key()] = w
}

// takeFresh returns the offered workload with key k at revision rev and
// forgets it (the cache now holds it).
func (c *liveCache) takeFresh(k string, rev int64) *store.Workload { return c.fresh1(k, rev, true) }

// peekFresh is takeFresh leaving the workload for the cache (quiet cycles).
func (c *liveCache) peekFresh(k string, rev int64) *store.Workload { return c.fresh1(k, rev, false) }

func (c *liveCache) fresh1(k string, rev int64, take bool) *store.Workload {
	if rev == 0 {
		return nil
	}
	c.freshMu.Lock()
	defer c.freshMu.Unlock()
	w := c.fresh[k]
	if w == nil || w.Meta.Revision != rev {
		return nil
	}
	if take {
		delete(c.fresh, k)
		c.handed++
	}
	return w
}

// dropFresh forgets offered workloads the cache has read past.
func (c *liveCache) dropFresh(rev int64) {
	c.freshMu.Lock()
	defer c.freshMu.Unlock()
	for k, w := range c.fresh {
		if w.Meta.Revision <= rev {
			delete(c.fresh, k)
		}
	}
}

// liveEntry is one cached workload and the scheduler's copy of it, made
// once per stored version rather than once per cycle (the core never
// changes its input).
type liveEntry struct {
	key   string
	w     *store.Workload
	sched *workload.Workload
}

func newLiveEntry(w *store.Workload) *liveEntry {
	return &liveEntry{key: w.Key(), w: w, sched: schedWorkload(w)}
}

const fullReadEvery = time.Minute

// live returns the live workloads of tx's snapshot in key order and, when
// they come from the cache, the scheduler's copies of them (same order;
// nil otherwise). The objects are shared: callers must not change them.
func (c *liveCache) live(tx store.ReadTx) ([]*store.Workload, []*workload.Workload, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok, err := c.refresh(tx)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		ws, err := listLive(tx) // an older snapshot than the cache: read it whole
		return ws, nil, err
	}
	ws := make([]*store.Workload, len(c.order))
	sw := make([]*workload.Workload, len(c.order))
	for i, e := range c.order {
		ws[i], sw[i] = e.w, e.sched
	}
	return ws, sw, nil
}

// runningOn returns the live workloads of tx's snapshot with a replica on
// one of nodes, in key order: the work on those machines only, not a
// pass over every tenant's workloads.
func (c *liveCache) runningOn(tx store.ReadTx, nodes []fleet.NodeID) ([]*store.Workload, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok, err := c.refresh(tx)
	if err != nil {
		return nil, err
	}
	on := map[fleet.NodeID]bool{}
	for _, n := range nodes {
		on[n] = true
	}
	var out []*store.Workload
	if !ok { // an older snapshot than the cache
		all, err := listLive(tx)
		for _, w := range all {
			if w.Running != nil && slices.ContainsFunc(w.Running.Replicas, func(r workload.Replica) bool { return on[r.Node] }) {
				out = append(out, w)
			}
		}
		return out, err
	}
	seen := map[string]bool{}
	for n := range on {
		for k, e := range c.byNode[n] {
			if !seen[k] {
				seen[k] = true
				out = append(out, e.w)
			}
		}
	}
	slices.SortFunc(out, func(a, b *store.Workload) int { return strings.Compare(a.Key(), b.Key()) })
	return out, nil
}

// place and unplace keep byNode in step with an entry's assignment.
func (c *liveCache) place(e *liveEntry) {
	if e.w == nil || e.w.Running == nil {
		return
	}
	for _, r := range e.w.Running.Replicas {
		m := c.byNode[r.Node]
		if m == nil {
			m = map[string]*liveEntry{}
			c.byNode[r.Node] = m
		}
		m[e.key] = e
	}
}

func (c *liveCache) unplace(e *liveEntry) {
	if e.w == nil || e.w.Running == nil {
		return
	}
	for _, r := range e.w.Running.Replicas {
		if m := c.byNode[r.Node]; m != nil {
			delete(m, e.key)
			if len(m) == 0 {
				delete(c.byNode, r.Node)
			}
		}
	}
}

// refresh brings the cache to tx's snapshot; false means the snapshot is
// older than the cache (which is left as it is). Call it with c.mu held.
func (c *liveCache) refresh(tx store.ReadTx) (bool, error) {
	cur := tx.Revision()
	switch {
	case c.byKey == nil || time.Since(c.lastFull) > fullReadEvery:
		if err := c.full(tx); err != nil {
			return false, err
		}
	case cur < c.rev:
		return false, nil
	case cur > c.rev:
		changed, full, err := changedWorkloads(tx, c.rev)
		if eventsPrunedThrough(tx) > c.rev {
			full = true // the events since c.rev are no longer all there
		}
		if err != nil {
			return false, err
		}
		if full {
			if err := c.full(tx); err != nil {
				return false, err
			}
			break
		}
		var added []*liveEntry
		removed := false
		for _, ch := range changed {
			k := ch.key
			w := c.takeFresh(k, ch.rev)
			if w != nil {
				cp := *w // the submit handler's: interned in a copy
				w = &cp
			} else {
				w, err = store.Get[store.Workload](tx, k)
			}
			if err == nil && w.State.Live() {
				c.intern.workload(w)
			}
			e := c.byKey[k]
			if err != nil || !w.State.Live() {
				if e != nil {
					delete(c.byKey, k)
					c.unplace(e)
					e.w = nil // marks it for removal from order
					removed = true
				}
				continue
			}
			if e != nil {
				c.unplace(e)
				e.w, e.sched = w, schedWorkload(w)
				c.place(e)
				continue
			}
			e = newLiveEntry(w)
			c.byKey[k] = e
			c.place(e)
			added = append(added, e)
		}
		if len(added) > 0 || removed {
			c.order = mergeEntries(c.order, added)
		}
		c.rev = cur
	}
	c.dropFresh(c.rev)
	return true, nil
}

// mergeEntries returns order without its removed entries (w nil) merged
// with added, in key order.
func mergeEntries(order, added []*liveEntry) []*liveEntry {
	slices.SortFunc(added, func(a, b *liveEntry) int { return strings.Compare(a.key, b.key) })
	out := make([]*liveEntry, 0, len(order)+len(added))
	i := 0
	for _, e := range order {
		if e.w == nil {
			continue
		}
		for i < len(added) && added[i].key < e.key {
			out = append(out, added[i])
			i++
		}
		out = append(out, e)
	}
	return append(out, added[i:]...)
}

func (c *liveCache) full(tx store.ReadTx) error {
	ws, err := listLive(tx)
	if err != nil {
		return err
	}
	c.byKey = make(map[string]*liveEntry, len(ws))
	c.order = make([]*liveEntry, 0, len(ws))
	c.byNode = map[fleet.NodeID]map[string]*liveEntry{}
	c.intern = newInterner()
	for _, w := range ws {
		c.intern.workload(w)
		e := newLiveEntry(w)
		c.byKey[e.key] = e
		c.order = append(c.order, e)
		c.place(e)
	}
	slices.SortFunc(c.order, func(a, b *liveEntry) int { return strings.Compare(a.key, b.key) })
	c.rev, c.lastFull = tx.Revision(), time.Now()
	return nil
}

func listLive(tx store.ReadTx) ([]*store.Workload, error) {
	all, err := store.List[store.Workload](tx, "")
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, w := range all {
		if w.State.Live() {
			out = append(out, w)
		}
	}
	return out, nil
}

// change is a workload named by the event log, with the revision its
// last event there recorded (0 when it recorded none).
type change struct {
	key string
	rev int64
}

// changedWorkloads lists the workloads named by events after rev, once
// each; full is true when an event says everything may have changed.
func changedWorkloads(tx store.ReadTx, rev int64) (out []change, full bool, err error) {
	at := map[string]int{}
	tx.ScanRaw(store.KindEvent, "", store.RevKey(rev), func(_ string, data []byte) bool {
		var e struct {
			Type   store.EventKind `json:"type"`
			Object string          `json:"object"`
			Rev    int64           `json:"object_revision"`
		}
		if err = json.Unmarshal(data, &e); err != nil {
			return false
		}
		if e.Type == store.EventConfigSeeded {
			full = true
			return false
		}
		kind, k, ok := store.ParseObject(e.Object)
		if !ok || kind != store.KindWorkload {
			return true
		}
		if i, seen := at[k]; seen {
			out[i].rev = e.Rev
			return true
		}
		at[k] = len(out)
		out = append(out, change{key: k, rev: e.Rev})
		return true
	})
	return out, full, err
}
