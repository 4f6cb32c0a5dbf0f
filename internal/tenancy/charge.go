package tenancy

import (
	"errors"
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// Quota charging: the one definition of what counts against which quota
// entry, shared by the scheduler's limit checks and the server's usage
// report (so that the two never disagree).
//
//   - A use of model m in region r by tenant t counts against every entry
//     on the path from t to the root whose model is m and whose region is r
//     or all regions (Charged). A tenant with both an eastus entry and an
//     all-regions entry is charged on both.
//   - Running work counts while it runs, except work running on its own
//     reservation: the reservation already counts.
//   - An active reservation counts its whole capacity (Count machines × the
//     SKU's GPUs, model = the SKU's GPU model, region = its region) against
//     its owner's entries, whether or not work runs on it, as a cloud's
//     capacity reservation consumes quota. Reserved capacity counts toward
//     limits only: guarantees and lending are about the shared pool, and a
//     reservation is a separate promise on machines of its own.

// Ref names one quota entry: Tree.Tenants[Tenant].Quotas[Entry].
type Ref struct{ Tenant, Entry int }

// Charged returns the quota entries charged when tenant i uses k (a model
// in one region): every entry on the path from i to the root whose model is
// k.Model and whose region is k.Region or all regions, leaf first.
func (t *Tree) Charged(i int, k Key) []Ref {
	var out []Ref
	for _, a := range t.Path(i) {
		for j, q := range t.Tenants[a].Quotas {
			if q.Key.Model == k.Model && (q.Key.Region == "" || q.Key.Region == k.Region) {
				out = append(out, Ref{a, j})
			}
		}
	}
	return out
}

// Ledger holds an amount per quota entry: Ledger[tenant][entry].
type Ledger [][]resource.MilliGPU

// NewLedger returns a zero ledger shaped like the tree.
func NewLedger(t *Tree) Ledger {
	l := make(Ledger, len(t.Tenants))
	for i, ten := range t.Tenants {
		l[i] = make([]resource.MilliGPU, len(ten.Quotas))
	}
	return l
}

// Add charges amt to each entry of refs.
func (l Ledger) Add(refs []Ref, amt resource.MilliGPU) {
	for _, r := range refs {
		l[r.Tenant][r.Entry] = l[r.Tenant][r.Entry].Add(amt)
	}
}

// Sub refunds amt from each entry of refs.
func (l Ledger) Sub(refs []Ref, amt resource.MilliGPU) {
	for _, r := range refs {
		l[r.Tenant][r.Entry] = l[r.Tenant][r.Entry].Sub(amt)
	}
}

// At returns the amount of one entry.
func (l Ledger) At(r Ref) resource.MilliGPU { return l[r.Tenant][r.Entry] }

// Capacity returns what the reservation holds: its model and region, and
// Count × the SKU's GPUs. ok is false when the catalog lacks the SKU.
func (r *Reservation) Capacity(cat *fleet.Catalog) (Key, resource.MilliGPU, bool) {
	sku, ok := cat.SKU(r.SKU)
	if !ok {
		return Key{}, 0, false
	}
	return Key{Model: sku.Model, Region: r.Region}, resource.GPUs(sku.GPUs * r.Count), true
}

// ChargeReservations adds, for each reservation active at now whose owner
// is in the tree, its capacity to the owner's charged entries.
func (t *Tree) ChargeReservations(l Ledger, rs []Reservation, cat *fleet.Catalog, now time.Time) {
	for i := range rs {
		r := &rs[i]
		if !r.Active(now) {
			continue
		}
		t.chargeReservation(l, r, cat)
	}
}

func (t *Tree) chargeReservation(l Ledger, r *Reservation, cat *fleet.Catalog) {
	owner, ok := t.Lookup(r.Owner)
	if !ok {
		return
	}
	k, amt, ok := r.Capacity(cat)
	if !ok {
		return
	}
	l.Add(t.Charged(owner, k), amt)
}

// ChargeUse charges amt of k, used by the named tenant, to its entries. It
// reports false (charging nothing) for a tenant not in the tree.
func (t *Tree) ChargeUse(l Ledger, tenant string, k Key, amt resource.MilliGPU) bool {
	i, ok := t.Lookup(tenant)
	if ok {
		l.Add(t.Charged(i, k), amt)
	}
	return ok
}

// Overlaps reports whether r and o are both active at some instant (a zero
// Start or End is unbounded on that side).
func (r *Reservation) Overlaps(o *Reservation) bool {
	before := func(end, start time.Time) bool { // end ≤ start, unbounded when zero
		return !end.IsZero() && !start.IsZero() && !end.After(start)
	}
	return !before(r.End, o.Start) && !before(o.End, r.Start)
}

// OverLimitError is returned when reserving capacity would take a quota
// entry above its limit.
type OverLimitError struct {
	Tenant   string // the tenant whose entry is exceeded (the owner or an ancestor)
	Key      Key    // the entry's key (Region "" for all regions)
	Limit    resource.MilliGPU
	Running  resource.MilliGPU // running work charged to the entry, outside reservations
	Reserved resource.MilliGPU // other reservations of the subtree that overlap in time
	Asks     resource.MilliGPU // what the reservation adds
}

func (e *OverLimitError) Error() string {
	where := "all regions"
	if e.Key.Region != "" {
		where = e.Key.Region
	}
	return fmt.Sprintf("tenant %s limit %v %s in %s would be exceeded: %v running + %v reserved + %v asked = %v",
		e.Tenant, e.Limit, e.Key.Model, where, e.Running, e.Reserved, e.Asks, e.Running.Add(e.Reserved).Add(e.Asks))
}

// ErrOverLimit matches every *OverLimitError with errors.Is.
var ErrOverLimit = errors.New("tenancy: quota limit exceeded")

// Is makes errors.Is(err, ErrOverLimit) true.
func (e *OverLimitError) Is(target error) bool { return target == ErrOverLimit }

// AdmitReservation checks that r (new, or grown to its new Count) fits
// its owner's limits at every level: running work charged to each entry
// now (running), plus every other reservation in others that overlaps r in
// time (the owner's and its relatives', wherever they are charged), plus r
// itself. others must not include r. It returns an *OverLimitError naming
// the first entry exceeded, or nil.
func (t *Tree) AdmitReservation(r *Reservation, others []Reservation, running Ledger, cat *fleet.Catalog) error {
	owner, ok := t.Lookup(r.Owner)
	if !ok {
		return nil
	}
	k, amt, ok := r.Capacity(cat)
	if !ok {
		return nil
	}
	reserved := NewLedger(t)
	for i := range others {
		if o := &others[i]; o.Overlaps(r) {
			t.chargeReservation(reserved, o, cat)
		}
	}
	for _, ref := range t.Charged(owner, k) {
		q := t.Tenants[ref.Tenant].Quotas[ref.Entry]
		if q.Limit == Unlimited {
			continue
		}
		if run, res := running.At(ref), reserved.At(ref); run.Add(res).Add(amt) > q.Limit {
			return &OverLimitError{Tenant: t.Tenants[ref.Tenant].Name, Key: q.Key, Limit: q.Limit, Running: run, Reserved: res, Asks: amt}
		}
	}
	return nil
}
