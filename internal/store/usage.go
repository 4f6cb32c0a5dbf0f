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
//   - KindUsageOpen: the keys of the records not yet ended, so that
//     closing the runs that are no longer running reads only those.
//
// A record is opened by the ApplyPlanMetered transaction that places the
// run and closed by the transaction that ends it (a preemption in
// ApplyPlan, EndRun); CloseOrphanUsage closes what no transaction did.
//   - KindUsageTotals: per tenant and charge, the GPU-hours and cost of
//     the closed records (two float64, big-endian bits), so that the
//     metrics' counters read the closed history without a scan.
const (
	KindUsage       Kind = "usage"
	KindUsageOpen   Kind = "usage-open"
	KindUsageTotals Kind = "usage-totals"
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

// PutUsage writes a usage record (and its open-index entry while open).
func PutUsage(tx WriteTx, r *meter.Record) error {
	k := UsageKey(r.Start, r.Workload, r.Replica)
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: encoding usage %q: %w", k, err)
	}
	if err := tx.PutRaw(KindUsage, k, data); err != nil {
		return err
	}
	if r.Open() {
		return tx.PutRaw(KindUsageOpen, k, []byte{1})
	}
	return tx.DeleteRaw(KindUsageOpen, k)
}

// closeUsage ends the open record under k at now; a record that is
// absent (written before metering) or already closed is left alone.
func closeUsage(tx WriteTx, k string, now time.Time) (bool, error) {
	data, ok := tx.GetRaw(KindUsage, k)
	if !ok {
		return false, tx.DeleteRaw(KindUsageOpen, k)
	}
	var r meter.Record
	if err := json.Unmarshal(data, &r); err != nil {
		return false, fmt.Errorf("store: decoding usage %q: %w", k, err)
	}
	if !r.Open() {
		return false, tx.DeleteRaw(KindUsageOpen, k)
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
	tx.ScanRaw(KindUsageOpen, "", "", func(k string, _ []byte) bool {
		data, ok := tx.GetRaw(KindUsage, k)
		if !ok {
			return true
		}
		var r meter.Record
		if err = json.Unmarshal(data, &r); err != nil {
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
		if e := json.Unmarshal(data, &r); e != nil {
			err = fmt.Errorf("store: decoding usage %q: %w", k, e)
			return false
		}
		return fn(k, &r)
	})
	return err
}
