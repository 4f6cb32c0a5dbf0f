package server

import (
	"errors"
	"fmt"

	"github.com/arbiterhq/arbiter/internal/store"
)

// ErrTenantInUse is what every TenantInUseError is (errors.Is): a tenant
// still has objects that depend on it.
var ErrTenantInUse = errors.New("tenant in use")

// BlockerKind is the kind of object that keeps a tenant from being
// deleted.
type BlockerKind string

// The objects that block deleting a tenant, in the order they are
// checked.
const (
	BlockerChild       BlockerKind = "child tenant"
	BlockerWorkload    BlockerKind = "live workload"
	BlockerReservation BlockerKind = "reservation"
	BlockerPartition   BlockerKind = "partition"
)

// TenantInUseError names the first object that blocks deleting Tenant.
type TenantInUseError struct {
	Tenant string
	Kind   BlockerKind
	Name   string // the object's name (a workload's, not its key)
}

func (e *TenantInUseError) Error() string {
	switch e.Kind {
	case BlockerChild:
		return fmt.Sprintf("tenant %q has child tenant %q; delete it first", e.Tenant, e.Name)
	case BlockerWorkload:
		return fmt.Sprintf("tenant %q has live workload %q; cancel it first", e.Tenant, e.Name)
	}
	return fmt.Sprintf("tenant %q owns %s %q; delete it first", e.Tenant, e.Kind, e.Name)
}

// Is makes every TenantInUseError match ErrTenantInUse.
func (e *TenantInUseError) Is(target error) bool { return target == ErrTenantInUse }

// tenantDependents is what may depend on a tenant: the objects
// tenantDeleteBlocker looks at.
type tenantDependents struct {
	Tenants      []*store.Tenant
	Workloads    []*store.Workload
	Reservations []*store.Reservation
	Partitions   []*store.Partition
}

// tenantDeleteBlocker returns a *TenantInUseError naming the first object
// that keeps tenant name from being deleted, checked in this order: a
// child tenant, a live workload, a reservation, a partition; nil when
// nothing does. Objects of other tenants are ignored, so the lists may be
// wider than the tenant's own.
func tenantDeleteBlocker(name string, d tenantDependents) error {
	blocked := func(k BlockerKind, n string) error { return &TenantInUseError{Tenant: name, Kind: k, Name: n} }
	for _, t := range d.Tenants {
		if t.Parent == name {
			return blocked(BlockerChild, t.Name)
		}
	}
	for _, x := range d.Workloads {
		if x.Tenant == name && x.State.Live() {
			return blocked(BlockerWorkload, string(x.Spec.Name))
		}
	}
	for _, r := range d.Reservations {
		if r.Tenant == name {
			return blocked(BlockerReservation, r.Name)
		}
	}
	for _, p := range d.Partitions {
		if p.Tenant == name {
			return blocked(BlockerPartition, p.Name)
		}
	}
	return nil
}

// loadTenantDependents reads what may block deleting tenant name: every
// tenant (for children and partitions), the tenant's own workloads and
// reservations.
func loadTenantDependents(tx store.ReadTx, name string) (tenantDependents, error) {
	var d tenantDependents
	var err error
	if d.Tenants, err = store.List[store.Tenant](tx, ""); err != nil {
		return d, err
	}
	if d.Workloads, err = store.List[store.Workload](tx, name+"/"); err != nil {
		return d, err
	}
	if d.Reservations, err = store.List[store.Reservation](tx, name+"/"); err != nil {
		return d, err
	}
	d.Partitions, err = store.List[store.Partition](tx, "")
	return d, err
}

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
