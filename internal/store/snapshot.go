package store

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"time"
	"unicode/utf8"
)

// A snapshot is every key of every bucket of a store (Kinds and then
// KindMeta, the counters), read in one View, as a stream of JSON lines:
//
//	{"format":"arbiter-snapshot","version":1,"revision":42,"created":"...","buckets":["tenants",...,"meta"]}
//	{"b":"tenants","k":"contoso","v":"<base64>"}
//	...
//	{"end":true,"records":N,"keys":{"tenants":3,...},"sha256":"<hex>"}
//
// The header names the format, its version, the store revision and the
// buckets in the order their records follow; within a bucket keys are in
// strictly increasing order. A key that is not valid UTF-8 is written as
// "k64" (base64) instead of "k". The trailer counts the records and holds
// the SHA-256 of every byte before it, so a truncated, reordered or
// corrupted stream is refused (FormatError names the line and byte offset).
//
// Restore writes a snapshot into an empty store in chunks of bounded size
// (etcd bounds a transaction's operations and bytes): first a marker key
// (restoringKey) in KindMeta, then the kinds' records, then KindMeta's own
// records with the marker's removal in the last chunk. A store that still
// holds the marker is a half-done restore, and Save, Restore and Copy say
// so (ErrRestoreIncomplete).

// SnapshotFormat and SnapshotVersion identify the stream.
const (
	SnapshotFormat  = "arbiter-snapshot"
	SnapshotVersion = 1
)

// Snapshot errors; callers check them with errors.Is.
var (
	// ErrBadSnapshot: the stream is not a complete, intact snapshot (the
	// error is a *FormatError naming where).
	ErrBadSnapshot = errors.New("store: bad snapshot")
	// ErrNotEmpty: Restore's target already holds state (RestoreOptions.Force
	// replaces it).
	ErrNotEmpty = errors.New("store: the target store is not empty")
	// ErrRestoreIncomplete: the store holds the marker of a restore that
	// did not finish; its state is partial.
	ErrRestoreIncomplete = errors.New("store: the store holds a half-done restore")
)

// restoringKey is the KindMeta key Restore writes first and removes last;
// its value is the revision of the snapshot being restored (8 bytes, big
// endian, like every counter).
const restoringKey = "restoring"

// Bounds of the format, shared by the writer and the reader so that every
// snapshot Save writes can be read back.
const (
	// maxSnapshotLine bounds one line (a record's JSON).
	maxSnapshotLine = 16 << 20
	// maxSnapshotValue bounds one value: its base64 and the record's
	// framing stay under maxSnapshotLine.
	maxSnapshotValue = 11 << 20
	maxSnapshotKey   = 64 << 10
)

// Default chunk bounds of Restore: under etcd's defaults for a request
// (--max-request-bytes 1.5 MiB) and well under 1000 keys a transaction.
const (
	DefaultChunkKeys  = 500
	DefaultChunkBytes = 768 << 10
)

// SnapshotBuckets lists the buckets a snapshot holds, in stream order:
// Kinds, then KindMeta.
func SnapshotBuckets() []Kind { return append(slices.Clone(Kinds), KindMeta) }

// Summary describes a snapshot: what Save wrote, Verify read or Restore
// and Copy wrote.
type Summary struct {
	Version  int
	Revision int64
	Created  time.Time
	// Keys counts the records per bucket.
	Keys map[Kind]int
	// Records is the number of records; Bytes the stream's length.
	Records int
	Bytes   int64
	// SHA256 is the trailer's checksum (hex).
	SHA256 string
}

// FormatError says where and why a snapshot stream was refused.
type FormatError struct {
	// Line is the 1-based line (1: the header), Offset the byte offset of
	// its start.
	Line   int
	Offset int64
	Err    error
}

func (e *FormatError) Error() string {
	what := fmt.Sprintf("record %d", e.Line-1)
	if e.Line == 1 {
		what = "header"
	}
	return fmt.Sprintf("snapshot: %s (line %d, byte %d): %v", what, e.Line, e.Offset, e.Err)
}

// Unwrap makes FormatError match ErrBadSnapshot and its cause.
func (e *FormatError) Unwrap() []error { return []error{ErrBadSnapshot, e.Err} }

type snapHeader struct {
	Format   string    `json:"format"`
	Version  int       `json:"version"`
	Revision int64     `json:"revision"`
	Created  time.Time `json:"created"`
	Buckets  []Kind    `json:"buckets"`
}

// snapLine is a record or the trailer.
type snapLine struct {
	B   Kind    `json:"b,omitempty"`
	K   *string `json:"k,omitempty"`
	K64 string  `json:"k64,omitempty"`
	V   *string `json:"v,omitempty"`

	End     bool         `json:"end,omitempty"`
	Records *int         `json:"records,omitempty"`
	Keys    map[Kind]int `json:"keys,omitempty"`
	SHA256  string       `json:"sha256,omitempty"`
}

// Save writes a snapshot of st to w.
func Save(ctx context.Context, st Store, w io.Writer) error {
	_, err := SaveSummary(ctx, st, w)
	return err
}

// SaveSummary is Save, and says what it wrote. Every bucket is read in one
// View, so the snapshot is of one revision. A store holding a half-done
// restore is refused.
func SaveSummary(ctx context.Context, st Store, w io.Writer) (Summary, error) {
	sum := Summary{Version: SnapshotVersion, Keys: map[Kind]int{}}
	err := st.View(ctx, func(tx ReadTx) error {
		if _, ok := tx.GetRaw(KindMeta, restoringKey); ok {
			return ErrRestoreIncomplete
		}
		sw := newSnapWriter(w)
		sum.Revision = tx.Revision()
		sum.Created = time.Now().UTC().Truncate(time.Second)
		h := snapHeader{Format: SnapshotFormat, Version: SnapshotVersion, Revision: sum.Revision, Created: sum.Created, Buckets: SnapshotBuckets()}
		if err := sw.line(h); err != nil {
			return err
		}
		for _, k := range h.Buckets {
			var err error
			tx.ScanRaw(k, "", "", func(key string, data []byte) bool {
				if err = ctx.Err(); err != nil {
					return false
				}
				err = sw.record(k, key, data)
				sum.Keys[k]++
				return err == nil
			})
			if err != nil {
				return err
			}
		}
		sum.Records = sw.records
		var err error
		sum.SHA256, err = sw.trailer(sum.Keys)
		sum.Bytes = sw.n
		return err
	})
	if err != nil {
		return Summary{}, fmt.Errorf("store: saving a snapshot: %w", err)
	}
	return sum, nil
}

// snapWriter writes lines and hashes them.
type snapWriter struct {
	w       *bufio.Writer
	out     io.Writer
	h       hash.Hash
	n       int64
	records int
	buf     bytes.Buffer
}

func newSnapWriter(w io.Writer) *snapWriter {
	return &snapWriter{w: bufio.NewWriterSize(w, 64<<10), out: w, h: sha256.New()}
}

func (s *snapWriter) line(v any) error {
	s.buf.Reset()
	enc := json.NewEncoder(&s.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	s.h.Write(s.buf.Bytes())
	return s.raw(s.buf.Bytes())
}

func (s *snapWriter) raw(b []byte) error {
	n, err := s.w.Write(b)
	s.n += int64(n)
	return err
}

func (s *snapWriter) record(k Kind, key string, data []byte) error {
	if len(data) > maxSnapshotValue || len(key) > maxSnapshotKey {
		return fmt.Errorf("%s %q: %d-byte value or %d-byte key is over the snapshot's bounds (%d, %d)", k, key, len(data), len(key), maxSnapshotValue, maxSnapshotKey)
	}
	v := base64.StdEncoding.EncodeToString(data)
	l := snapLine{B: k, V: &v}
	if utf8.ValidString(key) {
		l.K = &key
	} else {
		l.K64 = base64.StdEncoding.EncodeToString([]byte(key))
	}
	s.records++
	return s.line(l)
}

func (s *snapWriter) trailer(keys map[Kind]int) (string, error) {
	sum := hex.EncodeToString(s.h.Sum(nil))
	n := s.records
	s.buf.Reset()
	if err := json.NewEncoder(&s.buf).Encode(snapLine{End: true, Records: &n, Keys: keys, SHA256: sum}); err != nil {
		return "", err
	}
	if err := s.raw(s.buf.Bytes()); err != nil {
		return "", err
	}
	return sum, s.w.Flush()
}

// snapRecord is one key of one bucket.
type snapRecord struct {
	Bucket Kind
	Key    string
	Value  []byte
}

// SnapshotReader reads and checks a snapshot stream record by record.
// Next returns records in stream order and io.EOF after an intact
// trailer; any defect is a *FormatError (ErrBadSnapshot). A record is only
// known to be genuine once Next has returned io.EOF: whoever applies
// records as they come must be able to undo them (Restore's marker).
type SnapshotReader struct {
	r       *bufio.Reader
	h       hash.Hash
	off     int64 // of the last line read
	lastLen int64 // its length
	line    int   // its number
	hdr     snapHeader
	bucket  int // index into hdr.Buckets of the last record's bucket
	last    string
	first   bool // no record read yet in the current bucket
	keys    map[Kind]int
	count   int
	done    bool
	sum     string
	err     error
}

// NewSnapshotReader reads the header; an error is a *FormatError.
func NewSnapshotReader(r io.Reader) (*SnapshotReader, error) {
	sr := &SnapshotReader{r: bufio.NewReaderSize(r, 64<<10), h: sha256.New(), keys: map[Kind]int{}, first: true}
	b, err := sr.readLine()
	if err != nil {
		return nil, err
	}
	if err := sr.header(b); err != nil {
		return nil, sr.fail(err)
	}
	sr.h.Write(b)
	return sr, nil
}

func (sr *SnapshotReader) header(b []byte) error {
	h := &sr.hdr
	// Format and version first, so that a newer version's fields are
	// reported as a newer version.
	if err := json.Unmarshal(b, h); err != nil {
		return fmt.Errorf("not a snapshot header: bad JSON: %w", err)
	}
	if h.Format != SnapshotFormat {
		return fmt.Errorf("format %q, want %q", h.Format, SnapshotFormat)
	}
	if h.Version != SnapshotVersion {
		return fmt.Errorf("format version %d; this arbiter reads version %d", h.Version, SnapshotVersion)
	}
	*h = snapHeader{}
	if err := strictJSON(b, h); err != nil {
		return err
	}
	if h.Revision < 0 {
		return fmt.Errorf("negative revision %d", h.Revision)
	}
	known := SnapshotBuckets()
	seen := map[Kind]bool{}
	for _, k := range h.Buckets {
		if !slices.Contains(known, k) {
			return fmt.Errorf("unknown bucket %q (a snapshot of a newer arbiter?)", k)
		}
		if seen[k] {
			return fmt.Errorf("bucket %q listed twice", k)
		}
		seen[k] = true
	}
	if len(h.Buckets) == 0 || h.Buckets[len(h.Buckets)-1] != KindMeta {
		return fmt.Errorf("the bucket list must end with %q", KindMeta)
	}
	return nil
}

// Header returns the snapshot's revision and creation time.
func (sr *SnapshotReader) Header() (revision int64, created time.Time) {
	return sr.hdr.Revision, sr.hdr.Created
}

func (sr *SnapshotReader) fail(err error) error {
	fe := &FormatError{Line: sr.line, Offset: sr.off, Err: err}
	sr.err = fe
	return fe
}

// readLine reads the next line, with its newline, bounded by
// maxSnapshotLine; it does not advance off (fail reports the line's start).
func (sr *SnapshotReader) readLine() ([]byte, error) {
	if sr.line > 0 {
		sr.off += sr.lastLen
	}
	sr.line++
	var out []byte
	for {
		chunk, err := sr.r.ReadSlice('\n')
		if len(out)+len(chunk) > maxSnapshotLine {
			return nil, sr.fail(fmt.Errorf("line longer than %d bytes", maxSnapshotLine))
		}
		out = append(out, chunk...)
		switch {
		case err == nil:
			sr.lastLen = int64(len(out))
			return out, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(out) == 0 && sr.line == 1 {
				return nil, sr.fail(errors.New("empty: not a snapshot"))
			}
			if len(out) == 0 {
				return nil, sr.fail(fmt.Errorf("truncated: the stream ends after %d records without its trailer", sr.count))
			}
			return nil, sr.fail(fmt.Errorf("truncated: the stream ends inside a line (%d bytes, no newline)", len(out)))
		default:
			return nil, sr.fail(fmt.Errorf("reading: %w", err))
		}
	}
}

// Next returns the next record, or io.EOF itself (compare with ==: a
// FormatError may wrap a decoder's io.EOF) after the verified trailer.
func (sr *SnapshotReader) Next() (snapRecord, error) {
	if sr.err != nil {
		return snapRecord{}, sr.err
	}
	if sr.done {
		return snapRecord{}, io.EOF
	}
	b, err := sr.readLine()
	if err != nil {
		return snapRecord{}, err
	}
	var l snapLine
	if err := strictJSON(b, &l); err != nil {
		return snapRecord{}, sr.fail(err)
	}
	if l.End {
		if err := sr.trailer(l); err != nil {
			return snapRecord{}, sr.fail(err)
		}
		// Nothing may follow the trailer.
		sr.off += sr.lastLen
		sr.line++
		sr.lastLen = 0
		if _, err := sr.r.ReadByte(); err == nil {
			return snapRecord{}, sr.fail(errors.New("data after the trailer"))
		} else if !errors.Is(err, io.EOF) {
			return snapRecord{}, sr.fail(fmt.Errorf("reading: %w", err))
		}
		sr.done = true
		return snapRecord{}, io.EOF
	}
	rec, err := sr.record(l)
	if err != nil {
		return snapRecord{}, sr.fail(err)
	}
	sr.h.Write(b)
	return rec, nil
}

func (sr *SnapshotReader) record(l snapLine) (snapRecord, error) {
	if l.Records != nil || l.Keys != nil || l.SHA256 != "" {
		return snapRecord{}, errors.New("trailer fields in a record")
	}
	if l.B == "" {
		return snapRecord{}, errors.New("record without a bucket (\"b\")")
	}
	i := slices.Index(sr.hdr.Buckets[sr.bucket:], l.B)
	if i < 0 {
		if slices.Contains(sr.hdr.Buckets, l.B) {
			return snapRecord{}, fmt.Errorf("bucket %q out of the header's order", l.B)
		}
		return snapRecord{}, fmt.Errorf("bucket %q not in the header", l.B)
	}
	if i > 0 {
		sr.bucket += i
		sr.first = true
	}
	var key string
	switch {
	case l.K != nil && l.K64 != "":
		return snapRecord{}, errors.New("record with both \"k\" and \"k64\"")
	case l.K != nil:
		key = *l.K
	case l.K64 != "":
		kb, err := base64.StdEncoding.DecodeString(l.K64)
		if err != nil {
			return snapRecord{}, fmt.Errorf("k64: %w", err)
		}
		key = string(kb)
	}
	if key == "" {
		return snapRecord{}, errors.New("record with an empty key")
	}
	if len(key) > maxSnapshotKey {
		return snapRecord{}, fmt.Errorf("key of %d bytes, over %d", len(key), maxSnapshotKey)
	}
	if !sr.first && key <= sr.last {
		return snapRecord{}, fmt.Errorf("%s key %q is not after %q (keys must be in increasing order, once each)", l.B, key, sr.last)
	}
	if l.V == nil {
		return snapRecord{}, fmt.Errorf("%s %q: no value (\"v\")", l.B, key)
	}
	v, err := base64.StdEncoding.DecodeString(*l.V)
	if err != nil {
		return snapRecord{}, fmt.Errorf("%s %q: value: %w", l.B, key, err)
	}
	if len(v) > maxSnapshotValue {
		return snapRecord{}, fmt.Errorf("%s %q: value of %d bytes, over %d", l.B, key, len(v), maxSnapshotValue)
	}
	if l.B == KindMeta && key == restoringKey {
		return snapRecord{}, errors.New("the snapshot holds a half-done restore's marker")
	}
	sr.first = false
	sr.last = key
	sr.keys[l.B]++
	sr.count++
	return snapRecord{Bucket: l.B, Key: key, Value: v}, nil
}

func (sr *SnapshotReader) trailer(l snapLine) error {
	if l.B != "" || l.K != nil || l.K64 != "" || l.V != nil {
		return errors.New("record fields in the trailer")
	}
	if l.Records == nil {
		return errors.New("trailer without a record count")
	}
	if *l.Records != sr.count {
		return fmt.Errorf("trailer counts %d records, the stream holds %d", *l.Records, sr.count)
	}
	for k, n := range l.Keys {
		if sr.keys[k] != n {
			return fmt.Errorf("trailer counts %d %s keys, the stream holds %d", n, k, sr.keys[k])
		}
	}
	for k, n := range sr.keys {
		if l.Keys[k] != n {
			return fmt.Errorf("trailer counts %d %s keys, the stream holds %d", l.Keys[k], k, n)
		}
	}
	got := hex.EncodeToString(sr.h.Sum(nil))
	if l.SHA256 != got {
		return fmt.Errorf("checksum mismatch: the trailer says sha256 %q, the stream hashes to %s (corrupted)", l.SHA256, got)
	}
	sr.sum = got
	return nil
}

// Summary describes what was read so far (all of it after io.EOF).
func (sr *SnapshotReader) Summary() Summary {
	keys := make(map[Kind]int, len(sr.keys))
	for k, n := range sr.keys {
		keys[k] = n
	}
	return Summary{Version: sr.hdr.Version, Revision: sr.hdr.Revision, Created: sr.hdr.Created, Keys: keys,
		Records: sr.count, Bytes: sr.off + sr.lastLen, SHA256: sr.sum}
}

// strictJSON decodes one JSON object, refusing unknown fields and
// trailing data.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad JSON: %w", err)
	}
	if dec.More() {
		return errors.New("bad JSON: more than one value on the line")
	}
	return nil
}

// Verify reads a whole snapshot and checks it without writing anything.
func Verify(r io.Reader) (Summary, error) {
	sr, err := NewSnapshotReader(r)
	if err != nil {
		return Summary{}, err
	}
	for {
		if _, err := sr.Next(); err == io.EOF {
			return sr.Summary(), nil
		} else if err != nil {
			return Summary{}, err
		}
	}
}

// RestoreOptions tune Restore.
type RestoreOptions struct {
	// Force restores into a store that is not empty (or holds a half-done
	// restore): every key it holds is deleted first.
	Force bool
	// ChunkKeys and ChunkBytes bound one transaction (defaults
	// DefaultChunkKeys, DefaultChunkBytes); a record larger than
	// ChunkBytes is written alone.
	ChunkKeys, ChunkBytes int
}

func (o RestoreOptions) withDefaults() RestoreOptions {
	if o.ChunkKeys <= 0 {
		o.ChunkKeys = DefaultChunkKeys
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	return o
}

// Restore writes the snapshot read from r into st, which must be empty.
func Restore(ctx context.Context, st Store, r io.Reader) error {
	_, err := RestoreWith(ctx, st, r, RestoreOptions{})
	return err
}

// RestoreWith is Restore with options; it says what it wrote. The target
// is checked (empty, or Force) before anything is written. A defect found
// in the stream after writing began leaves the target marked as a
// half-done restore (ErrRestoreIncomplete) and returns the *FormatError;
// verify a file first (Verify) to refuse it before touching the target.
func RestoreWith(ctx context.Context, st Store, r io.Reader, o RestoreOptions) (Summary, error) {
	o = o.withDefaults()
	sr, err := NewSnapshotReader(r)
	if err != nil {
		return Summary{}, err
	}
	rev, _ := sr.Header()
	if err := begin(ctx, st, rev, o); err != nil {
		return Summary{}, err
	}
	w := &chunkWriter{ctx: ctx, st: st, o: o}
	for {
		rec, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Summary{}, fmt.Errorf("%w; the target holds a half-done restore (restore again with Force): %w", ErrRestoreIncomplete, err)
		}
		if err := w.add(rec); err != nil {
			return Summary{}, fmt.Errorf("store: restoring: %w (the target holds a half-done restore)", err)
		}
	}
	// The last chunk removes the marker, after every record is known
	// genuine (the trailer checked).
	w.finish = true
	if err := w.flush(); err != nil {
		return Summary{}, fmt.Errorf("store: restoring: %w (the target holds a half-done restore)", err)
	}
	return sr.Summary(), nil
}

// begin checks the target and writes the restore marker; with Force it
// first empties the target. KindMeta's keys other than the marker are
// deleted in every case (a fresh store may hold counters of its own, such
// as the index version), so that the target ends with the snapshot's.
func begin(ctx context.Context, st Store, rev int64, o RestoreOptions) error {
	var state error
	err := st.View(ctx, func(tx ReadTx) error {
		state = emptiness(tx)
		return nil
	})
	if err != nil {
		return err
	}
	if state != nil && !o.Force {
		return state
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(rev))
	if err := st.Update(ctx, func(tx WriteTx) error { return tx.PutRaw(KindMeta, restoringKey, b[:]) }); err != nil {
		return fmt.Errorf("store: restoring: marking the target: %w", err)
	}
	for _, k := range SnapshotBuckets() {
		if err := clearBucket(ctx, st, k, o.ChunkKeys); err != nil {
			return fmt.Errorf("store: restoring: emptying %s: %w", k, err)
		}
	}
	return nil
}

// CheckRestored returns ErrRestoreIncomplete, with the snapshot's
// revision, when st holds the marker of a restore that did not finish (a
// server must not run on such a partial state).
func CheckRestored(ctx context.Context, st Store) error {
	return st.View(ctx, func(tx ReadTx) error {
		if err := emptiness(tx); errors.Is(err, ErrRestoreIncomplete) {
			return err
		}
		return nil
	})
}

// emptiness is nil for an empty store, else why it is not.
func emptiness(tx ReadTx) error {
	if v, ok := tx.GetRaw(KindMeta, restoringKey); ok {
		rev := int64(0)
		if len(v) == 8 {
			rev = int64(binary.BigEndian.Uint64(v))
		}
		return fmt.Errorf("%w (of a snapshot at revision %d): its state is partial", ErrRestoreIncomplete, rev)
	}
	for _, k := range Kinds {
		n := 0
		tx.ScanRaw(k, "", "", func(string, []byte) bool { n++; return false })
		if n > 0 {
			return fmt.Errorf("%w: it holds %s (and is at revision %d)", ErrNotEmpty, k, tx.Revision())
		}
	}
	if r := tx.Revision(); r != 0 {
		return fmt.Errorf("%w: it is at revision %d", ErrNotEmpty, r)
	}
	return nil
}

// clearBucket deletes every key of k but the restore marker, a chunk per
// transaction.
func clearBucket(ctx context.Context, st Store, k Kind, chunk int) error {
	for {
		n := 0
		err := st.Update(ctx, func(tx WriteTx) error {
			var keys []string
			tx.ScanRaw(k, "", "", func(key string, _ []byte) bool {
				if k == KindMeta && key == restoringKey {
					return true
				}
				keys = append(keys, key)
				return len(keys) < chunk
			})
			n = len(keys)
			for _, key := range keys {
				if err := tx.DeleteRaw(k, key); err != nil {
					return err
				}
			}
			return nil
		})
		if isTooLarge(err) && chunk > 1 {
			chunk /= 2
			continue
		}
		if err != nil || n == 0 {
			return err
		}
	}
}

// chunkWriter groups records into transactions of bounded size.
type chunkWriter struct {
	ctx    context.Context
	st     Store
	o      RestoreOptions
	recs   []snapRecord
	bytes  int
	finish bool // the flush that removes the marker
}

func (w *chunkWriter) add(rec snapRecord) error {
	size := len(rec.Key) + len(rec.Value)
	if len(w.recs) > 0 && (len(w.recs)+1 > w.o.ChunkKeys || w.bytes+size > w.o.ChunkBytes) {
		if err := w.flush(); err != nil {
			return err
		}
	}
	// Records share no memory with the reader's buffers (base64 decoding
	// allocates), so they may be kept until the flush.
	w.recs = append(w.recs, rec)
	w.bytes += size
	return nil
}

func (w *chunkWriter) flush() error {
	if len(w.recs) == 0 && !w.finish {
		return nil
	}
	// The marker's removal takes a key of its own in the last chunk.
	if w.finish && len(w.recs)+1 > w.o.ChunkKeys {
		fin := w.finish
		w.finish = false
		if err := w.flush(); err != nil {
			return err
		}
		w.finish = fin
	}
	if err := w.commit(w.recs, w.finish); err != nil {
		return err
	}
	w.recs, w.bytes = w.recs[:0], 0
	return nil
}

// commit writes recs in one transaction (and removes the marker when
// finish). A transaction the store refuses as too large (an etcd cluster
// with a lower --max-txn-ops or --max-request-bytes than the chunk
// bounds) is split in halves, and later chunks are made as small.
func (w *chunkWriter) commit(recs []snapRecord, finish bool) error {
	err := w.st.Update(w.ctx, func(tx WriteTx) error {
		for _, r := range recs {
			if err := tx.PutRaw(r.Bucket, r.Key, r.Value); err != nil {
				return fmt.Errorf("%s %q: %w", r.Bucket, r.Key, err)
			}
		}
		if finish {
			return tx.DeleteRaw(KindMeta, restoringKey)
		}
		return nil
	})
	if isTooLarge(err) && len(recs) > 1 {
		half := len(recs) / 2
		w.o.ChunkKeys = max(half, 1)
		if err := w.commit(recs[:half], false); err != nil {
			return err
		}
		return w.commit(recs[half:], finish)
	}
	return err
}

// Copy copies every key of from into to (migration between stores, of
// the same kind or not), streaming a snapshot from one to the other; to
// must be empty unless o.Force.
func Copy(ctx context.Context, from, to Store, o RestoreOptions) (Summary, error) {
	pr, pw := io.Pipe()
	saved := make(chan error, 1)
	go func() {
		err := Save(ctx, from, pw)
		pw.CloseWithError(err)
		saved <- err
	}()
	sum, err := RestoreWith(ctx, to, pr, o)
	pr.CloseWithError(errCopyStopped)
	serr := <-saved
	if serr == nil || errors.Is(serr, errCopyStopped) {
		return sum, err
	}
	// The source failed: that explains a cut stream. The target was not
	// touched when the header never arrived.
	var fe *FormatError
	if err == nil || (errors.As(err, &fe) && fe.Line == 1) {
		return Summary{}, serr
	}
	return Summary{}, fmt.Errorf("%w (and so: %w)", serr, err)
}

// errCopyStopped ends Copy's Save when the restore has stopped reading.
var errCopyStopped = errors.New("store: copy: the restore stopped reading")
