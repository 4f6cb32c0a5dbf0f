package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Usage records (see package meter) are kept with raw writes (they take no
// revision: writing one wakes no watcher and voids no plan):
//
//   - KindUsage: one record per replica of each run, keyed by
//     UsageKey(start, workload, replica), so that keys sort by start time;
//   - KindUsageOpen: per run still open, keyed by its first record's
//     key, the key of its open record (a spot run is split where its
//     price changed: SplitUsage), so that
//     closing the runs that are no longer running reads only those.
//
// A record is opened by the ApplyPlanMetered transaction that places the
// run and closed by the transaction that ends it (a preemption in
// ApplyPlan, EndRun); CloseOrphanUsage closes what no transaction did.
//   - KindUsageTotals: per tenant and charge, the GPU-hours and cost of
//     the closed records (two float64, big-endian bits), so that the
//     metrics' counters read the closed history without a scan.
//   - KindUsageTuples: per tuple (a record's report dimensions but the
//     workload, meter.AppendTuple's bytes), the number it was given
//     (uvarint, from 1), which its records carry in their heads so that a
//     report finds their group by number (usageTuple, ScanUsageTuples).
const (
	KindUsage       Kind = "usage"
	KindUsageOpen   Kind = "usage-open"
	KindUsageTotals Kind = "usage-totals"
	KindUsageTuples Kind = "usage-tuples"
)

// UsageKey is the key of replica's record of the run of workload wkey
// started at start.
func UsageKey(start time.Time, wkey string, replica int) string {
	return RevKey(start.UnixNano()) + "/" + wkey + "/" + strconv.Itoa(replica)
}

// usageStartKey is the smallest key of records started at t.
func usageStartKey(t time.Time) string { return RevKey(t.UnixNano()) }

// splitUsageKey is UsageKey's inverse.
func splitUsageKey(k string) (start time.Time, wkey string, replica int, err error) {
	ts, rest, ok := strings.Cut(k, "/")
	i := strings.LastIndexByte(rest, '/')
	if !ok || i < 0 {
		return start, "", 0, fmt.Errorf("store: bad usage key %q", k)
	}
	ns, err := ParseRevKey(ts)
	if err != nil {
		return start, "", 0, fmt.Errorf("store: bad usage key %q: %w", k, err)
	}
	replica, err = strconv.Atoi(rest[i+1:])
	if err != nil {
		return start, "", 0, fmt.Errorf("store: bad usage key %q: %w", k, err)
	}
	return time.Unix(0, ns).UTC(), rest[:i], replica, nil
}

// PutUsage writes a usage record in its stored form (meter.AppendRecord)
// and, while it is open, its run's open-index entry (the run's key, its
// first record's, pointing at this record's key); a closed one may
// lengthen the longest closed span (usageLongest).
func PutUsage(tx WriteTx, r *meter.Record) error {
	k := UsageKey(r.Start, r.Workload, r.Replica)
	run := UsageKey(r.Run(), r.Workload, r.Replica)
	if err := startSpans(tx); err != nil {
		return err
	}
	tuple, err := usageTuple(tx, r)
	if err != nil {
		return err
	}
	if err := tx.PutRaw(KindUsage, k, meter.AppendRecordTuple(nil, r, tuple)); err != nil {
		return err
	}
	if r.Open() {
		return tx.PutRaw(KindUsageOpen, run, []byte(k))
	}
	if err := noteSpan(tx, r.End.Sub(r.Start)); err != nil {
		return err
	}
	if cur, ok := tx.GetRaw(KindUsageOpen, run); ok && openSegment(run, cur) != k {
		return nil // the run goes on in a later record
	}
	return tx.DeleteRaw(KindUsageOpen, run)
}

// tuplesKey is where KindUsageTotals keeps the last number given to a
// tuple (8 bytes big-endian); like longestKey it has no '/'.
const tuplesKey = "#tuples"

// usageTuple returns the number of r's tuple, numbering it when it has
// none; 0 (no number: the record is summed from its strings) once
// meter.MaxTuple tuples have numbers, or for a damaged number.
func usageTuple(tx WriteTx, r *meter.Record) (uint32, error) {
	k := string(meter.AppendTuple(nil, r))
	if v, ok := tx.GetRaw(KindUsageTuples, k); ok {
		n, m := binary.Uvarint(v)
		if m <= 0 || n == 0 || n > meter.MaxTuple {
			return 0, nil
		}
		return uint32(n), nil
	}
	var last uint64
	if v, ok := tx.GetRaw(KindUsageTotals, tuplesKey); ok && len(v) == 8 {
		last = binary.BigEndian.Uint64(v)
	}
	if last >= meter.MaxTuple {
		return 0, nil
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], last+1)
	if err := tx.PutRaw(KindUsageTotals, tuplesKey, b[:]); err != nil {
		return 0, err
	}
	return uint32(last + 1), tx.PutRaw(KindUsageTuples, k, binary.AppendUvarint(nil, last+1))
}

// ScanUsageTuples calls fn with the number and the stored form
// (meter.AppendTuple's; valid during fn) of every numbered tuple, until
// fn returns false. A damaged number is skipped: its records are
// summed from their strings.
func ScanUsageTuples(tx ReadTx, fn func(n uint32, tuple []byte) bool) {
	tx.ScanRaw(KindUsageTuples, "", "", func(k string, v []byte) bool {
		n, m := binary.Uvarint(v)
		if m <= 0 || n == 0 || n > meter.MaxTuple {
			return true
		}
		return fn(uint32(n), []byte(k))
	})
}

// openSegment is the key of the open record of the run keyed run, from
// its open-index value (the record's key; written as 1 before runs were
// split: the run's key itself).
func openSegment(run string, v []byte) string {
	if len(v) <= 1 {
		return run
	}
	return string(v)
}

// longestKey is where KindUsageTotals keeps the longest span (end −
// start, nanoseconds, 8 bytes big-endian) of any closed record: a report
// over [since, until) reads the closed records started from since minus
// it, and the open ones from the open index. (No tenant name has '#'; the
// totals' scan skips a key without '/'.)
const longestKey = "#longest"

// unbounded is the longest span of a store whose records predate
// longestKey: every report reads from the first record.
const unbounded = time.Duration(math.MaxInt64)

// usageLongest returns the longest closed span; ok false when none was
// noted.
func usageLongest(tx ReadTx) (time.Duration, bool) {
	v, ok := tx.GetRaw(KindUsageTotals, longestKey)
	if !ok || len(v) != 8 {
		return 0, false
	}
	return time.Duration(binary.BigEndian.Uint64(v)), true
}

// startSpans notes a longest span of 0 in a store that has no record
// yet, or an unbounded one in a store whose records were written before
// spans were noted (so that every report reads all of them).
func startSpans(tx WriteTx) error {
	if _, ok := usageLongest(tx); ok {
		return nil
	}
	d := time.Duration(0)
	tx.ScanRaw(KindUsage, "", "", func(string, []byte) bool { d = unbounded; return false })
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(d))
	return tx.PutRaw(KindUsageTotals, longestKey, b[:])
}

// noteSpan lengthens the longest closed span to d where it is longer.
func noteSpan(tx WriteTx, d time.Duration) error {
	if cur, _ := usageLongest(tx); d <= cur {
		return nil
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(d))
	return tx.PutRaw(KindUsageTotals, longestKey, b[:])
}

// openRecord returns the open record of the run keyed run and its key;
// ok false (and the run's open-index entry deleted) when the run has none
// open (never metered, or closed).
func openRecord(tx WriteTx, run string) (r meter.Record, k string, ok bool, err error) {
	v, indexed := tx.GetRaw(KindUsageOpen, run)
	k = run
	if indexed {
		k = openSegment(run, v)
	}
	data, found := tx.GetRaw(KindUsage, k)
	if found {
		if err := meter.DecodeRecord(data, &r); err != nil {
			return r, k, false, fmt.Errorf("store: decoding usage %q: %w", k, err)
		}
	}
	if !found || !r.Open() {
		return r, k, false, tx.DeleteRaw(KindUsageOpen, run)
	}
	return r, k, true, nil
}

// closeUsage ends the open record of the run keyed run at now; a run
// without one (written before metering, or already closed) is left alone.
func closeUsage(tx WriteTx, run string, now time.Time) (bool, error) {
	r, _, ok, err := openRecord(tx, run)
	if err != nil || !ok {
		return false, err
	}
	r.End = now
	if r.End.Before(r.Start) {
		r.End = r.Start
	}
	if err := addUsageTotal(tx, &r); err != nil {
		return false, err
	}
	return true, PutUsage(tx, &r)
}

// UsageTotal is the GPU-hours and cost (USD) of one tenant's use at one
// charge.
type UsageTotal struct {
	Tenant   string
	Charge   meter.Charge
	GPUHours float64
	Cost     float64
}

func usageTotalKey(tenant string, c meter.Charge) string { return tenant + "/" + c.String() }

func readUsageTotal(tx ReadTx, k string) (gpuh, cost float64) {
	v, ok := tx.GetRaw(KindUsageTotals, k)
	if !ok || len(v) != 16 {
		return 0, 0
	}
	return math.Float64frombits(binary.BigEndian.Uint64(v[:8])), math.Float64frombits(binary.BigEndian.Uint64(v[8:]))
}

// addUsageTotal adds the closed record r to its tenant's totals.
func addUsageTotal(tx WriteTx, r *meter.Record) error {
	k := usageTotalKey(r.Tenant, r.Charge)
	gpuh, cost := readUsageTotal(tx, k)
	h := r.GPUHours(r.Start, r.End)
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], math.Float64bits(gpuh+h))
	binary.BigEndian.PutUint64(b[8:], math.Float64bits(cost+h*r.UnitPrice))
	return tx.PutRaw(KindUsageTotals, k, b[:])
}

// UsageTotals returns every tenant's use by charge up to now: the closed
// records' totals and the open records' use so far, in (tenant, charge)
// order. It reads the totals and the open records only.
func UsageTotals(tx ReadTx, now time.Time) ([]UsageTotal, error) {
	sum := map[string]*UsageTotal{}
	var keys []string
	at := func(tenant string, c meter.Charge) *UsageTotal {
		k := usageTotalKey(tenant, c)
		t := sum[k]
		if t == nil {
			t = &UsageTotal{Tenant: tenant, Charge: c}
			sum[k] = t
			keys = append(keys, k)
		}
		return t
	}
	var err error
	tx.ScanRaw(KindUsageTotals, "", "", func(k string, _ []byte) bool {
		i := strings.LastIndexByte(k, '/')
		var c meter.Charge
		if i < 0 || c.UnmarshalText([]byte(k[i+1:])) != nil {
			return true
		}
		t := at(k[:i], c)
		t.GPUHours, t.Cost = readUsageTotal(tx, k)
		return true
	})
	tx.ScanRaw(KindUsageOpen, "", "", func(run string, v []byte) bool {
		k := openSegment(run, v)
		data, ok := tx.GetRaw(KindUsage, k)
		if !ok {
			return true
		}
		var r meter.Record
		if err = meter.DecodeRecord(data, &r); err != nil {
			err = fmt.Errorf("store: decoding usage %q: %w", k, err)
			return false
		}
		h := r.GPUHours(r.Start, now)
		t := at(r.Tenant, r.Charge)
		t.GPUHours += h
		t.Cost += h * r.UnitPrice
		return true
	})
	slices.Sort(keys)
	out := make([]UsageTotal, 0, len(keys))
	for _, k := range keys {
		out = append(out, *sum[k])
	}
	return out, err
}

// CloseRun ends the usage records of w's current run at now (call it
// before the run is taken from w); a workload not running has none.
func CloseRun(tx WriteTx, w *Workload, now time.Time) error {
	a := w.Running
	if a == nil {
		return nil
	}
	return closeReplicas(tx, w, 0, len(a.Replicas), now)
}

// closeReplicas ends the usage records of replicas from..to-1 of w's
// current run at now (those an elastic workload's shrink removes).
func closeReplicas(tx WriteTx, w *Workload, from, to int, now time.Time) error {
	a := w.Running
	for i := from; i < to && i < len(a.Replicas); i++ {
		if _, err := closeUsage(tx, UsageKey(a.ReplicaStart(i), w.Key(), i), now); err != nil {
			return err
		}
	}
	return nil
}

// EndRun ends w in state st at now for reason (Workload.End) and closes
// its run's usage records in the same transaction; the caller writes w.
func EndRun(tx WriteTx, w *Workload, st State, now time.Time, reason string) error {
	if err := CloseRun(tx, w, now); err != nil {
		return err
	}
	w.End(st, now, reason)
	return nil
}

// Metering makes the usage records of a run ApplyPlanMetered places: one
// per replica of a, opened when it started (a.ReplicaStart; the replicas
// an elastic workload grows by start later than its run).
type Metering func(w *Workload, a *workload.Assignment) []meter.Record

// OpenUsage calls fn with the key, workload and run start of every open
// usage record, in key order, until fn returns false.
func OpenUsage(tx ReadTx, fn func(key, wkey string, start time.Time) bool) error {
	var err error
	tx.ScanRaw(KindUsageOpen, "", "", func(k string, _ []byte) bool {
		start, wkey, _, e := splitUsageKey(k)
		if e != nil {
			err = e
			return false
		}
		return fn(k, wkey, start)
	})
	return err
}

// CloseOrphanUsage closes at now every open record whose workload does
// not run that run any more (ended, evicted or deleted without its record
// closed), and returns how many it closed. Only keys (when given) are
// looked at; nil looks at every open record.
func CloseOrphanUsage(tx WriteTx, now time.Time, keys []string) (int, error) {
	if keys == nil {
		if err := OpenUsage(tx, func(k, _ string, _ time.Time) bool { keys = append(keys, k); return true }); err != nil {
			return 0, err
		}
	}
	n := 0
	for _, k := range keys {
		start, wkey, replica, err := splitUsageKey(k)
		if err != nil {
			return n, err
		}
		if w, err := Get[Workload](tx, wkey); err == nil && w.State == StateRunning && w.Running != nil &&
			replica < len(w.Running.Replicas) && w.Running.ReplicaStart(replica).Equal(start) {
			continue
		}
		closed, err := closeUsage(tx, k, now)
		if err != nil {
			return n, err
		}
		if closed {
			n++
		}
	}
	return n, nil
}

// ScanUsage calls fn with every usage record after key after ("": from
// the first) that started before until, in key (start) order, until fn
// returns false. The record is fn's to keep.
func ScanUsage(tx ReadTx, after string, until time.Time, fn func(key string, r *meter.Record) bool) error {
	end := usageStartKey(until)
	var err error
	tx.ScanRaw(KindUsage, "", after, func(k string, data []byte) bool {
		if k >= end {
			return false
		}
		var r meter.Record
		if e := meter.DecodeRecord(data, &r); e != nil {
			err = fmt.Errorf("store: decoding usage %q: %w", k, e)
			return false
		}
		return fn(k, &r)
	})
	return err
}

// ScanUsageWindow calls fn with every usage record whose interval meets
// [since, until), read in place (the view is valid only during fn), until
// fn returns false; see ScanUsageWindowRaw for which records are read.
func ScanUsageWindow(tx ReadTx, since, until time.Time, fn func(v *meter.RecordView) bool) error {
	s, u := since.UnixNano(), until.UnixNano()
	var v meter.RecordView
	var err error
	ScanUsageWindowRaw(tx, since, until, func(data []byte) bool {
		if meter.IsJSON(data) {
			var r meter.Record
			if e := json.Unmarshal(data, &r); e != nil {
				err = fmt.Errorf("store: decoding a usage record: %w", e)
				return false
			}
			meter.ViewOf(&r, &v)
		} else if e := v.Decode(data); e != nil {
			err = fmt.Errorf("store: decoding a usage record: %w", e)
			return false
		}
		if (v.End != 0 && v.End <= s) || v.Start >= u {
			return true
		}
		return fn(&v)
	})
	return err
}

// ScanUsageWindowRaw calls fn with the stored bytes of the usage records
// a window [since, until) may hold, until fn returns false: the records
// started from since minus the longest closed span up to until, in key
// (start) order, then the open records started before that (from the
// open index). A few may end before since: the caller clips
// (meter.Aggregator does). Unlike ScanRaw's, the bytes stay valid for the
// whole read transaction (View's; bolt's are in its memory map, etcd's
// in its snapshot), so that they may be summed while the scan goes on
// (meter.Summer).
func ScanUsageWindowRaw(tx ReadTx, since, until time.Time, fn func(data []byte) bool) {
	from := "" // from the first record
	if d, ok := usageLongest(tx); ok && d != unbounded && since.UnixNano()-int64(d) > 0 {
		from = usageStartKey(since.Add(-d))
	}
	end := usageStartKey(until)
	more := true
	// after is exclusive: from (a bare time, which no record's key is)
	// seeks to the first record started at or after it.
	if bs, ok := tx.(bytesScanner); ok {
		n := len(end) // a bare time: a key's first 16 bytes decide
		bs.scanRawBytes(KindUsage, from, func(k, data []byte) bool {
			if len(k) >= n && string(k[:n]) >= end || len(k) < n && string(k) >= end {
				return false
			}
			more = fn(data)
			return more
		})
	} else {
		tx.ScanRaw(KindUsage, "", from, func(k string, data []byte) bool {
			if k >= end {
				return false
			}
			more = fn(data)
			return more
		})
	}
	if !more || from == "" {
		return
	}
	tx.ScanRaw(KindUsageOpen, "", "", func(run string, v []byte) bool {
		if run >= from {
			return false
		}
		// A run's later record started from `from` on was read above.
		if k := openSegment(run, v); k < from {
			if data, ok := tx.GetRaw(KindUsage, k); ok {
				return fn(data)
			}
		}
		return true
	})
}

// bytesScanner is ScanRaw without a string per key (the bolt store's).
type bytesScanner interface {
	scanRawBytes(k Kind, after string, fn func(key, data []byte) bool)
}

// PruneUsage deletes, oldest first, the usage records closed before
// cutoff (a record that ended at or after it, or is still open, is kept
// whole), looking at the records after key after ("": from the first),
// at most limit of them, in tx. It returns how many it deleted and the
// last key it looked at, to go on from in the next transaction ("" when
// no record before cutoff is left to look at). The totals (the counters)
// keep the deleted records' use.
func PruneUsage(tx WriteTx, cutoff time.Time, after string, limit int) (deleted int, last string, err error) {
	end := usageStartKey(cutoff)
	var doomed []string
	seen := 0
	tx.ScanRaw(KindUsage, "", after, func(k string, data []byte) bool {
		if k >= end {
			last = ""
			return false
		}
		var r meter.Record
		if e := meter.DecodeRecord(data, &r); e != nil {
			err = fmt.Errorf("store: decoding usage %q: %w", k, e)
			return false
		}
		if !r.Open() && r.End.Before(cutoff) {
			doomed = append(doomed, k)
		}
		seen++
		last = k
		return seen < limit
	})
	if err != nil {
		return 0, "", err
	}
	if seen < limit {
		last = "" // the scan reached cutoff or the end
	}
	for _, k := range doomed {
		if err := tx.DeleteRaw(KindUsage, k); err != nil {
			return 0, "", err
		}
	}
	return len(doomed), last, nil
}

// SplitUsage ends the open record of the run keyed run at at and opens
// the run's next record from at, in tx, when reprice, given the open
// record (cur, not to be changed) and that next record (a copy of it from
// at), sets new prices on next and returns true: a run whose price
// changed is charged each price for its own part. It returns false,
// changing nothing, when reprice does, when the run has no open record,
// or when that record started at or after at.
func SplitUsage(tx WriteTx, run string, at time.Time, reprice func(cur, next *meter.Record) bool) (bool, error) {
	r, _, ok, err := openRecord(tx, run)
	if err != nil || !ok || !r.Start.Before(at) {
		return false, err
	}
	next := r
	next.Path = slices.Clone(r.Path)
	next.Start, next.RunStart = at, r.Run()
	if !reprice(&r, &next) {
		return false, nil
	}
	r.End = at
	if err := addUsageTotal(tx, &r); err != nil {
		return false, err
	}
	if err := PutUsage(tx, &r); err != nil {
		return false, err
	}
	return true, PutUsage(tx, &next)
}
