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
//   - KindIdempotencyExpiry: RevKey(unix nanos of At)/tenant/key, in time
//     order, so that the pruner deletes the oldest without a scan of all;
//   - KindCount "idem/tenant": how many records the tenant holds, so that
//     a submission checks the tenant's bound without a scan.
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

func idemCountKey(tenant string) string { return "idem/" + tenant }

func idemExpiryKey(at time.Time, tenant, key string) string {
	return RevKey(at.UnixNano()) + "/" + scoped(tenant, key)
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

// PruneIdempotency deletes, oldest first, at most limit records made
// before cutoff (with their expiry entries and counts) and returns how
// many entries it removed. An expiry entry whose record is gone or newer
// is removed alone.
func PruneIdempotency(tx WriteTx, cutoff time.Time, limit int) (int, error) {
	type entry struct {
		key         string
		tenant, idk string
		at          time.Time
	}
	var doomed []entry
	var err error
	end := RevKey(cutoff.UnixNano())
	tx.ScanRaw(KindIdempotencyExpiry, "", "", func(ek string, _ []byte) bool {
		ts, rest, ok := strings.Cut(ek, "/")
		if !ok || ts >= end {
			return false
		}
		nanos, perr := ParseRevKey(ts)
		if perr != nil {
			err = fmt.Errorf("store: idempotency expiry entry %q: %w", ek, perr)
			return false
		}
		tenant, key := SplitKey(rest)
		doomed = append(doomed, entry{ek, tenant, key, time.Unix(0, nanos)})
		return len(doomed) < limit
	})
	if err != nil {
		return 0, err
	}
	for _, d := range doomed {
		r, err := GetIdempotency(tx, d.tenant, d.idk)
		if err != nil {
			return 0, err
		}
		if r != nil && r.At.UnixNano() == d.at.UnixNano() {
			if err := DeleteIdempotency(tx, r); err != nil {
				return 0, err
			}
			continue
		}
		if err := tx.DeleteRaw(KindIdempotencyExpiry, d.key); err != nil {
			return 0, err
		}
	}
	return len(doomed), nil
}

// IdempotencyExpired reports whether any record was made before cutoff
// (one key read: the pruner writes only when there is work).
func IdempotencyExpired(tx ReadTx, cutoff time.Time) bool {
	end, found := RevKey(cutoff.UnixNano()), false
	tx.ScanRaw(KindIdempotencyExpiry, "", "", func(ek string, _ []byte) bool {
		found = ek < end
		return false
	})
	return found
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
