package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Errors. Callers check them with errors.Is.
var (
	ErrNotFound = errors.New("store: not found")
	ErrExists   = errors.New("store: already exists")
	// ErrConflict: the object or the state a change was computed from has
	// changed since (optimistic concurrency).
	ErrConflict = errors.New("store: conflict")
	ErrClosed   = errors.New("store: closed")
)

// Kind names a type of object; each kind is its own key space.
type Kind string

// Kinds.
const (
	KindTenant      Kind = "tenants"
	KindNode        Kind = "nodes"
	KindReservation Kind = "reservations"
	KindWorkload    Kind = "workloads"
	KindPolicy      Kind = "policies"
	KindFiring      Kind = "firings"
	KindToken       Kind = "tokens"
	KindEvent       Kind = "events"
	KindSetting     Kind = "settings"
	KindPartition   Kind = "partitions"
)

// KindMeta is the store's own bucket of counters (the store-wide and
// per-kind revisions, index versions), each an 8-byte big-endian integer.
// It is not in Kinds; snapshots and migration copy it raw with the rest.
const KindMeta Kind = "meta"

// Kinds lists every kind, in a fixed order.
var Kinds = []Kind{KindTenant, KindNode, KindReservation, KindWorkload, KindPolicy, KindFiring, KindToken, KindEvent, KindSetting, KindPartition,
	KindEventIndex, KindLiveIndex, KindCount, KindIdempotency, KindIdempotencyExpiry, KindUsage, KindUsageOpen, KindUsageTotals, KindUsageTuples}

func (k Kind) String() string { return string(k) }

// Store runs transactions over the state.
type Store interface {
	// View runs fn in a read-only transaction over a consistent snapshot.
	View(ctx context.Context, fn func(ReadTx) error) error
	// Update runs fn in a read-write transaction, alone; the change is
	// durable when Update returns nil. An error from fn rolls back. fn
	// must only touch the transaction: on a shared store (etcd) it runs
	// again when another replica committed meanwhile.
	Update(ctx context.Context, fn func(WriteTx) error) error
	// Batch is Update for many concurrent small writers: functions are
	// grouped into one commit. fn may run more than once (when a function
	// of its group fails the group is retried one by one), so it must only
	// touch the transaction.
	Batch(ctx context.Context, fn func(WriteTx) error) error
	Close() error
}

// ReadTx reads raw values. Most callers use Get, List and Revision.
type ReadTx interface {
	// Revision is the store-wide revision: the revision of the last write.
	Revision() int64
	// KindRevision is the revision of the last write to any object of k.
	KindRevision(k Kind) int64
	// GetRaw returns the value under key, or ok false.
	GetRaw(k Kind, key string) (data []byte, ok bool)
	// ScanRaw calls fn for every key with the prefix, in key order, until
	// fn returns false. data is only valid during the call.
	ScanRaw(k Kind, prefix, after string, fn func(key string, data []byte) bool)
}

// WriteTx also writes raw values. Writes through Put and Delete take a
// new revision each; raw writes do not.
type WriteTx interface {
	ReadTx
	PutRaw(k Kind, key string, data []byte) error
	DeleteRaw(k Kind, key string) error
	// NextRevision allocates the next store-wide revision and records it
	// as the revision of kind k.
	NextRevision(k Kind) int64
}

// Meta is what the store keeps about every object.
type Meta struct {
	// Created is the revision that created the object.
	Created int64 `json:"created_revision"`
	// Revision is the revision of the object's last change.
	Revision int64 `json:"revision"`
}

// Object is a stored value.
type Object interface {
	Kind() Kind
	Key() string
	meta() *Meta
}

// Expectations for Put.
const (
	// Any writes whatever is there.
	Any int64 = -1
	// MustNotExist fails with ErrExists when the key is taken.
	MustNotExist int64 = 0
)

// Get reads one object.
func Get[T any, PT interface {
	*T
	Object
}](tx ReadTx, key string) (PT, error) {
	var zero PT
	data, ok := tx.GetRaw(zero.Kind(), key)
	if !ok {
		return nil, fmt.Errorf("%w: %s %q", ErrNotFound, zero.Kind(), key)
	}
	v := PT(new(T))
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("store: decoding %s %q: %w", zero.Kind(), key, err)
	}
	return v, nil
}

// List reads every object of a kind whose key has the prefix, in key order.
func List[T any, PT interface {
	*T
	Object
}](tx ReadTx, prefix string) ([]PT, error) {
	var zero PT
	type raw struct {
		key  string
		data []byte // valid while tx is
	}
	var rs []raw
	tx.ScanRaw(zero.Kind(), prefix, "", func(key string, data []byte) bool {
		rs = append(rs, raw{key, data})
		return true
	})
	out := make([]PT, len(rs))
	errs := make([]error, len(rs))
	decode := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := PT(new(T)) // its own allocation: callers keep some objects, not all
			if e := json.Unmarshal(rs[i].data, v); e != nil {
				errs[i] = fmt.Errorf("store: decoding %s %q: %w", zero.Kind(), rs[i].key, e)
				continue
			}
			out[i] = v
		}
	}
	// A long list (a restart reads every stored workload) is decoded on
	// every core, in order-preserving chunks.
	if p := runtime.GOMAXPROCS(0); len(rs) >= parallelDecode && p > 1 {
		var wg sync.WaitGroup
		chunk := (len(rs) + p - 1) / p
		for lo := 0; lo < len(rs); lo += chunk {
			wg.Go(func() { decode(lo, min(len(rs), lo+chunk)) })
		}
		wg.Wait()
	} else {
		decode(0, len(rs))
	}
	for _, e := range errs {
		if e != nil {
			return nil, e // the first in key order
		}
	}
	return out, nil
}

// parallelDecode is the length from which List decodes on every core.
const parallelDecode = 4096

// Put writes obj when the stored revision is expect (Any: whatever is
// there; MustNotExist: nothing). It sets obj's Meta to the new revision.
func Put(tx WriteTx, obj Object, expect int64) error {
	k, key := obj.Kind(), obj.Key()
	if key == "" {
		return fmt.Errorf("store: %s with an empty key", k)
	}
	m := obj.meta()
	var old Meta
	if data, ok := tx.GetRaw(k, key); ok {
		var h struct {
			Meta Meta `json:"meta"`
		}
		if err := json.Unmarshal(data, &h); err != nil {
			return fmt.Errorf("store: decoding %s %q: %w", k, key, err)
		}
		old = h.Meta
		if expect == MustNotExist {
			return fmt.Errorf("%w: %s %q", ErrExists, k, key)
		}
	} else if expect > 0 {
		return fmt.Errorf("%w: %s %q was deleted", ErrConflict, k, key)
	}
	if expect > 0 && old.Revision != expect {
		return fmt.Errorf("%w: %s %q is at revision %d, not %d", ErrConflict, k, key, old.Revision, expect)
	}
	rev := tx.NextRevision(k)
	m.Revision = rev
	m.Created = old.Created
	if m.Created == 0 {
		m.Created = rev
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("store: encoding %s %q: %w", k, key, err)
	}
	if err := tx.PutRaw(k, key, data); err != nil {
		return err
	}
	if ix, ok := obj.(indexed); ok {
		return ix.index(tx, len(data))
	}
	return nil
}

// Delete removes an object; ErrNotFound when absent.
func Delete(tx WriteTx, k Kind, key string) error {
	if _, ok := tx.GetRaw(k, key); !ok {
		return fmt.Errorf("%w: %s %q", ErrNotFound, k, key)
	}
	tx.NextRevision(k)
	if err := unindex(tx, k, key); err != nil {
		return err
	}
	return tx.DeleteRaw(k, key)
}

// RevKey formats a revision as a key that sorts numerically.
func RevKey(rev int64) string { return fmt.Sprintf("%016x", rev) }

// ParseRevKey is RevKey's inverse.
func ParseRevKey(s string) (int64, error) { return strconv.ParseInt(s, 16, 64) }

// scoped joins a tenant and a name into a key.
func scoped(tenant, name string) string { return tenant + "/" + name }

// SplitKey splits a tenant-scoped key.
func SplitKey(key string) (tenant, name string) {
	tenant, name, _ = strings.Cut(key, "/")
	return tenant, name
}
