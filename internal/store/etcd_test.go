package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdPair opens two stores on one prefix: two replicas of one state.
func etcdPair(t *testing.T, fa, fb func() (string, int64, bool)) (*EtcdStore, *EtcdStore) {
	t.Helper()
	eps := sharedEtcd(t)
	prefix := fmt.Sprintf("/etcdtest/%d-%d/", runID, prefixes.Add(1))
	open := func(f func() (string, int64, bool)) *EtcdStore {
		st, err := OpenEtcd(ctx, EtcdOptions{Endpoints: eps, Prefix: prefix, Fence: f})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	return open(fa), open(fb)
}

// waitFor polls cond until it holds or a minute passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func has(st Store, key string) bool {
	var ok bool
	st.View(ctx, func(tx ReadTx) error { _, ok = tx.GetRaw(KindWorkload, key); return nil })
	return ok
}

// TestEtcdReplicasFollow: what one replica commits, the other sees (and
// is told of); each reads its own writes at once.
func TestEtcdReplicasFollow(t *testing.T) {
	a, b := etcdPair(t, nil, nil)
	var told atomic.Int64
	b.OnChange(func(rev int64) { told.Store(rev) })
	if err := a.Update(ctx, func(tx WriteTx) error { return Put(tx, job("contoso", "x"), MustNotExist) }); err != nil {
		t.Fatal(err)
	}
	if !has(a, "contoso/x") {
		t.Fatal("the writer does not read its own write")
	}
	waitFor(t, "the other replica to see the write", func() bool { return has(b, "contoso/x") })
	if told.Load() == 0 {
		t.Error("OnChange was not called")
	}
	var ra, rb int64
	a.View(ctx, func(tx ReadTx) error { ra = tx.Revision(); return nil })
	b.View(ctx, func(tx ReadTx) error { rb = tx.Revision(); return nil })
	if ra != rb || ra != 1 {
		t.Errorf("store revisions %d and %d, want 1 on both", ra, rb)
	}
	// b deletes; a follows.
	if err := b.Update(ctx, func(tx WriteTx) error { return Delete(tx, KindWorkload, "contoso/x") }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the delete to reach the first replica", func() bool { return !has(a, "contoso/x") })
}

// TestEtcdNoLostUpdate: two replicas incrementing one counter at once
// (each read-modify-write in a transaction) lose no increment: a writer
// that computed from a stale state gets ErrConflict and retries.
func TestEtcdNoLostUpdate(t *testing.T) {
	a, b := etcdPair(t, nil, nil)
	const each = 40
	var wg sync.WaitGroup
	for _, st := range []*EtcdStore{a, b} {
		wg.Go(func() {
			for i := 0; i < each; {
				err := st.Update(ctx, func(tx WriteTx) error {
					putCounter(tx, "test/counter", getCounter(tx, "test/counter")+1)
					return nil
				})
				if errors.Is(err, ErrConflict) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				i++
			}
		})
	}
	wg.Wait()
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var n int64
	a.View(ctx, func(tx ReadTx) error { n = getCounter(tx, "test/counter"); return nil })
	if n != 2*each {
		t.Errorf("counter %d, want %d", n, 2*each)
	}
}

// TestEtcdFence: a replica whose fence says it is not the leader, or
// whose election key is gone (deposed), cannot write, and leaves nothing.
func TestEtcdFence(t *testing.T) {
	eps := sharedEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	lkey := fmt.Sprintf("/etcdtest/leader-%d-%d", runID, prefixes.Add(1))
	put, err := cli.Put(ctx, lkey, "me")
	if err != nil {
		t.Fatal(err)
	}
	var leading atomic.Bool
	leading.Store(true)
	created := put.Header.Revision
	fence := func() (string, int64, bool) { return lkey, created, leading.Load() }
	st, other := etcdPair(t, fence, nil)
	if err := st.Update(ctx, func(tx WriteTx) error { return Put(tx, job("t", "ok"), MustNotExist) }); err != nil {
		t.Fatalf("the leader's write: %v", err)
	}
	leading.Store(false)
	err = st.Update(ctx, func(tx WriteTx) error { return Put(tx, job("t", "refused"), MustNotExist) })
	if !errors.Is(err, ErrNotLeader) {
		t.Errorf("write after stepping down: %v, want ErrNotLeader", err)
	}
	// Deposed without knowing it: the key was deleted and made again by
	// someone else (a new leader); the stale fence still says yes.
	leading.Store(true)
	if _, err := cli.Delete(ctx, lkey); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, lkey, "new leader"); err != nil {
		t.Fatal(err)
	}
	for _, write := range []func(context.Context, func(WriteTx) error) error{st.Update, st.Batch} {
		err = write(ctx, func(tx WriteTx) error { return Put(tx, job("t", "deposed"), MustNotExist) })
		if !errors.Is(err, ErrNotLeader) {
			t.Errorf("write of a deposed leader: %v, want ErrNotLeader", err)
		}
	}
	if err := other.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*EtcdStore{st, other} {
		if has(st, "t/refused") || has(st, "t/deposed") || !has(st, "t/ok") {
			t.Error("a refused write is visible, or the accepted one is not")
		}
	}
}

// TestEtcdBatchTooLarge: a group commit larger than one etcd transaction
// may hold is committed writer by writer; a single writer too large for
// one transaction gets an error and writes nothing.
func TestEtcdBatchTooLarge(t *testing.T) {
	eps := sharedEtcd(t)
	st, err := OpenEtcd(ctx, EtcdOptions{Endpoints: eps, Prefix: fmt.Sprintf("/etcdtest/%d-%d/", runID, prefixes.Add(1)), MaxTxnOps: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var wg sync.WaitGroup
	errs := make([]error, 30)
	for i := range errs {
		wg.Go(func() {
			errs[i] = st.Batch(ctx, func(tx WriteTx) error { return Put(tx, job("t", fmt.Sprint("j", i)), MustNotExist) })
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	err = st.Update(ctx, func(tx WriteTx) error {
		for i := range 30 {
			if err := Put(tx, job("big", fmt.Sprint("j", i)), MustNotExist); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		t.Error("a transaction of 30 puts under MaxTxnOps 20 committed")
	}
	st.View(ctx, func(tx ReadTx) error {
		n := 0
		tx.ScanRaw(KindWorkload, "t/", "", func(string, []byte) bool { n++; return true })
		if n != 30 {
			t.Errorf("%d of 30 batched writers stored", n)
		}
		if _, ok := tx.GetRaw(KindWorkload, "big/j0"); ok {
			t.Error("part of the refused transaction is visible")
		}
		return nil
	})
}
