package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// dump reads every key of every bucket (KindMeta included).
func dump(t testing.TB, st Store) map[Kind]map[string]string {
	t.Helper()
	out := map[Kind]map[string]string{}
	err := st.View(ctx, func(tx ReadTx) error {
		for _, k := range SnapshotBuckets() {
			m := map[string]string{}
			tx.ScanRaw(k, "", "", func(key string, data []byte) bool {
				m[key] = string(data)
				return true
			})
			out[k] = m
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// populate writes objects of several kinds (with their indexes and
// counters), a key that is not UTF-8 and a value larger than a small
// chunk.
func populate(t testing.TB, st Store) {
	t.Helper()
	err := st.Update(ctx, func(tx WriteTx) error {
		for _, tn := range []string{"contoso", "fabrikam"} {
			if err := Put(tx, &Tenant{Name: tn}, MustNotExist); err != nil {
				return err
			}
			for i := range 7 {
				if err := Put(tx, job(tn, fmt.Sprintf("job-%d", i)), MustNotExist); err != nil {
					return err
				}
			}
		}
		if err := Put(tx, &Event{Seq: 1, Tenant: "contoso", Type: "WorkloadSubmitted", Object: "workloads/contoso/job-0", Message: "hello"}, MustNotExist); err != nil {
			return err
		}
		if err := tx.PutRaw(KindSetting, "odd-\xff\xfe-key", []byte{0, 1, 2, 0xff}); err != nil {
			return err
		}
		return tx.PutRaw(KindSetting, "big", bytes.Repeat([]byte("x"), 5000))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func save(t testing.TB, st Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Save(ctx, st, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// txStats records the size of every Update of a store.
type txStats struct {
	Store
	keys, bytes []int
}

func (s *txStats) Update(ctx context.Context, fn func(WriteTx) error) error {
	c := &countTx{}
	return s.Store.Update(ctx, func(tx WriteTx) error {
		c.WriteTx = tx
		err := fn(c)
		if err == nil {
			s.keys, s.bytes = append(s.keys, c.keys), append(s.bytes, c.bytes)
		}
		return err
	})
}

type countTx struct {
	WriteTx
	keys, bytes int
}

func (c *countTx) PutRaw(k Kind, key string, data []byte) error {
	c.keys++
	c.bytes += len(key) + len(data)
	return c.WriteTx.PutRaw(k, key, data)
}

func (c *countTx) DeleteRaw(k Kind, key string) error {
	c.keys++
	c.bytes += len(key)
	return c.WriteTx.DeleteRaw(k, key)
}

// TestSnapshotRoundTrip: a restored store holds every key of every
// bucket, byte for byte, and each restore transaction stays within the
// chunk bounds (a record larger than ChunkBytes alone).
func TestSnapshotRoundTrip(t *testing.T) {
	src, _ := open(t)
	populate(t, src)
	snap := save(t, src)
	sum, err := Verify(bytes.NewReader(snap))
	if err != nil {
		t.Fatal(err)
	}
	want := dump(t, src)
	for k, m := range want {
		if sum.Keys[k] != len(m) {
			t.Errorf("summary counts %d %s keys, the store holds %d", sum.Keys[k], k, len(m))
		}
	}
	if sum.Revision != 17 || sum.Bytes != int64(len(snap)) || sum.Records == 0 {
		t.Errorf("summary %+v; want revision 17 and %d bytes", sum, len(snap))
	}
	dst, _ := open(t)
	stats := &txStats{Store: dst}
	const chunkKeys, chunkBytes = 4, 1000
	rsum, err := RestoreWith(ctx, stats, bytes.NewReader(snap), RestoreOptions{ChunkKeys: chunkKeys, ChunkBytes: chunkBytes})
	if err != nil {
		t.Fatal(err)
	}
	if got := dump(t, dst); !reflect.DeepEqual(got, want) {
		t.Errorf("restored store differs:\n got %v\nwant %v", got, want)
	}
	if rsum.SHA256 != sum.SHA256 || rsum.Records != sum.Records {
		t.Errorf("restore summary %+v, verify's %+v", rsum, sum)
	}
	for i, n := range stats.keys {
		if n > chunkKeys || (stats.bytes[i] > chunkBytes && n != 1) {
			t.Errorf("transaction %d wrote %d keys, %d bytes; bounds %d, %d", i, n, stats.bytes[i], chunkKeys, chunkBytes)
		}
	}
	if len(stats.keys) < sum.Records/chunkKeys {
		t.Errorf("%d transactions for %d records in chunks of %d", len(stats.keys), sum.Records, chunkKeys)
	}
	// A snapshot of the restored store is the same stream but for its time.
	again := save(t, dst)
	if a, b := snapBody(snap), snapBody(again); a != b {
		t.Error("a snapshot of the restored store differs from the original snapshot")
	}
}

// snapBody is a snapshot without its header and trailer.
func snapBody(b []byte) string {
	lines := strings.Split(string(b), "\n")
	return strings.Join(lines[1:len(lines)-2], "\n")
}

// TestCopyBoltToBolt: Copy migrates every key.
func TestCopyBoltToBolt(t *testing.T) {
	src, _ := open(t)
	populate(t, src)
	dst, _ := open(t)
	sum, err := Copy(ctx, src, dst, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, dst), dump(t, src); !reflect.DeepEqual(got, want) {
		t.Error("copied store differs")
	}
	if sum.Keys[KindWorkload] != 14 || sum.Revision != 17 {
		t.Errorf("summary %+v, want 14 workloads at revision 17", sum)
	}
	// Into a store that is not empty: refused, the source untouched.
	if _, err := Copy(ctx, src, dst, RestoreOptions{}); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("copy into a full store: %v, want ErrNotEmpty", err)
	}
}

// TestRestoreRefusesNonEmpty: a target with state is refused and left as
// it was; Force replaces its state with the snapshot's, keys the snapshot
// does not have included.
func TestRestoreRefusesNonEmpty(t *testing.T) {
	src, _ := open(t)
	populate(t, src)
	snap := save(t, src)
	dst, _ := open(t)
	err := dst.Update(ctx, func(tx WriteTx) error {
		if err := Put(tx, &Tenant{Name: "woodgrove"}, MustNotExist); err != nil {
			return err
		}
		return tx.PutRaw(KindWorkload, "zz/only-here", []byte("{}"))
	})
	if err != nil {
		t.Fatal(err)
	}
	before := dump(t, dst)
	err = Restore(ctx, dst, bytes.NewReader(snap))
	if !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), "tenants") {
		t.Fatalf("restore into a full store: %v, want ErrNotEmpty naming what it holds", err)
	}
	if !reflect.DeepEqual(dump(t, dst), before) {
		t.Error("a refused restore changed the target")
	}
	if _, err := RestoreWith(ctx, dst, bytes.NewReader(snap), RestoreOptions{Force: true, ChunkKeys: 2}); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, dst), dump(t, src); !reflect.DeepEqual(got, want) {
		t.Errorf("forced restore: got %v\nwant %v", got, want)
	}
}

// TestRestoreHalfDone: a stream found damaged after writing began leaves
// the target marked; Save and Restore of it say so, and a forced restore
// of a good snapshot repairs it.
func TestRestoreHalfDone(t *testing.T) {
	src, _ := open(t)
	populate(t, src)
	snap := save(t, src)
	// Cut the trailer off: every record is fine, the stream is not.
	cut := snap[:bytes.LastIndexByte(snap[:len(snap)-1], '\n')+1]
	dst, _ := open(t)
	_, err := RestoreWith(ctx, dst, bytes.NewReader(cut), RestoreOptions{ChunkKeys: 3})
	if !errors.Is(err, ErrRestoreIncomplete) || !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("restore of a cut stream: %v; want a half-done restore of a truncated snapshot", err)
	}
	if err := Save(ctx, dst, io.Discard); !errors.Is(err, ErrRestoreIncomplete) {
		t.Errorf("save of a half-restored store: %v, want ErrRestoreIncomplete", err)
	}
	if err := Restore(ctx, dst, bytes.NewReader(snap)); !errors.Is(err, ErrRestoreIncomplete) || !strings.Contains(err.Error(), "revision 17") {
		t.Errorf("restore onto a half-restored store: %v, want ErrRestoreIncomplete naming the revision", err)
	}
	if _, err := RestoreWith(ctx, dst, bytes.NewReader(snap), RestoreOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, dst), dump(t, src); !reflect.DeepEqual(got, want) {
		t.Error("forced restore did not repair the half-restored store")
	}
}

// TestSnapshotRefusesDamage: every strict prefix of a snapshot, every
// one-bit change of any byte and a set of structural defects are
// refused with a FormatError naming the line and offset.
func TestSnapshotRefusesDamage(t *testing.T) {
	st, _ := open(t)
	err := st.Update(ctx, func(tx WriteTx) error {
		if err := Put(tx, &Tenant{Name: "contoso"}, MustNotExist); err != nil {
			return err
		}
		for _, n := range []string{"a", "b"} {
			if err := Put(tx, job("contoso", n), MustNotExist); err != nil {
				return err
			}
		}
		return tx.PutRaw(KindSetting, "odd-\xff-key", []byte{0, 0xff})
	})
	if err != nil {
		t.Fatal(err)
	}
	snap := save(t, st)
	check := func(name string, b []byte) {
		t.Helper()
		_, err := Verify(bytes.NewReader(b))
		var fe *FormatError
		if !errors.As(err, &fe) || !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("%s: %v, want a FormatError", name, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("line %d, byte %d", fe.Line, fe.Offset)) {
			t.Fatalf("%s: %q does not name where", name, err)
		}
		if fe.Offset > int64(len(b)) {
			t.Fatalf("%s: offset %d past the end (%d)", name, fe.Offset, len(b))
		}
	}
	for n := range len(snap) {
		check(fmt.Sprintf("first %d bytes", n), snap[:n])
	}
	for i := range snap {
		b := bytes.Clone(snap)
		b[i] ^= 1
		check(fmt.Sprintf("bit 0 of byte %d flipped", i), b)
	}
	lines := strings.SplitAfter(string(snap), "\n")
	lines = lines[:len(lines)-1] // the empty string after the last newline
	join := func(ls ...string) []byte { return []byte(strings.Join(ls, "")) }
	n := len(lines)
	swapped := append([]string{}, lines...)
	swapped[2], swapped[3] = swapped[3], swapped[2] // two workloads
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"a blank line", join(lines[0], "\n", lines[n-1]), "bad JSON"},
		{"a record dropped", join(append(append([]string{}, lines[:3]...), lines[4:]...)...), "trailer counts"},
		{"two records swapped", join(swapped...), "increasing order"},
		{"a record twice", join(append(append([]string{}, lines[:4]...), lines[3:]...)...), "increasing order"},
		{"data after the trailer", append(bytes.Clone(snap), "{}\n"...), "after the trailer"},
		{"no trailer", join(lines[:n-1]...), "truncated"},
		{"newer version", []byte(strings.Replace(string(snap), `"version":1`, `"version":2`, 1)), "format version 2"},
		{"not a snapshot", []byte("hello\n"), "header"},
		{"unknown bucket", []byte(strings.Replace(string(snap), `"settings"`, `"gizmos"`, 1)), `unknown bucket "gizmos"`},
		{"meta not last", []byte(`{"format":"arbiter-snapshot","version":1,"revision":0,"buckets":["meta","tenants"]}` + "\n"), "must end with"},
		{"bad base64", join(lines[0], `{"b":"tenants","k":"a","v":"!!"}`+"\n", lines[n-1]), "illegal base64"},
		{"empty key", join(lines[0], `{"b":"tenants","k":"","v":""}`+"\n", lines[n-1]), "empty key"},
		{"no value", join(lines[0], `{"b":"tenants","k":"a"}`+"\n", lines[n-1]), "no value"},
		{"restore marker", join(lines[0], `{"b":"meta","k":"restoring","v":"AAAAAAAAAAE="}`+"\n", lines[n-1]), "half-done"},
		{"over-long line", join(lines[0], `{"b":"tenants","k":"a","v":"`+strings.Repeat("A", maxSnapshotLine)+"\"}\n"), "longer than"},
	} {
		check(c.name, c.b)
		if _, err := Verify(bytes.NewReader(c.b)); !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q, want it to say %q", c.name, err, c.want)
		}
	}
}

// TestRestoreRefusesBadHeaderUntouched: a stream refused at its header
// leaves the target as it was (no marker).
func TestRestoreRefusesBadHeaderUntouched(t *testing.T) {
	dst, _ := open(t)
	before := dump(t, dst)
	if err := Restore(ctx, dst, strings.NewReader("garbage\n")); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("restore of garbage: %v", err)
	}
	if !reflect.DeepEqual(dump(t, dst), before) {
		t.Error("a refused header changed the target")
	}
}

// TestSaveCancelled: a cancelled context stops Save with its error.
func TestSaveCancelled(t *testing.T) {
	st, _ := open(t)
	populate(t, st)
	c, cancel := context.WithCancel(ctx)
	cancel()
	if err := Save(c, st, io.Discard); !errors.Is(err, context.Canceled) {
		t.Errorf("save with a cancelled context: %v", err)
	}
}

// FuzzSnapshotReader: whatever the bytes, Verify returns a summary or a
// FormatError, never panics; what it accepts it accepts consistently.
func FuzzSnapshotReader(f *testing.F) {
	st := newMemStore()
	populate(f, st)
	snap := save(f, st)
	f.Add(snap)
	f.Add(snap[:len(snap)/2])
	f.Add([]byte(`{"format":"arbiter-snapshot","version":1,"revision":0,"buckets":["meta"]}` + "\n" + `{"end":true,"records":0,"sha256":""}` + "\n"))
	f.Add([]byte(`{"format":"arbiter-snapshot","version":1,"revision":3,"buckets":["tenants","meta"]}` + "\n" + `{"b":"tenants","k64":"/w==","v":""}` + "\n"))
	f.Add([]byte("\n\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sum, err := Verify(bytes.NewReader(b))
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("error %v is not a FormatError", err)
			}
			return
		}
		total := 0
		for _, n := range sum.Keys {
			total += n
		}
		if total != sum.Records || sum.Bytes != int64(len(b)) {
			t.Fatalf("accepted with summary %+v for %d bytes", sum, len(b))
		}
	})
}

// memStore is a Store in maps, for tests of code generic over Store.
type memStore struct{ b map[Kind]map[string][]byte }

func newMemStore() *memStore { return &memStore{b: map[Kind]map[string][]byte{}} }

func (m *memStore) View(_ context.Context, fn func(ReadTx) error) error { return fn(memTx{m}) }
func (m *memStore) Update(_ context.Context, fn func(WriteTx) error) error {
	saved := m.b
	m.b = map[Kind]map[string][]byte{}
	for k, kv := range saved {
		m.b[k] = maps.Clone(kv)
	}
	if err := fn(memTx{m}); err != nil {
		m.b = saved
		return err
	}
	return nil
}
func (m *memStore) Batch(ctx context.Context, fn func(WriteTx) error) error { return m.Update(ctx, fn) }
func (m *memStore) Close() error                                            { return nil }

type memTx struct{ m *memStore }

func (t memTx) counter(name string) int64 {
	v := t.m.b[KindMeta][name]
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}
func (t memTx) Revision() int64           { return t.counter(revKey) }
func (t memTx) KindRevision(k Kind) int64 { return t.counter(revKey + "/" + string(k)) }
func (t memTx) NextRevision(k Kind) int64 {
	r := t.Revision() + 1
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(r))
	t.PutRaw(KindMeta, revKey, b[:])
	t.PutRaw(KindMeta, revKey+"/"+string(k), b[:])
	return r
}
func (t memTx) GetRaw(k Kind, key string) ([]byte, bool) {
	v, ok := t.m.b[k][key]
	return v, ok
}
func (t memTx) ScanRaw(k Kind, prefix, after string, fn func(string, []byte) bool) {
	keys := slices.Sorted(maps.Keys(t.m.b[k]))
	for _, key := range keys {
		if strings.HasPrefix(key, prefix) && key > after && !fn(key, t.m.b[k][key]) {
			return
		}
	}
}
func (t memTx) PutRaw(k Kind, key string, data []byte) error {
	if t.m.b[k] == nil {
		t.m.b[k] = map[string][]byte{}
	}
	t.m.b[k][key] = bytes.Clone(data)
	return nil
}
func (t memTx) DeleteRaw(k Kind, key string) error {
	delete(t.m.b[k], key)
	return nil
}

// opLimit refuses, as etcd does past --max-txn-ops, a transaction of more
// than max writes.
type opLimit struct {
	Store
	max int
}

func (s *opLimit) Update(ctx context.Context, fn func(WriteTx) error) error {
	return s.Store.Update(ctx, func(tx WriteTx) error {
		c := &countTx{WriteTx: tx}
		if err := fn(c); err != nil {
			return err
		}
		if c.keys > s.max {
			return errors.New("etcdserver: too many operations in txn request")
		}
		return nil
	})
}

// TestRestoreSplitsTooLargeChunks: a store that refuses the default chunk
// as too large still gets the whole snapshot, in smaller transactions.
func TestRestoreSplitsTooLargeChunks(t *testing.T) {
	src := newMemStore()
	populate(t, src)
	snap := save(t, src)
	dst := newMemStore()
	// Not empty, so that Force's deletes are split too.
	populate(t, dst)
	if _, err := RestoreWith(ctx, &opLimit{Store: dst, max: 3}, bytes.NewReader(snap), RestoreOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, dst), dump(t, src); !reflect.DeepEqual(got, want) {
		t.Error("restore split into small transactions differs")
	}
}

// TestSnapshotConformance: on every backend, a snapshot restores into a
// fresh store of it byte for byte, a full one is refused, and a cut
// stream leaves a marked half-done restore.
func TestSnapshotConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			src, _ := b.open(t)
			populate(t, src)
			snap := save(t, src)
			dst, _ := b.open(t)
			if _, err := RestoreWith(ctx, dst, bytes.NewReader(snap), RestoreOptions{ChunkKeys: 5}); err != nil {
				t.Fatal(err)
			}
			if got, want := dump(t, dst), dump(t, src); !reflect.DeepEqual(got, want) {
				t.Errorf("restored store differs:\n got %v\nwant %v", got, want)
			}
			if err := Restore(ctx, dst, bytes.NewReader(snap)); !errors.Is(err, ErrNotEmpty) {
				t.Errorf("restore into a full store: %v", err)
			}
			cut := snap[:len(snap)*3/4]
			if _, err := RestoreWith(ctx, dst, bytes.NewReader(cut), RestoreOptions{Force: true, ChunkKeys: 5}); !errors.Is(err, ErrRestoreIncomplete) {
				t.Errorf("forced restore of a cut stream: %v", err)
			}
			if err := Save(ctx, dst, io.Discard); !errors.Is(err, ErrRestoreIncomplete) {
				t.Errorf("save of a half-restored store: %v", err)
			}
		})
	}
}
