package server

import "github.com/arbiterhq/arbiter/internal/store"

// deleteTenantHistory removes what a deleted tenant leaves behind once its
// live work, reservations, partitions and children are gone: its ended
// workloads (their specs, commands and env included) and its events, so
// that a tenant created later under the same name sees none of it. Runs in
// deleteTenant's transaction.
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
	return deleteTenantEvents(tx, tenant)
}

// deleteTenantEvents removes the events of a tenant: those with Tenant set
// to it, which its tokens could read (admin-only events, Tenant "", stay as
// the audit trail). It scans the whole log: tenant deletion is a rare admin
// operation (a per-tenant event index would make this a prefix scan).
func deleteTenantEvents(tx store.WriteTx, tenant string) error {
	var keys []string
	var derr error
	tx.ScanRaw(store.KindEvent, "", "", func(key string, data []byte) bool {
		var e store.Event
		if derr = jsonUnmarshal(data, &e); derr != nil {
			return false
		}
		if e.Tenant == tenant {
			keys = append(keys, key)
		}
		return true
	})
	if derr != nil {
		return derr
	}
	if len(keys) > 0 {
		tx.NextRevision(store.KindEvent) // one change of the event kind
	}
	for _, k := range keys {
		if err := tx.DeleteRaw(store.KindEvent, k); err != nil {
			return err
		}
	}
	return nil
}
