package server

import (
	"github.com/arbiterhq/arbiter/internal/store"
)

// scanEvents calls fn with the events after `after` of scope sc, in
// sequence order, until fn returns false. The whole log (the admin) is
// read as it is; one tenant's events (a tenant token, or the admin's
// ?tenant=) are read from its index (store.ScanTenantEvents), so its request costs
// its own events and never the other tenants'; any other token sees
// nothing. It returns the sequence to follow from: the last event passed
// to fn when fn stopped the scan, and otherwise the snapshot's revision
// (every later event has a higher sequence), so that a reader with nothing
// new does not fall behind the pruner.
func scanEvents(tx store.ReadTx, sc eventScope, after int64, fn func(e *store.Event) bool) (next int64, err error) {
	next = after
	stopped := false
	visit := func(data []byte) bool {
		var e store.Event
		if err = jsonUnmarshal(data, &e); err != nil {
			return false
		}
		next = e.Seq
		if !fn(&e) {
			stopped = true
			return false
		}
		return true
	}
	switch {
	case sc.all:
		tx.ScanRaw(store.KindEvent, "", store.RevKey(after), func(_ string, data []byte) bool { return visit(data) })
	case sc.tenant != "":
		store.ScanTenantEvents(tx, sc.tenant, after, func(_ int64, data []byte) bool { return visit(data) })
	}
	if err == nil && !stopped {
		next = max(next, tx.Revision())
	}
	return next, err
}
