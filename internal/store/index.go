package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
)

// Indexes are kinds the store keeps itself, written with raw writes in the
// same transaction as the object they index (they take no revision):
//
//   - KindEventIndex: one key per event that names a tenant,
//     tenant/RevKey(seq), so that a tenant's reads of the event log touch
//     only its own events;
//   - KindLiveIndex: one key per live (Pending or Running) workload,
//     tenant/name, holding its stored size, and KindCount the number of
//     them and their bytes per tenant, so that a submission checks the
//     tenant's queue limits without a scan.
//
// Put and Delete maintain them; the pruner deletes events with
// DeleteEvent. A store written before they existed gets them built when
// it is opened (see indexVersion).
const (
	KindEventIndex Kind = "events-by-tenant"
	KindLiveIndex  Kind = "live-workloads"
	KindCount      Kind = "counts"
)

// indexVersion is the version of the indexes' layout; OpenBolt rebuilds
// them when the file records an older one.
const indexVersion = 1

const indexVersionKey = "index-version"

// indexed objects keep index entries, updated by Put after the object's
// write of size bytes.
type indexed interface {
	index(tx WriteTx, size int) error
}

// EventIndexKey is the key of an event in its tenant's index.
func EventIndexKey(tenant string, seq int64) string { return tenant + "/" + RevKey(seq) }

func (o *Event) index(tx WriteTx, _ int) error {
	if o.Tenant == "" {
		return nil
	}
	return tx.PutRaw(KindEventIndex, EventIndexKey(o.Tenant, o.Seq), []byte{1})
}

func (o *Workload) index(tx WriteTx, size int) error {
	return setLive(tx, o.Tenant, o.Key(), o.State.Live(), int64(size))
}

// setLive puts key (of size bytes) in or out of the live index, counting
// per tenant.
func setLive(tx WriteTx, tenant, key string, live bool, size int64) error {
	v, was := tx.GetRaw(KindLiveIndex, key)
	var old int64
	if was && len(v) == 8 {
		old = int64(binary.BigEndian.Uint64(v))
	}
	switch {
	case live:
		if !was || old != size {
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], uint64(size))
			if err := tx.PutRaw(KindLiveIndex, key, b[:]); err != nil {
				return err
			}
		}
		if !was {
			if err := addCount(tx, liveCountKey(tenant), 1); err != nil {
				return err
			}
		}
		return addCount(tx, liveBytesKey(tenant), size-old)
	case was:
		if err := tx.DeleteRaw(KindLiveIndex, key); err != nil {
			return err
		}
		if err := addCount(tx, liveCountKey(tenant), -1); err != nil {
			return err
		}
		return addCount(tx, liveBytesKey(tenant), -old)
	}
	return nil
}

// unindex removes the index entries of the object of kind k under key
// (Delete calls it).
func unindex(tx WriteTx, k Kind, key string) error {
	if k == KindWorkload {
		tenant, _ := SplitKey(key)
		return setLive(tx, tenant, key, false, 0)
	}
	if k == KindEvent {
		data, ok := tx.GetRaw(k, key)
		if !ok {
			return nil
		}
		var e struct {
			Seq    int64  `json:"seq"`
			Tenant string `json:"tenant"`
		}
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("store: decoding event %q: %w", key, err)
		}
		if e.Tenant != "" {
			return tx.DeleteRaw(KindEventIndex, EventIndexKey(e.Tenant, e.Seq))
		}
	}
	return nil
}

func liveCountKey(tenant string) string { return "live/" + tenant }
func liveBytesKey(tenant string) string { return "livebytes/" + tenant }

func count(tx ReadTx, key string) int64 {
	v, ok := tx.GetRaw(KindCount, key)
	if !ok || len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func addCount(tx WriteTx, key string, d int64) error {
	if d == 0 {
		return nil
	}
	n := count(tx, key) + d
	if n <= 0 {
		return tx.DeleteRaw(KindCount, key)
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	return tx.PutRaw(KindCount, key, b[:])
}

// LiveWorkloads returns how many live (Pending or Running) workloads the
// tenant has, from the counter Put keeps: no scan.
func LiveWorkloads(tx ReadTx, tenant string) int64 { return count(tx, liveCountKey(tenant)) }

// LiveBytes returns the stored size of the tenant's live workloads
// together, from the counter Put keeps.
func LiveBytes(tx ReadTx, tenant string) int64 { return count(tx, liveBytesKey(tenant)) }

// ScanTenantEvents calls fn with every event of the tenant after seq
// `after`, in sequence order, until fn returns false. It reads the
// tenant's index and only the events it names; data is only valid during
// the call.
func ScanTenantEvents(tx ReadTx, tenant string, after int64, fn func(seq int64, data []byte) bool) {
	prefix := tenant + "/"
	tx.ScanRaw(KindEventIndex, prefix, EventIndexKey(tenant, after), func(key string, _ []byte) bool {
		rk := strings.TrimPrefix(key, prefix)
		seq, err := ParseRevKey(rk)
		if err != nil {
			return true
		}
		data, ok := tx.GetRaw(KindEvent, rk)
		if !ok {
			return true // pruned in a transaction that kept its index entry: skip
		}
		return fn(seq, data)
	})
}

// DeleteEvent removes one event and its index entry (the pruner's raw
// delete: it takes no revision).
func DeleteEvent(tx WriteTx, seq int64, tenant string) error {
	if tenant != "" {
		if err := tx.DeleteRaw(KindEventIndex, EventIndexKey(tenant, seq)); err != nil {
			return err
		}
	}
	return tx.DeleteRaw(KindEvent, RevKey(seq))
}

// rebuildIndexes writes every index from the objects (a store written
// before the indexes existed, or by an older layout).
func rebuildIndexes(tx WriteTx) error {
	for _, k := range []Kind{KindEventIndex, KindLiveIndex, KindCount} {
		var keys []string
		tx.ScanRaw(k, "", "", func(key string, _ []byte) bool { keys = append(keys, key); return true })
		for _, key := range keys {
			if err := tx.DeleteRaw(k, key); err != nil {
				return err
			}
		}
	}
	var err error
	tx.ScanRaw(KindWorkload, "", "", func(key string, data []byte) bool {
		var w Workload
		if err = json.Unmarshal(data, &w); err != nil {
			err = fmt.Errorf("store: decoding workload %q: %w", key, err)
			return false
		}
		err = w.index(tx, len(data))
		return err == nil
	})
	if err != nil {
		return err
	}
	tx.ScanRaw(KindEvent, "", "", func(key string, data []byte) bool {
		var e Event
		if err = json.Unmarshal(data, &e); err != nil {
			err = fmt.Errorf("store: decoding event %q: %w", key, err)
			return false
		}
		err = e.index(tx, len(data))
		return err == nil
	})
	if err != nil {
		return err
	}
	return rebuildIdempotencyCounts(tx)
}

// DisownEvents makes every event of a tenant admin-only: its Tenant field
// is cleared and its index entry removed, so that no tenant token (a new
// tenant of the same name included) reads it again, while the admin keeps
// the audit trail. It reads only the tenant's index. The event kind takes
// one new revision when anything changed.
func DisownEvents(tx WriteTx, tenant string) (int, error) {
	var owned []Event
	var derr error
	ScanTenantEvents(tx, tenant, 0, func(_ int64, data []byte) bool {
		var e Event
		if derr = json.Unmarshal(data, &e); derr != nil {
			return false
		}
		owned = append(owned, e)
		return true
	})
	if derr != nil {
		return 0, derr
	}
	if len(owned) > 0 {
		tx.NextRevision(KindEvent)
	}
	for i := range owned {
		e := &owned[i]
		if err := tx.DeleteRaw(KindEventIndex, EventIndexKey(tenant, e.Seq)); err != nil {
			return 0, err
		}
		e.Tenant = ""
		data, err := json.Marshal(e)
		if err != nil {
			return 0, err
		}
		if err := tx.PutRaw(KindEvent, e.Key(), data); err != nil {
			return 0, err
		}
	}
	return len(owned), nil
}
