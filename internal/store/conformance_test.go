package store

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// The conformance suite: the tests that take a testStore run against
// every backend (bbolt, and etcd on a real cluster), so that both keep
// one set of semantics. A backend-specific test (bbolt's file layout,
// etcd's fencing) opens its store itself.

// testStore is what the suite needs of a store.
type testStore interface {
	Store
	ObserveCommits(func(CommitStats))
}

// backend opens a fresh, empty store; reopen closes it and opens the
// same state again (a restart).
type backend struct {
	name string
	open func(t *testing.T) (st testStore, reopen func() testStore)
}

var backends = []backend{
	{"bbolt", openBoltBackend},
	{"etcd", openEtcdBackend},
}

// forEachStore runs fn as a subtest per backend.
func forEachStore(t *testing.T, fn func(t *testing.T, st testStore, reopen func() testStore)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			st, reopen := b.open(t)
			fn(t, st, reopen)
		})
	}
}

func openBoltBackend(t *testing.T) (testStore, func() testStore) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "arbiter.db")
	st, err := OpenBolt(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cur := st
	t.Cleanup(func() { cur.Close() })
	return st, func() testStore {
		cur.Close()
		var err error
		if cur, err = OpenBolt(path, nil); err != nil {
			t.Fatal(err)
		}
		return cur
	}
}

var (
	prefixes atomic.Int64
	runID    = time.Now().UnixNano() // keeps runs on one cluster apart
)

// openEtcdBackend opens a store under a prefix of its own on the
// package's shared etcd cluster.
func openEtcdBackend(t *testing.T) (testStore, func() testStore) {
	t.Helper()
	eps := sharedEtcd(t)
	prefix := fmt.Sprintf("/conformance/%d-%d/", runID, prefixes.Add(1))
	open := func() *EtcdStore {
		st, err := OpenEtcd(ctx, EtcdOptions{Endpoints: eps, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	cur := open()
	t.Cleanup(func() { cur.Close() })
	return cur, func() testStore {
		cur.Close()
		cur = open()
		return cur
	}
}
