package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestIdempotencyRecords: records, their time order and counts stay
// together through put, evict, prune and an index rebuild.
func TestIdempotencyRecords(t *testing.T) {
	st, _ := open(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(tenant, key string, at time.Time) {
		t.Helper()
		err := st.Update(ctx, func(tx WriteTx) error {
			return PutIdempotency(tx, &IdempotencyRecord{Tenant: tenant, Key: key, Fingerprint: "f", Workload: key, At: at})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	counts := func() (a, b int64) {
		st.View(ctx, func(tx ReadTx) error { a, b = IdempotencyKeys(tx, "a"), IdempotencyKeys(tx, "b"); return nil })
		return
	}
	put("a", "k1", t0)
	put("a", "k2", t0.Add(time.Hour))
	put("a", "k3", t0.Add(2*time.Hour))
	put("b", "k1", t0.Add(30*time.Minute)) // the same key, another tenant
	if err := st.Update(ctx, func(tx WriteTx) error {
		return PutIdempotency(tx, &IdempotencyRecord{Tenant: "a", Key: "k1", At: t0})
	}); !errors.Is(err, ErrExists) {
		t.Fatalf("a second k1 of a: %v, want ErrExists", err)
	}
	if err := st.Update(ctx, func(tx WriteTx) error {
		return PutIdempotency(tx, &IdempotencyRecord{Tenant: "a", Key: "x/y", At: t0})
	}); err == nil {
		t.Fatal("a key with a slash was stored")
	}
	if a, b := counts(); a != 3 || b != 1 {
		t.Fatalf("counts %d %d, want 3 1", a, b)
	}
	// Evicting takes a's oldest.
	if err := st.Update(ctx, func(tx WriteTx) error { return EvictOldestIdempotency(tx, "a") }); err != nil {
		t.Fatal(err)
	}
	st.View(ctx, func(tx ReadTx) error {
		if r, _ := GetIdempotency(tx, "a", "k1"); r != nil {
			t.Error("a's oldest key survived eviction")
		}
		if r, _ := GetIdempotency(tx, "b", "k1"); r == nil {
			t.Error("b's k1 went with a's")
		}
		if !IdempotencyExpired(tx, t0.Add(61*time.Minute)) || IdempotencyExpired(tx, t0.Add(30*time.Minute)) {
			t.Error("IdempotencyExpired is wrong")
		}
		return nil
	})
	// The counters survive an index rebuild.
	if err := st.Update(ctx, func(tx WriteTx) error { return rebuildIndexes(tx) }); err != nil {
		t.Fatal(err)
	}
	if a, b := counts(); a != 2 || b != 1 {
		t.Fatalf("after a rebuild: counts %d %d, want 2 1", a, b)
	}
	// Pruning before 1h30 takes a's k2 (1h) and b's k1 (30m), not a's k3.
	var n int
	if err := st.Update(ctx, func(tx WriteTx) error {
		var err error
		n, err = PruneIdempotency(tx, t0.Add(90*time.Minute), 100)
		return err
	}); err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2", n, err)
	}
	if a, b := counts(); a != 1 || b != 0 {
		t.Fatalf("after pruning: counts %d %d, want 1 0", a, b)
	}
	st.View(ctx, func(tx ReadTx) error {
		if r, _ := GetIdempotency(tx, "a", "k3"); r == nil {
			t.Error("a's k3 was pruned early")
		}
		if IdempotencyExpired(tx, t0.Add(90*time.Minute)) {
			t.Error("something expired is left")
		}
		return nil
	})
}
