package server

import (
	"encoding/json"

	"github.com/arbiterhq/arbiter/internal/store"
)

// deleteTenantHistory removes what a deleted tenant leaves behind once its
// live work, reservations, partitions and children are gone, so that a
// tenant created later under the same name sees none of it: its ended
// workloads (their specs, commands and env included) are deleted, and its
// events are disowned (see disownTenantEvents). Runs in deleteTenant's
// transaction.
func deleteTenantHistory(tx store.WriteTx, tenant string) error {
	ws, err := store.List[store.Workload](tx, tenant+"/")
	if err != nil {
		return err
	}
	for _, x := range ws {
		if err := store.Delete(tx, store.KindWorkload, x.Key()); err != nil {
			return err
		}
	}
	return disownTenantEvents(tx, tenant)
}

// disownTenantEvents makes the events of a tenant (Tenant set to it, which
// its tokens could read) admin-only: their Tenant field is cleared, so no
// tenant token, a new tenant of the same name included, ever reads them,
// while the admin keeps the audit trail (Object still names what they
// were about). It scans the whole log: tenant deletion is a rare admin
// operation (a per-tenant event index would make this a prefix scan, and
// must drop the tenant's entries here).
func disownTenantEvents(tx store.WriteTx, tenant string) error {
	var owned []store.Event
	var derr error
	tx.ScanRaw(store.KindEvent, "", "", func(key string, data []byte) bool {
		var e store.Event
		if derr = jsonUnmarshal(data, &e); derr != nil {
			return false
		}
		if e.Tenant == tenant {
			owned = append(owned, e)
		}
		return true
	})
	if derr != nil {
		return derr
	}
	if len(owned) > 0 {
		tx.NextRevision(store.KindEvent) // one change of the event kind
	}
	for i := range owned {
		e := &owned[i]
		e.Tenant = ""
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := tx.PutRaw(store.KindEvent, e.Key(), data); err != nil {
			return err
		}
	}
	return nil
}
