package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BoltStore is a Store in one bbolt file: one bucket per kind plus a meta
// bucket with the revision counters. Commits are fsynced.
type BoltStore struct {
	db *bolt.DB

	// Group commit (Batch): writers queue here; one committer at a time
	// takes the whole queue into one transaction and one fsync.
	bmu        sync.Mutex
	queue      []*batchCall
	committing bool
	delay      time.Duration
	minBatch   int
	maxBatch   int
	// grown, while the committer waits for a small group to grow, is
	// closed by the writer that brings the queue to minBatch.
	grown chan struct{}

	observe atomic.Pointer[func(CommitStats)] // see ObserveCommits
}

type batchCall struct {
	fn     func(WriteTx) error
	done   chan error
	queued time.Time
}

// CommitStats describes one group commit of Batch.
type CommitStats struct {
	Writers int
	// Wait is how long the group's first writer waited for the commit to
	// start (for the commit before it, and for the group to grow).
	Wait time.Duration
	// Commit is the transaction: the writers' functions, bbolt's writes
	// and its fsyncs.
	Commit time.Duration
}

// ObserveCommits has fn called after every successful group commit, on
// the committer's goroutine (fn must be quick).
func (s *BoltStore) ObserveCommits(fn func(CommitStats)) { s.observe.Store(&fn) }

var metaBucket = []byte(KindMeta)

const revKey = "revision"

// BoltOptions tune OpenBolt.
type BoltOptions struct {
	// MaxBatchDelay is how long a group smaller than MinBatchSize waits
	// for more writers before it commits (0: commit at once); it commits as
	// soon as MinBatchSize are queued. Writers that arrive while a commit
	// is in flight share the next one anyway; the wait makes groups larger
	// at moderate rates, where commits would otherwise follow each other
	// with a few writers each and their fsyncs keep the disk and CPUs busy
	// (serve uses 1ms; see docs/server.md for what it changed).
	MaxBatchDelay time.Duration
	// MinBatchSize is the group size at which a commit stops waiting
	// (default 16).
	MinBatchSize int
	// MaxBatchSize bounds a group (default 1000).
	MaxBatchSize int
	// Timeout is how long to wait for another process's file lock.
	Timeout time.Duration
}

// OpenBolt opens or creates the store file at path.
func OpenBolt(path string, o *BoltOptions) (*BoltStore, error) {
	if o == nil {
		o = &BoltOptions{}
	}
	to := o.Timeout
	if to == 0 {
		to = 5 * time.Second
	}
	// As etcd does: the freelist is not written on every commit (it is
	// rebuilt when the file is opened), which saves pages per commit, and
	// a hashmap freelist; a large initial mmap avoids remapping (which
	// blocks readers) as the file grows.
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         to,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: 1 << 30,
	})
	if err != nil {
		return nil, fmt.Errorf("store: opening %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(metaBucket); err != nil {
			return err
		}
		for _, k := range Kinds {
			if _, err := tx.CreateBucketIfNotExists([]byte(k)); err != nil {
				return err
			}
		}
		bt := &boltTx{tx: tx}
		if bt.counter(indexVersionKey) < indexVersion {
			if err := rebuildIndexes(bt); err != nil {
				return err
			}
			bt.setCounter(indexVersionKey, indexVersion)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: initialising %s: %w", path, err)
	}
	st := &BoltStore{db: db, delay: max(o.MaxBatchDelay, 0), minBatch: o.MinBatchSize, maxBatch: o.MaxBatchSize}
	if st.minBatch <= 0 {
		st.minBatch = 16
	}
	if st.maxBatch <= 0 {
		st.maxBatch = 1000
	}
	return st, nil
}

// View implements Store.
func (s *BoltStore) View(ctx context.Context, fn func(ReadTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(func(tx *bolt.Tx) error { return fn(&boltTx{tx: tx}) })
}

// Update implements Store.
func (s *BoltStore) Update(ctx context.Context, fn func(WriteTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return fn(&boltTx{tx: tx}) })
}

// Batch implements Store with group commit. Writers that arrive while a
// commit is in flight wait for it to finish and then share the next one,
// so a group is as large as the load makes it; a group smaller than
// MinBatchSize first waits up to MaxBatchDelay for more. (bbolt's own
// Batch closes a group after a fixed delay whatever its size; when a
// commit takes longer than that, groups stay small and queue up one
// commit and one fsync each, and latency grows without bound at rates
// well below what one commit per group could carry.)
//
// A writer whose fn fails gets its error, and its changes are dropped: the
// others are committed without it, in a new transaction in which their fns
// run again. Batch returns only once the write is durable or failed; a
// cancelled ctx does not abandon a write already queued.
func (s *BoltStore) Batch(ctx context.Context, fn func(WriteTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &batchCall{fn: fn, done: make(chan error, 1), queued: time.Now()}
	s.bmu.Lock()
	s.queue = append(s.queue, c)
	if s.grown != nil && len(s.queue) >= s.minBatch {
		close(s.grown)
		s.grown = nil
	}
	if !s.committing {
		s.committing = true
		go s.commitLoop()
	}
	s.bmu.Unlock()
	return <-c.done
}

// commitLoop commits queued writers, a group per transaction, until the
// queue is empty.
func (s *BoltStore) commitLoop() {
	for {
		s.waitForGroup()
		s.bmu.Lock()
		n := min(len(s.queue), s.maxBatch)
		if n == 0 {
			s.committing = false
			s.queue = nil
			s.bmu.Unlock()
			return
		}
		calls := make([]*batchCall, n)
		copy(calls, s.queue)
		s.queue = s.queue[n:]
		s.bmu.Unlock()
		s.commitGroup(calls)
	}
}

// waitForGroup lets a group smaller than minBatch wait up to delay for
// more writers.
func (s *BoltStore) waitForGroup() {
	if s.delay <= 0 {
		return
	}
	s.bmu.Lock()
	if n := len(s.queue); n == 0 || n >= s.minBatch {
		s.bmu.Unlock()
		return
	}
	grown := make(chan struct{})
	s.grown = grown
	s.bmu.Unlock()
	t := time.NewTimer(s.delay)
	select {
	case <-grown:
	case <-t.C:
	}
	t.Stop()
	s.bmu.Lock()
	s.grown = nil
	s.bmu.Unlock()
}

// commitGroup runs the calls in one transaction; a call that fails is
// answered and taken out, and the rest run again.
func (s *BoltStore) commitGroup(calls []*batchCall) {
	for len(calls) > 0 {
		failed := -1
		var ferr error
		start := time.Now()
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i, c := range calls {
				if ferr = safeCall(c.fn, &boltTx{tx: tx}); ferr != nil {
					failed = i
					return ferr
				}
			}
			return nil
		})
		if failed >= 0 {
			calls[failed].done <- ferr
			calls = append(calls[:failed], calls[failed+1:]...)
			continue
		}
		if fn := s.observe.Load(); fn != nil && err == nil {
			(*fn)(CommitStats{Writers: len(calls), Wait: start.Sub(calls[0].queued), Commit: time.Since(start)})
		}
		for _, c := range calls {
			c.done <- err
		}
		return
	}
}

// safeCall turns a panic in fn into an error, so that one writer's bug
// cannot take down the committer and leave the others waiting.
func safeCall(fn func(WriteTx) error, tx WriteTx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store: panic in a batched write: %v", p)
		}
	}()
	return fn(tx)
}

// Close implements Store.
func (s *BoltStore) Close() error { return s.db.Close() }

// Path returns the file's path.
func (s *BoltStore) Path() string { return s.db.Path() }

type boltTx struct {
	tx *bolt.Tx
}

func (t *boltTx) counter(name string) int64 {
	v := t.tx.Bucket(metaBucket).Get([]byte(name))
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func (t *boltTx) setCounter(name string, v int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	// Put on a writable transaction's existing bucket only fails for
	// programming errors (empty or huge key).
	if err := t.tx.Bucket(metaBucket).Put([]byte(name), b[:]); err != nil {
		panic(err)
	}
}

func (t *boltTx) Revision() int64           { return t.counter(revKey) }
func (t *boltTx) KindRevision(k Kind) int64 { return t.counter(revKey + "/" + string(k)) }

func (t *boltTx) NextRevision(k Kind) int64 {
	r := t.counter(revKey) + 1
	t.setCounter(revKey, r)
	t.setCounter(revKey+"/"+string(k), r)
	return r
}

func (t *boltTx) bucket(k Kind) *bolt.Bucket {
	b := t.tx.Bucket([]byte(k))
	if b == nil {
		panic(fmt.Sprintf("store: unknown kind %q", k))
	}
	return b
}

func (t *boltTx) GetRaw(k Kind, key string) ([]byte, bool) {
	v := t.bucket(k).Get([]byte(key))
	return v, v != nil
}

func (t *boltTx) ScanRaw(k Kind, prefix, after string, fn func(string, []byte) bool) {
	c := t.bucket(k).Cursor()
	p := []byte(prefix)
	var key, val []byte
	if after != "" && after >= prefix {
		key, val = c.Seek([]byte(after))
		if key != nil && string(key) == after {
			key, val = c.Next()
		}
	} else {
		key, val = c.Seek(p)
	}
	for ; key != nil && bytes.HasPrefix(key, p); key, val = c.Next() {
		if !fn(string(key), val) {
			return
		}
	}
}

// scanRawBytes is ScanRaw over all of k's keys after after, the keys
// as bolt's bytes (valid for the transaction, like the values).
func (t *boltTx) scanRawBytes(k Kind, after string, fn func(key, data []byte) bool) {
	c := t.bucket(k).Cursor()
	var key, val []byte
	if after != "" {
		key, val = c.Seek([]byte(after))
		if key != nil && string(key) == after {
			key, val = c.Next()
		}
	} else {
		key, val = c.First()
	}
	for ; key != nil; key, val = c.Next() {
		if !fn(key, val) {
			return
		}
	}
}

func (t *boltTx) PutRaw(k Kind, key string, data []byte) error {
	b := t.bucket(k)
	if k == KindUsage || k == KindUsageOpen {
		// Usage keys mostly arrive in time order (appended at the end):
		// pages split full rather than half full, halving the file.
		b.FillPercent = 0.95
	}
	return b.Put([]byte(key), data)
}

func (t *boltTx) DeleteRaw(k Kind, key string) error {
	return t.bucket(k).Delete([]byte(key))
}
