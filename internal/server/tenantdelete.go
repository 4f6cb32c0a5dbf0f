package server

import (
	"github.com/arbiterhq/arbiter/internal/store"
)

// deleteTenantHistory removes what a deleted tenant leaves behind once its
// live work, reservations, partitions and children are gone, so that a
// tenant created later under the same name sees none of it: its ended
// workloads (their specs, commands and env included) are deleted, and its
// events are disowned (store.DisownEvents: admin-only from then on, read
// through the tenant's index). Runs in deleteTenant's
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
	_, err = store.DisownEvents(tx, tenant)
	return err
}
