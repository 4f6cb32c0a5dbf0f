package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Idempotency keys. A submission that carries a key records it, in the
// same transaction as the workload it creates, so that a retry of that
// submission (the same key, the same tenant) finds the workload instead
// of creating a second one. The records are raw values (they take no
// revision):
//
//   - KindIdempotency: tenant/key → an IdempotencyRecord;
//   - KindIdempotencyExpiry: tenant/RevKey(unix nanos of At)/key, each
//     tenant's keys in time order, so that the pruner and the bound
//     (EvictOldestIdempotency) find the oldest without a scan of all;
//   - KindCount "idem/tenant": how many records the tenant holds, so that
//     a submission checks the tenant's bound without a scan, and the
//     pruner finds the tenants that hold any.
//
// PutIdempotency and DeleteIdempotency keep the three together.
const (
	KindIdempotency       Kind = "idempotency-keys"
	KindIdempotencyExpiry Kind = "idempotency-expiry"
)

// IdempotencyRecord is what a key remembers of the submission that
// created it.
type IdempotencyRecord struct {
	Tenant string `json:"tenant"`
	Key    string `json:"key"`
	// Fingerprint identifies the request body (a hash of it).
	Fingerprint string `json:"fingerprint"`
	// Workload is the name of the workload created, WorkloadCreated its
	// creation revision (a later workload of the same name is another).
	Workload        string `json:"workload"`
	WorkloadCreated int64  `json:"workload_created"`
	// TenantCreated is the tenant's creation revision: a tenant deleted
	// and created again under the same name does not inherit the keys.
	TenantCreated int64     `json:"tenant_created"`
	At            time.Time `json:"at"`
}

const idemCountPrefix = "idem/"

func idemCountKey(tenant string) string { return idemCountPrefix + tenant }

func idemExpiryKey(at time.Time, tenant, key string) string {
	return tenant + "/" + RevKey(at.UnixNano()) + "/" + key
}

// GetIdempotency returns the tenant's record of key, nil when there is none.
func GetIdempotency(tx ReadTx, tenant, key string) (*IdempotencyRecord, error) {
	data, ok := tx.GetRaw(KindIdempotency, scoped(tenant, key))
	if !ok {
		return nil, nil
	}
	var r IdempotencyRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("store: decoding idempotency key %q of %q: %w", key, tenant, err)
	}
	return &r, nil
}

// IdempotencyKeys returns how many keys the tenant holds (no scan).
func IdempotencyKeys(tx ReadTx, tenant string) int64 { return count(tx, idemCountKey(tenant)) }

// PutIdempotency records r; ErrExists when the tenant holds the key.
func PutIdempotency(tx WriteTx, r *IdempotencyRecord) error {
	if r.Tenant == "" || r.Key == "" || strings.Contains(r.Key, "/") {
		return fmt.Errorf("store: idempotency key %q of tenant %q: empty or with a slash", r.Key, r.Tenant)
	}
	k := scoped(r.Tenant, r.Key)
	if _, ok := tx.GetRaw(KindIdempotency, k); ok {
		return fmt.Errorf("%w: idempotency key %q of %q", ErrExists, r.Key, r.Tenant)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := tx.PutRaw(KindIdempotency, k, data); err != nil {
		return err
	}
	if err := tx.PutRaw(KindIdempotencyExpiry, idemExpiryKey(r.At, r.Tenant, r.Key), []byte{1}); err != nil {
		return err
	}
	return addCount(tx, idemCountKey(r.Tenant), 1)
}

// DeleteIdempotency removes r (as read by GetIdempotency or
// ExpiredIdempotency) with its expiry entry and count.
func DeleteIdempotency(tx WriteTx, r *IdempotencyRecord) error {
	k := scoped(r.Tenant, r.Key)
	if err := tx.DeleteRaw(KindIdempotencyExpiry, idemExpiryKey(r.At, r.Tenant, r.Key)); err != nil {
		return err
	}
	if _, ok := tx.GetRaw(KindIdempotency, k); !ok {
		return nil
	}
	if err := tx.DeleteRaw(KindIdempotency, k); err != nil {
		return err
	}
	return addCount(tx, idemCountKey(r.Tenant), -1)
}

// idemEntry is one expiry entry.
type idemEntry struct {
	raw         string // the entry's key
	tenant, key string
	nanos       int64
}

// oldestIdempotency calls fn with the tenant's expiry entries, oldest
// first, until fn returns false.
func oldestIdempotency(tx ReadTx, tenant string, fn func(idemEntry) bool) error {
	var err error
	prefix := tenant + "/"
	tx.ScanRaw(KindIdempotencyExpiry, prefix, "", func(ek string, _ []byte) bool {
		ts, key, ok := strings.Cut(strings.TrimPrefix(ek, prefix), "/")
		nanos, perr := ParseRevKey(ts)
		if !ok || perr != nil {
			err = fmt.Errorf("store: malformed idempotency expiry entry %q", ek)
			return false
		}
		return fn(idemEntry{ek, tenant, key, nanos})
	})
	return err
}

// idemTenants returns the tenants that hold keys, from their counters.
func idemTenants(tx ReadTx) []string {
	var out []string
	tx.ScanRaw(KindCount, idemCountPrefix, "", func(k string, _ []byte) bool {
		out = append(out, strings.TrimPrefix(k, idemCountPrefix))
		return true
	})
	return out
}

// deleteEntry removes an expiry entry and, when its record is the one it
// was written for, the record (an entry whose record is gone or newer is
// removed alone).
func deleteEntry(tx WriteTx, e idemEntry) error {
	r, err := GetIdempotency(tx, e.tenant, e.key)
	if err != nil {
		return err
	}
	if r != nil && r.At.UnixNano() == e.nanos {
		return DeleteIdempotency(tx, r)
	}
	return tx.DeleteRaw(KindIdempotencyExpiry, e.raw)
}

// EvictOldestIdempotency deletes the tenant's oldest key (a tenant at its
// bound forgets the oldest first).
func EvictOldestIdempotency(tx WriteTx, tenant string) error {
	var oldest *idemEntry
	if err := oldestIdempotency(tx, tenant, func(e idemEntry) bool { oldest = &e; return false }); err != nil || oldest == nil {
		return err
	}
	return deleteEntry(tx, *oldest)
}

// PruneIdempotency deletes, oldest first per tenant, at most limit keys
// made before cutoff (with their expiry entries and counts) and returns
// how many entries it removed.
func PruneIdempotency(tx WriteTx, cutoff time.Time, limit int) (int, error) {
	var doomed []idemEntry
	end := cutoff.UnixNano()
	for _, tenant := range idemTenants(tx) {
		err := oldestIdempotency(tx, tenant, func(e idemEntry) bool {
			if e.nanos >= end {
				return false
			}
			doomed = append(doomed, e)
			return len(doomed) < limit
		})
		if err != nil {
			return 0, err
		}
		if len(doomed) >= limit {
			break
		}
	}
	for _, e := range doomed {
		if err := deleteEntry(tx, e); err != nil {
			return 0, err
		}
	}
	return len(doomed), nil
}

// IdempotencyExpired reports whether any key was made before cutoff (one
// read per tenant holding keys: the pruner writes only when there is
// work).
func IdempotencyExpired(tx ReadTx, cutoff time.Time) bool {
	end, found := cutoff.UnixNano(), false
	for _, tenant := range idemTenants(tx) {
		oldestIdempotency(tx, tenant, func(e idemEntry) bool { found = e.nanos < end; return false })
		if found {
			return true
		}
	}
	return false
}

// rebuildIdempotencyCounts counts every tenant's records again
// (rebuildIndexes clears the counters).
func rebuildIdempotencyCounts(tx WriteTx) error {
	n := map[string]int64{}
	tx.ScanRaw(KindIdempotency, "", "", func(k string, _ []byte) bool {
		tenant, _ := SplitKey(k)
		n[tenant]++
		return true
	})
	for tenant, c := range n {
		if err := addCount(tx, idemCountKey(tenant), c); err != nil {
			return err
		}
	}
	return nil
}
