package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errRaced: another writer committed between the state a transaction
// read and its commit.
var errRaced = fmt.Errorf("%w: the store changed during the transaction", ErrConflict)

// ErrUnavailable: the store could not be reached; a write's outcome is
// unknown (retry it idempotently).
var ErrUnavailable = errors.New("store: unavailable")

// ErrNotLeader: the write was refused because this replica does not hold
// the leadership its store is fenced on (see EtcdOptions.Fence).
var ErrNotLeader = errors.New("store: not the leader")

// EtcdStore is a Store on etcd v3. Every bucket of the bbolt layout is a
// key range under the prefix (PREFIX b/KIND/KEY), and one more key,
// PREFIX commit, is written by every transaction (its value: the fence
// key the transaction was conditioned on, "" for none).
//
// The store keeps the whole range in memory, as copy-on-write B-trees,
// fed by a watch: View runs on an immutable snapshot of that mirror and
// never waits for etcd. Update and Batch run their functions on a clone
// of the mirror, then commit the changes as one etcd transaction
// conditioned on the commit key's revision being the one the clone was
// made from (so no other writer got in between) and, when a fence is
// set, on this replica still holding the leadership (so a deposed
// leader cannot write). The committed clone becomes the mirror before
// Update returns, so a writer reads its own writes.
type EtcdStore struct {
	cli           *clientv3.Client
	own           bool // cli was made by OpenEtcd and is closed with the store
	prefix        string
	fence         func() (key string, rev int64, ok bool)
	maxOps        int
	commitTimeout time.Duration

	mu      sync.Mutex // guards cur and changed
	cur     *mirror
	changed chan struct{} // closed and replaced at every new mirror

	wmu sync.Mutex // one writer at a time

	bmu        sync.Mutex
	queue      []*batchCall
	committing bool

	observe  atomic.Pointer[func(CommitStats)]
	onChange atomic.Pointer[func(rev int64)]

	cancel context.CancelFunc
	done   chan struct{}
}

// EtcdOptions configure OpenEtcd.
type EtcdOptions struct {
	// Endpoints of the etcd cluster (ignored when Client is set).
	Endpoints []string
	// Client, when set, is used instead of a new one (and not closed).
	Client *clientv3.Client
	// Prefix of every key (default "/arbiter/").
	Prefix string
	// DialTimeout bounds the first connection (default 5s).
	DialTimeout time.Duration
	// Fence, when set, is asked before every commit: the commit is made
	// only while the key still has creation revision rev (an election
	// key: see internal/cluster). ok false refuses the write at once.
	Fence func() (key string, rev int64, ok bool)
	// CommitTimeout bounds one commit (default 2s). A proposal lost with
	// a dying etcd leader waits out etcd's own request timeout (5s and
	// more) before it fails; cut short, the write is reported unavailable
	// (its outcome unknown, as any lost answer) and the writers behind it
	// move on to the new etcd leader.
	CommitTimeout time.Duration
	// MaxTxnOps is the etcd cluster's --max-txn-ops; a group commit
	// larger than that is split between its writers (default 10000).
	MaxTxnOps int
}

type kv struct {
	key string
	val []byte
}

func kvLess(a, b kv) bool { return a.key < b.key }

// mirror is one consistent state of the range: never changed once
// published.
type mirror struct {
	rev       int64 // etcd revision it reflects
	commitRev int64 // mod revision of the commit key (0: none yet)
	buckets   map[Kind]*btree.BTreeG[kv]
}

func newMirror() *mirror {
	m := &mirror{buckets: map[Kind]*btree.BTreeG[kv]{}}
	for _, k := range append(Kinds[:len(Kinds):len(Kinds)], KindMeta) {
		m.buckets[k] = btree.NewG(32, kvLess)
	}
	return m
}

func (m *mirror) clone() *mirror {
	c := &mirror{rev: m.rev, commitRev: m.commitRev, buckets: make(map[Kind]*btree.BTreeG[kv], len(m.buckets))}
	for k, t := range m.buckets {
		c.buckets[k] = t.Clone()
	}
	return c
}

func (m *mirror) bucket(k Kind) *btree.BTreeG[kv] {
	t := m.buckets[k]
	if t == nil {
		panic(fmt.Sprintf("store: unknown kind %q", k))
	}
	return t
}

// OpenEtcd connects to etcd, reads the whole range into memory and
// starts following it.
func OpenEtcd(ctx context.Context, o EtcdOptions) (*EtcdStore, error) {
	if o.Prefix == "" {
		o.Prefix = "/arbiter/"
	}
	if !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.MaxTxnOps <= 0 {
		o.MaxTxnOps = 10000
	}
	if o.CommitTimeout <= 0 {
		o.CommitTimeout = 2 * time.Second
	}
	s := &EtcdStore{cli: o.Client, prefix: o.Prefix, fence: o.Fence, maxOps: o.MaxTxnOps, commitTimeout: o.CommitTimeout, changed: make(chan struct{}), done: make(chan struct{})}
	if s.cli == nil {
		if len(o.Endpoints) == 0 {
			return nil, errors.New("store: etcd: no endpoints")
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: o.Endpoints, DialTimeout: o.DialTimeout, Context: ctx})
		if err != nil {
			return nil, fmt.Errorf("store: etcd: %w", err)
		}
		s.cli, s.own = cli, true
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	m, err := s.load(lctx)
	cancel()
	if err != nil {
		s.closeClient()
		return nil, err
	}
	s.cur = m
	wctx, wcancel := context.WithCancel(context.Background())
	s.cancel = wcancel
	go s.follow(wctx)
	if m.commitRev == 0 {
		// A new store: set its index version, as OpenBolt does. Several
		// replicas may race here; the commit key lets one win and the
		// others see its write.
		err := s.commit(ctx, false, func(tx WriteTx) error {
			putCounter(tx, indexVersionKey, indexVersion)
			return nil
		})
		if err != nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNotLeader) {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func (s *EtcdStore) closeClient() {
	if s.own {
		s.cli.Close()
	}
}

// Client returns the etcd client the store uses.
func (s *EtcdStore) Client() *clientv3.Client { return s.cli }

// Prefix returns the prefix of the store's keys.
func (s *EtcdStore) Prefix() string { return s.prefix }

func (s *EtcdStore) commitKey() string { return s.prefix + "commit" }

func (s *EtcdStore) bucketKey(k Kind, key string) string {
	return s.prefix + "b/" + string(k) + "/" + key
}

// parseKey splits an etcd key of the range into its bucket and key; ok
// false for the commit key and anything else.
func (s *EtcdStore) parseKey(full []byte) (Kind, string, bool) {
	rest, ok := bytes.CutPrefix(full, []byte(s.prefix+"b/"))
	if !ok {
		return "", "", false
	}
	k, key, ok := bytes.Cut(rest, []byte("/"))
	if !ok {
		return "", "", false
	}
	return Kind(k), string(key), true
}

// load reads the whole range at one revision, a page at a time.
func (s *EtcdStore) load(ctx context.Context) (*mirror, error) {
	m := newMirror()
	end := clientv3.GetPrefixRangeEnd(s.prefix)
	from := s.prefix
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(1000), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, fmt.Errorf("store: etcd: reading %s: %w", s.prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, e := range resp.Kvs {
			m.set(s, e.Key, e.Value, false, e.ModRevision)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	m.rev = rev
	return m, nil
}

// set applies one key's value (or its deletion) to a mirror being built.
func (m *mirror) set(s *EtcdStore, full, val []byte, del bool, modRev int64) {
	if string(full) == s.commitKey() {
		if del {
			m.commitRev = 0
		} else {
			m.commitRev = modRev
		}
		return
	}
	k, key, ok := s.parseKey(full)
	if !ok {
		return
	}
	t := m.buckets[k]
	if t == nil {
		return // a kind this version does not know
	}
	if del {
		t.Delete(kv{key: key})
		return
	}
	v := bytes.Clone(val)
	if v == nil {
		v = []byte{}
	}
	t.ReplaceOrInsert(kv{key: key, val: v})
}

// follow applies the range's changes as etcd reports them, until ctx
// ends; after a compaction it reads everything again.
func (s *EtcdStore) follow(ctx context.Context) {
	defer close(s.done)
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		from := s.snapshot().rev + 1
		wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), s.prefix, clientv3.WithPrefix(), clientv3.WithRev(from))
		for resp := range wch {
			if resp.CompactRevision != 0 {
				if m, err := s.load(ctx); err == nil {
					s.publish(m, true)
				}
				break
			}
			if resp.Err() != nil {
				break
			}
			if len(resp.Events) > 0 {
				s.apply(resp.Events)
				backoff = 50 * time.Millisecond
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// apply puts watched events onto the mirror; those at or below its
// revision (this replica's own commits) are skipped.
func (s *EtcdStore) apply(evs []*clientv3.Event) {
	s.mu.Lock()
	base := s.cur
	var m *mirror
	for _, e := range evs {
		if e.Kv.ModRevision <= base.rev {
			continue
		}
		if m == nil {
			m = base.clone()
		}
		m.set(s, e.Kv.Key, e.Kv.Value, e.Type == clientv3.EventTypeDelete, e.Kv.ModRevision)
		m.rev = e.Kv.ModRevision
	}
	s.mu.Unlock()
	if m != nil {
		s.publish(m, false)
	}
}

// publish makes m the mirror when it is newer (or, force, whatever it is).
func (s *EtcdStore) publish(m *mirror, force bool) {
	s.mu.Lock()
	if !force && m.rev <= s.cur.rev {
		s.mu.Unlock()
		return
	}
	s.cur = m
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	if fn := s.onChange.Load(); fn != nil {
		(*fn)(m.rev)
	}
}

func (s *EtcdStore) snapshot() *mirror {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// OnChange has fn called after the mirror takes in changes made by
// other replicas (not after this replica's own commits), with the etcd
// revision it now reflects. fn must be quick.
func (s *EtcdStore) OnChange(fn func(rev int64)) { s.onChange.Store(&fn) }

// ObserveCommits has fn called after every successful commit.
func (s *EtcdStore) ObserveCommits(fn func(CommitStats)) { s.observe.Store(&fn) }

// Sync waits until the mirror holds every commit made before the call
// (a linearizable read of the commit key gives the revision to wait for).
func (s *EtcdStore) Sync(ctx context.Context) error {
	resp, err := s.cli.Get(ctx, s.commitKey())
	if err != nil {
		return fmt.Errorf("store: etcd: %w", err)
	}
	var want int64
	if len(resp.Kvs) == 1 {
		want = resp.Kvs[0].ModRevision
	}
	for {
		s.mu.Lock()
		ok, ch := s.cur.commitRev >= want, s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// EtcdRevision is the etcd revision the mirror reflects.
func (s *EtcdStore) EtcdRevision() int64 { return s.snapshot().rev }

// View implements Store.
func (s *EtcdStore) View(ctx context.Context, fn func(ReadTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return fn(&etcdTx{m: s.snapshot()})
}

// Update implements Store. As in Batch, fn may run more than once: when
// another replica committed after fn read the state, fn runs again on
// the newer state (so it must only touch the transaction).
func (s *EtcdStore) Update(ctx context.Context, fn func(WriteTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Another replica's commit between the clone and the transaction
	// (only the unfenced writes every replica makes at start can race;
	// the leader's are alone) makes fn run again on the newer state.
	var err error
	for range 10 {
		if err = s.commit(ctx, !isUnfenced(ctx), fn); !errors.Is(err, errRaced) {
			return err
		}
	}
	return err
}

type unfencedKey struct{}

// Unfenced marks a write that any replica may make, leader or not (the
// settings every replica sets at start): it is still one serializable
// transaction, but the fence is not asked. Stores without a fence
// ignore it.
func Unfenced(ctx context.Context) context.Context {
	return context.WithValue(ctx, unfencedKey{}, true)
}

func isUnfenced(ctx context.Context) bool { v, _ := ctx.Value(unfencedKey{}).(bool); return v }

// commit runs fn on a clone of the mirror and commits its writes; fenced
// says whether the fence applies.
func (s *EtcdStore) commit(ctx context.Context, fenced bool, fn func(WriteTx) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	base := s.snapshot()
	tx := newEtcdTx(base.clone())
	if err := fn(tx); err != nil {
		return err
	}
	start := time.Now()
	if err := s.send(ctx, base, tx, fenced); err != nil {
		return err
	}
	if fn := s.observe.Load(); fn != nil {
		(*fn)(CommitStats{Writers: 1, Commit: time.Since(start)})
	}
	return nil
}

// Batch implements Store: writers that queue while a commit is in
// flight share the next one (one etcd transaction). A writer whose fn
// fails gets its error and its changes are rolled back (each fn runs on
// its own copy-on-write clone); a group too large for one transaction
// is committed writer by writer.
func (s *EtcdStore) Batch(ctx context.Context, fn func(WriteTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &batchCall{fn: fn, done: make(chan error, 1), queued: time.Now()}
	s.bmu.Lock()
	s.queue = append(s.queue, c)
	if !s.committing {
		s.committing = true
		go s.commitLoop()
	}
	s.bmu.Unlock()
	return <-c.done
}

func (s *EtcdStore) commitLoop() {
	for {
		s.bmu.Lock()
		n := min(len(s.queue), 1000)
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

func (s *EtcdStore) commitGroup(calls []*batchCall) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	start := time.Now()
	base := s.snapshot()
	tx := newEtcdTx(base.clone())
	var ok []*batchCall
	for _, c := range calls {
		save := tx.save()
		if err := safeCall(c.fn, tx); err != nil {
			tx.restore(save)
			c.done <- err
			continue
		}
		ok = append(ok, c)
	}
	if len(ok) == 0 {
		return
	}
	ctx := context.Background()
	err := s.send(ctx, base, tx, true)
	if isTooLarge(err) && len(ok) > 1 {
		// Commit one by one, each on the mirror the one before left.
		for _, c := range ok {
			base := s.snapshot()
			tx := newEtcdTx(base.clone())
			err := safeCall(c.fn, tx)
			if err == nil {
				err = s.send(ctx, base, tx, true)
			}
			c.done <- err
		}
		return
	}
	if fn := s.observe.Load(); fn != nil && err == nil {
		(*fn)(CommitStats{Writers: len(ok), Wait: start.Sub(ok[0].queued), Commit: time.Since(start)})
	}
	for _, c := range ok {
		c.done <- err
	}
}

func isTooLarge(err error) bool {
	return errors.Is(err, rpctypes.ErrTooManyOps) || errors.Is(err, rpctypes.ErrRequestTooLarge) ||
		errors.Is(err, rpctypes.ErrGRPCTooManyOps) || errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) ||
		(err != nil && (strings.Contains(err.Error(), "too many operations") || strings.Contains(err.Error(), "request is too large")))
}

// send commits tx's writes, made on a clone of base, as one etcd
// transaction, and publishes the clone. The write is not abandoned when
// ctx ends: once sent, its outcome is waited for (up to CommitTimeout).
func (s *EtcdStore) send(ctx context.Context, base *mirror, tx *etcdTx, fenced bool) error {
	if len(tx.order) == 0 {
		return nil
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.commitKey()), "=", base.commitRev)}
	var fenceKey string
	var fenceRev int64
	if fenced && s.fence != nil {
		key, rev, ok := s.fence()
		if !ok {
			return ErrNotLeader
		}
		fenceKey, fenceRev = key, rev
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", rev))
	}
	if len(tx.order)+1 > s.maxOps {
		return fmt.Errorf("store: etcd: a transaction of %d writes: %w", len(tx.order), rpctypes.ErrTooManyOps)
	}
	ops := make([]clientv3.Op, 0, len(tx.order)+1)
	for _, w := range tx.order {
		op := tx.writes[w]
		full := s.bucketKey(w.k, w.key)
		if op.del {
			ops = append(ops, clientv3.OpDelete(full))
		} else {
			ops = append(ops, clientv3.OpPut(full, string(op.val)))
		}
	}
	// The commit key names the fence the write was made under: its
	// history says which leader made every commit (the HA test reads it
	// to show that no deposed leader wrote).
	ops = append(ops, clientv3.OpPut(s.commitKey(), fenceKey))
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.commitTimeout)
	defer cancel()
	resp, err := s.cli.Txn(cctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		if isTooLarge(err) {
			return fmt.Errorf("store: etcd: commit: %w", err)
		}
		// The outcome is unknown (etcd electing a leader, a connection
		// lost): the mirror learns it from the watch either way.
		return fmt.Errorf("%w: etcd commit: %v", ErrUnavailable, err)
	}
	if !resp.Succeeded {
		if fenceKey != "" {
			if r, err := s.cli.Get(cctx, fenceKey); err == nil && (len(r.Kvs) == 0 || r.Kvs[0].CreateRevision != fenceRev) {
				return ErrNotLeader
			}
		}
		// Another writer got in first: wait until the mirror has it, so
		// that the caller's retry computes from it.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		s.Sync(sctx)
		scancel()
		return errRaced
	}
	m := tx.m
	m.rev = resp.Header.Revision
	m.commitRev = resp.Header.Revision
	s.publishOwn(m)
	return nil
}

// publishOwn makes a committed clone the mirror. The watch may already
// have applied the same commit (or later ones) onto the old mirror;
// then the mirror is already as new.
func (s *EtcdStore) publishOwn(m *mirror) {
	s.mu.Lock()
	if m.rev > s.cur.rev {
		s.cur = m
		close(s.changed)
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
}

// Close implements Store.
func (s *EtcdStore) Close() error {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	s.closeClient()
	return nil
}

type bucketKey struct {
	k   Kind
	key string
}

type write struct {
	val []byte
	del bool
}

// etcdTx reads and writes a private clone of the mirror and records the
// writes to send.
type etcdTx struct {
	m      *mirror
	writes map[bucketKey]write
	order  []bucketKey
}

func newEtcdTx(m *mirror) *etcdTx { return &etcdTx{m: m, writes: map[bucketKey]write{}} }

type txSave struct {
	m      *mirror
	writes map[bucketKey]write
	order  int
}

// save and restore roll one batched writer's changes back.
func (t *etcdTx) save() txSave {
	w := make(map[bucketKey]write, len(t.writes))
	for k, v := range t.writes {
		w[k] = v
	}
	return txSave{m: t.m.clone(), writes: w, order: len(t.order)}
}

func (t *etcdTx) restore(s txSave) {
	t.m, t.writes, t.order = s.m, s.writes, t.order[:s.order]
}

func (t *etcdTx) record(k Kind, key string, w write) {
	bk := bucketKey{k, key}
	if _, ok := t.writes[bk]; !ok {
		t.order = append(t.order, bk)
	}
	t.writes[bk] = w
}

func (t *etcdTx) Revision() int64           { return getCounter(t, revKey) }
func (t *etcdTx) KindRevision(k Kind) int64 { return getCounter(t, revKey+"/"+string(k)) }

func (t *etcdTx) NextRevision(k Kind) int64 {
	r := getCounter(t, revKey) + 1
	putCounter(t, revKey, r)
	putCounter(t, revKey+"/"+string(k), r)
	return r
}

func (t *etcdTx) GetRaw(k Kind, key string) ([]byte, bool) {
	e, ok := t.m.bucket(k).Get(kv{key: key})
	return e.val, ok
}

func (t *etcdTx) ScanRaw(k Kind, prefix, after string, fn func(string, []byte) bool) {
	start := prefix
	if after != "" && after >= prefix {
		start = after
	}
	t.m.bucket(k).AscendGreaterOrEqual(kv{key: start}, func(e kv) bool {
		if !strings.HasPrefix(e.key, prefix) {
			return false
		}
		if e.key == after {
			return true
		}
		return fn(e.key, e.val)
	})
}

func (t *etcdTx) PutRaw(k Kind, key string, data []byte) error {
	if key == "" {
		return fmt.Errorf("store: %s with an empty key", k)
	}
	v := bytes.Clone(data)
	if v == nil {
		v = []byte{}
	}
	t.m.bucket(k).ReplaceOrInsert(kv{key: key, val: v})
	t.record(k, key, write{val: v})
	return nil
}

func (t *etcdTx) DeleteRaw(k Kind, key string) error {
	if _, ok := t.m.bucket(k).Delete(kv{key: key}); ok {
		t.record(k, key, write{del: true})
	}
	return nil
}

// getCounter and putCounter read and write a counter of KindMeta as
// bbolt keeps them: 8 bytes, big-endian.
func getCounter(tx ReadTx, name string) int64 {
	v, _ := tx.GetRaw(KindMeta, name)
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func putCounter(tx WriteTx, name string, v int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	if err := tx.PutRaw(KindMeta, name, b[:]); err != nil {
		panic(err)
	}
}
