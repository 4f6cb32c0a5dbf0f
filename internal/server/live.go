package server

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter/internal/store"
)

// liveCache keeps the live (pending and running) workloads decoded between
// cycles. It follows the event log: every write of a workload appends an
// event naming it in the same transaction, so a snapshot at revision R is
// the cached set at revision C plus the workloads named by the events in
// (C, R]. A ConfigSeeded event, a snapshot older than the cache, or a
// minute without a full read makes it read everything again.
type liveCache struct {
	mu       sync.Mutex
	rev      int64
	byKey    map[string]*store.Workload
	lastFull time.Time
}

const fullReadEvery = time.Minute

// live returns the live workloads of tx's snapshot in key order. The
// objects are shared: callers must not change them.
func (c *liveCache) live(tx store.ReadTx) ([]*store.Workload, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := tx.Revision()
	switch {
	case c.byKey == nil || time.Since(c.lastFull) > fullReadEvery:
		if err := c.full(tx); err != nil {
			return nil, err
		}
	case cur < c.rev:
		return listLive(tx) // an older snapshot than the cache: read it whole
	case cur > c.rev:
		keys, full, err := changedWorkloads(tx, c.rev)
		if err != nil {
			return nil, err
		}
		if full {
			if err := c.full(tx); err != nil {
				return nil, err
			}
			break
		}
		for _, k := range keys {
			w, err := store.Get[store.Workload](tx, k)
			if err != nil || !w.State.Live() {
				delete(c.byKey, k)
				continue
			}
			c.byKey[k] = w
		}
		c.rev = cur
	}
	keys := make([]string, 0, len(c.byKey))
	for k := range c.byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*store.Workload, len(keys))
	for i, k := range keys {
		out[i] = c.byKey[k]
	}
	return out, nil
}

func (c *liveCache) full(tx store.ReadTx) error {
	ws, err := listLive(tx)
	if err != nil {
		return err
	}
	c.byKey = make(map[string]*store.Workload, len(ws))
	for _, w := range ws {
		c.byKey[w.Key()] = w
	}
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

// changedWorkloads lists the workloads named by events after rev; full is
// true when an event says everything may have changed.
func changedWorkloads(tx store.ReadTx, rev int64) (keys []string, full bool, err error) {
	seen := map[string]bool{}
	tx.ScanRaw(store.KindEvent, "", store.RevKey(rev), func(_ string, data []byte) bool {
		var e struct {
			Type   string `json:"type"`
			Object string `json:"object"`
		}
		if err = json.Unmarshal(data, &e); err != nil {
			return false
		}
		if e.Type == "ConfigSeeded" {
			full = true
			return false
		}
		if k, ok := strings.CutPrefix(e.Object, string(store.KindWorkload)+"/"); ok && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		return true
	})
	return keys, full, err
}
