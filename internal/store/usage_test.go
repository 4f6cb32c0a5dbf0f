package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// usageRecord is a record like the server writes: a replica of a run of
// tenant's workload on one node.
func usageRecord(tenant, name string, replica int, start time.Time) meter.Record {
	return meter.Record{Workload: WorkloadKey(tenant, name), Replica: replica, Tenant: tenant, TenantRev: 12, Path: []string{"org", tenant},
		Kind: "training", Class: "research", SKU: "Standard_ND96amsr_A100_v4", Model: "A100-80G", Region: "eastus", Node: "eus-a-n0001",
		GPUs: 8000, Start: start, Charge: meter.ChargeGuarantee, UnitPrice: 4.09625, ListPrice: 4.09625}
}

// TestUsageRecordsOpenCloseOrphans: a run's records open with the run,
// close with it (once: closing again changes nothing), the totals count
// closed ones and open ones up to now, and CloseOrphanUsage closes the
// records of runs that no longer run and leaves the running ones; open
// records survive a restart. On both stores.
func TestUsageRecordsOpenCloseOrphans(t *testing.T) {
	forEachStore(t, testUsageRecords)
}

func testUsageRecords(t *testing.T, st testStore, reopen func() testStore) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &workload.Assignment{Flavor: "A100-80G", Region: "eastus", StartedAt: t0, Replicas: []workload.Replica{{Node: "n1", GPUs: []int{0}, Milli: 1000}, {Node: "n2", GPUs: []int{0}, Milli: 1000}}}
	ws := []*Workload{
		{Tenant: "t", State: StateRunning, Spec: workload.Spec{Name: "ends", Replicas: 2, GPUs: 1000}, Running: a},
		{Tenant: "t", State: StateRunning, Spec: workload.Spec{Name: "runs", Replicas: 2, GPUs: 1000}, Running: a},
		{Tenant: "t", State: StateRunning, Spec: workload.Spec{Name: "orphan", Replicas: 2, GPUs: 1000}, Running: a},
	}
	err := st.Update(ctx, func(tx WriteTx) error {
		for _, w := range ws {
			if err := Put(tx, w, MustNotExist); err != nil {
				return err
			}
			for i := range a.Replicas {
				r := usageRecord(w.Tenant, string(w.Spec.Name), i, t0)
				r.GPUs, r.Node, r.SKU = 1000, a.Replicas[i].Node, fleet.SKUName("S")
				if err := PutUsage(tx, &r); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st = reopen()
	t1 := t0.Add(2 * time.Hour)
	err = st.Update(ctx, func(tx WriteTx) error {
		w, _ := Get[Workload](tx, "t/ends")
		if err := EndRun(tx, w, StateSucceeded, t1, "done"); err != nil {
			return err
		}
		if err := CloseRun(tx, &Workload{Tenant: "t", Spec: w.Spec, Running: a}, t1.Add(time.Hour)); err != nil { // again: no change
			return err
		}
		if err := Put(tx, w, Any); err != nil {
			return err
		}
		o, _ := Get[Workload](tx, "t/orphan")
		o.End(StateCancelled, t1, "behind the meter's back")
		return Put(tx, o, Any)
	})
	if err != nil {
		t.Fatal(err)
	}
	t2 := t0.Add(3 * time.Hour)
	var closed int
	err = st.Update(ctx, func(tx WriteTx) error {
		closed, err = CloseOrphanUsage(tx, t2, nil)
		return err
	})
	if err != nil || closed != 2 {
		t.Fatalf("CloseOrphanUsage closed %d (%v), want the orphan's 2", closed, err)
	}
	want := map[string]time.Time{"t/ends": t1, "t/orphan": t2, "t/runs": {}}
	var totals []UsageTotal
	err = st.View(ctx, func(tx ReadTx) error {
		n := 0
		err := ScanUsage(tx, "", t2, func(k string, r *meter.Record) bool {
			n++
			if !r.End.Equal(want[r.Workload]) {
				t.Errorf("%s: end %s, want %s", k, r.End, want[r.Workload])
			}
			return true
		})
		if n != 6 {
			t.Errorf("%d records, want 6", n)
		}
		open := 0
		OpenUsage(tx, func(string, string, time.Time) bool { open++; return true })
		if open != 2 {
			t.Errorf("%d open, want the 2 of t/runs", open)
		}
		totals, err = UsageTotals(tx, t0.Add(4*time.Hour))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// ends: 2 × 2 h, orphan: 2 × 3 h, runs: 2 × 4 h so far.
	if len(totals) != 1 || totals[0].GPUHours != 18 || totals[0].Charge != meter.ChargeGuarantee {
		t.Errorf("totals %+v, want t guarantee 18 GPU-hours", totals)
	}
}

// BenchmarkUsageRecordSize writes N usage records (100,000 with -short
// off, in commits of 1,000, as plans of 1,000 replicas would) and reports
// the bbolt file's bytes per record and the time to read them all back.
func BenchmarkUsageRecordSize(b *testing.B) {
	const n, per = 100_000, 1_000
	for b.Loop() {
		dir := b.TempDir()
		st, err := OpenBolt(filepath.Join(dir, "a.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		size := func() int64 {
			fi, err := os.Stat(st.Path())
			if err != nil {
				b.Fatal(err)
			}
			return fi.Size()
		}
		empty := size()
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for c := 0; c < n/per; c++ {
			err := st.Update(ctx, func(tx WriteTx) error {
				for i := range per {
					j := c*per + i
					r := usageRecord(fmt.Sprintf("tenant-%03d", j%200), fmt.Sprintf("job-%06d", j/8), j%8, t0.Add(time.Duration(j)*time.Second))
					r.End = r.Start.Add(time.Hour)
					if err := PutUsage(tx, &r); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		got := 0
		st.View(ctx, func(tx ReadTx) error {
			return ScanUsage(tx, "", t0.Add(1000*time.Hour), func(string, *meter.Record) bool { got++; return true })
		})
		read := time.Since(start)
		if got != n {
			b.Fatalf("read %d records back, want %d", got, n)
		}
		b.ReportMetric(float64(size()-empty)/n, "file-bytes/record")
		b.ReportMetric(float64(read.Nanoseconds())/n, "read-ns/record")
		st.Close()
	}
}

// TestScanUsageWindow: the window scan visits exactly the records whose
// interval meets the window (checked against a naive filter of all of
// them), on both stores: short and long closed records, open ones started
// long before the window (found through the open index), and, in a second
// store, a record written as JSON before the stored form (which makes every
// scan read from the first record).
func TestScanUsageWindow(t *testing.T) {
	forEachStore(t, func(t *testing.T, st testStore, _ func() testStore) { testScanUsageWindow(t, st, false) })
	forEachStore(t, func(t *testing.T, st testStore, _ func() testStore) { testScanUsageWindow(t, st, true) })
}

func testScanUsageWindow(t *testing.T, st testStore, oldJSON bool) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var all []meter.Record
	for i := range 240 { // one an hour for 10 days
		r := usageRecord(fmt.Sprintf("t%d", i%3), fmt.Sprintf("w%d", i), 0, t0.Add(time.Duration(i)*time.Hour))
		switch {
		case i%50 == 0:
			// open
		case i%17 == 0:
			r.End = r.Start.Add(5 * 24 * time.Hour) // long
		default:
			r.End = r.Start.Add(time.Duration(1+i%5) * time.Hour)
		}
		all = append(all, r)
	}
	err := st.Update(ctx, func(tx WriteTx) error {
		if oldJSON { // a closed record from before the stored form, with no span noted
			old := usageRecord("t0", "old", 0, t0.Add(-30*24*time.Hour))
			old.End = t0.Add(6 * 24 * time.Hour)
			data, _ := json.Marshal(old)
			if err := tx.PutRaw(KindUsage, UsageKey(old.Start, old.Workload, 0), data); err != nil {
				return err
			}
			all = append(all, old)
		}
		for i := range all {
			if oldJSON && all[i].Workload == "t0/old" {
				continue
			}
			if err := PutUsage(tx, &all[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range [][2]time.Duration{{0, 240 * time.Hour}, {100 * time.Hour, 101 * time.Hour}, {200 * time.Hour, 300 * time.Hour},
		{-40 * 24 * time.Hour, -10 * time.Hour}, {7 * 24 * time.Hour, 8 * 24 * time.Hour}, {239 * time.Hour, 1000 * time.Hour}} {
		since, until := t0.Add(w[0]), t0.Add(w[1])
		want := map[string]bool{}
		for _, r := range all {
			if _, _, ok := r.Span(since, until); ok {
				want[UsageKey(r.Start, r.Workload, r.Replica)] = true
			}
		}
		got := map[string]bool{}
		err := st.View(ctx, func(tx ReadTx) error {
			return ScanUsageWindow(tx, since, until, func(v *meter.RecordView) bool {
				r := v.Record()
				k := UsageKey(r.Start, r.Workload, r.Replica)
				if got[k] {
					t.Errorf("%s visited twice", k)
				}
				got[k] = true
				return true
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("window %v: (-want +got):\n%s", w, d)
		}
	}
}

// TestSplitUsage: a run split twice has three contiguous records, one
// open index entry pointing at the last, CloseRun closes that last one,
// and window scans find each part once (the open part through the open
// index when it started before the scan's first key). On both stores.
func TestSplitUsage(t *testing.T) {
	forEachStore(t, func(t *testing.T, st testStore, _ func() testStore) {
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		day := 24 * time.Hour
		w := &Workload{Tenant: "t", State: StateRunning, Spec: workload.Spec{Name: "spot", Replicas: 1, GPUs: 1000},
			Running: &workload.Assignment{StartedAt: t0, Replicas: []workload.Replica{{Node: "n1", GPUs: []int{0}, Milli: 1000}}}}
		run := UsageKey(t0, "t/spot", 0)
		price := 1.0
		reprice := func(_, r *meter.Record) bool { price++; r.UnitPrice = price; return true }
		err := st.Update(ctx, func(tx WriteTx) error {
			r := usageRecord("t", "spot", 0, t0)
			r.GPUs, r.UnitPrice = 1000, 1
			if err := PutUsage(tx, &r); err != nil {
				return err
			}
			short := usageRecord("t", "short", 0, t0.Add(10*day)) // a short closed record: the longest span is an hour
			short.End = short.Start.Add(time.Hour)
			if err := PutUsage(tx, &short); err != nil {
				return err
			}
			for _, at := range []time.Duration{8 * day, 9 * day} {
				if ok, err := SplitUsage(tx, run, t0.Add(at), reprice); err != nil || !ok {
					return fmt.Errorf("split at %v: %v %v", at, ok, err)
				}
			}
			if ok, err := SplitUsage(tx, run, t0.Add(9*day), reprice); ok || err != nil { // not after the open part's start
				return fmt.Errorf("split again at the same time: %v %v", ok, err)
			}
			if ok, _ := SplitUsage(tx, run, t0.Add(9*day+time.Hour), func(_, _ *meter.Record) bool { return false }); ok {
				return fmt.Errorf("split though reprice declined")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		visits := func(since, until time.Duration) map[float64]int {
			got := map[float64]int{}
			st.View(ctx, func(tx ReadTx) error {
				return ScanUsageWindow(tx, t0.Add(since), t0.Add(until), func(v *meter.RecordView) bool {
					if string(v.Workload) == "t/spot" {
						got[v.UnitPrice]++
					}
					return true
				})
			})
			return got
		}
		if d := cmp.Diff(map[float64]int{1: 1, 2: 1, 3: 1}, visits(0, 20*day)); d != "" {
			t.Errorf("whole window (-want +got):\n%s", d)
		}
		if d := cmp.Diff(map[float64]int{3: 1}, visits(12*day, 13*day)); d != "" {
			t.Errorf("late window, the open part only (-want +got):\n%s", d)
		}
		if d := cmp.Diff(map[float64]int{1: 1}, visits(7*day, 7*day+time.Hour)); d != "" {
			t.Errorf("window in the first part (-want +got):\n%s", d)
		}
		end := t0.Add(11 * day)
		err = st.Update(ctx, func(tx WriteTx) error { return CloseRun(tx, w, end) })
		if err != nil {
			t.Fatal(err)
		}
		var parts []meter.Record
		open := 0
		var totals []UsageTotal
		st.View(ctx, func(tx ReadTx) error {
			ScanUsage(tx, "", end, func(_ string, r *meter.Record) bool {
				if r.Workload == "t/spot" {
					parts = append(parts, *r)
				}
				return true
			})
			OpenUsage(tx, func(string, string, time.Time) bool { open++; return true })
			totals, _ = UsageTotals(tx, end)
			return nil
		})
		if len(parts) != 3 || open != 0 || !parts[2].End.Equal(end) || !parts[1].Start.Equal(parts[0].End) || !parts[2].RunStart.Equal(t0) {
			t.Errorf("after CloseRun: %d open, parts %+v", open, parts)
		}
		// 8 days at 1, 1 at 2, 2 at 3 (1 GPU); the short record was
		// written closed (not closed here): it is in no total.
		want := 24.0 * (8*1 + 1*2 + 2*3)
		if len(totals) != 1 || totals[0].Cost < want-1e-6 || totals[0].Cost > want+1e-6 {
			t.Errorf("totals %+v, want cost %v", totals, want)
		}
	})
}

// TestApplyPlanResize: an elastic workload's growth opens usage records
// for the replicas it adds, from the growth on; a shrink ends the records
// of the replicas it removes and leaves the others open; growing again
// opens new records (the closed ones are kept); the orphan sweep keeps
// every record of the run that still runs; GPU-hours are conserved. On
// both stores.
func TestApplyPlanResize(t *testing.T) {
	forEachStore(t, testApplyPlanResize)
}

func testApplyPlanResize(t *testing.T, st testStore, _ func() testStore) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := func(w *Workload, a *workload.Assignment) []meter.Record {
		var out []meter.Record
		for i, rep := range a.Replicas {
			r := usageRecord(w.Tenant, string(w.Spec.Name), i, a.ReplicaStart(i))
			r.GPUs, r.Node = 1000, rep.Node
			out = append(out, r)
		}
		return out
	}
	spec := workload.Spec{Name: "serve", Tenant: "t", Replicas: 2, GPUs: 1000, Elastic: &workload.Elastic{Min: 2, Max: 4, Step: 1}}
	a := &workload.Assignment{Flavor: "A100-80G", Region: "eastus", StartedAt: t0,
		Replicas: []workload.Replica{{Node: "n1", GPUs: []int{0}, Milli: 1000}, {Node: "n1", GPUs: []int{1}, Milli: 1000}}}
	var rev int64
	err := st.Update(ctx, func(tx WriteTx) error {
		w := &Workload{Tenant: "t", State: StateRunning, Spec: spec, Running: a}
		if err := Put(tx, w, MustNotExist); err != nil {
			return err
		}
		for _, r := range m(w, a) {
			if err := PutUsage(tx, &r); err != nil {
				return err
			}
		}
		rev = tx.Revision()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(p sched.Plan, now time.Time) Applied {
		t.Helper()
		var res Applied
		err := st.Update(ctx, func(tx WriteTx) error {
			var err error
			res, err = ApplyPlanMetered(tx, rev, p, now, m)
			rev = tx.Revision()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	add := func(from int, gpus ...int) []sched.Placement {
		var ps []sched.Placement
		for i, g := range gpus {
			ps = append(ps, sched.Placement{Workload: "t/serve", Replica: from + i, Node: "n1", GPUs: []int{g}, Milli: 1000, Flavor: "A100-80G", Region: "eastus"})
		}
		return ps
	}
	t1, t2, t3, t4 := t0.Add(time.Hour), t0.Add(3*time.Hour), t0.Add(4*time.Hour), t0.Add(6*time.Hour)
	if res := apply(sched.Plan{Resizes: []sched.Resize{{Workload: "t/serve", From: 2, To: 4, Reason: "grows", Add: add(2, 2, 3)}}}, t1); res.Resized != 1 {
		t.Fatalf("growth applied %+v", res)
	}
	apply(sched.Plan{Resizes: []sched.Resize{{Workload: "t/serve", From: 4, To: 2, By: "u/claim", Reason: "gives growth back to u/claim"}}}, t2)
	apply(sched.Plan{Resizes: []sched.Resize{{Workload: "t/serve", From: 2, To: 3, Reason: "grows", Add: add(2, 5)}}}, t3)
	// A stale resize (the workload no longer runs that many) is refused.
	err = st.Update(ctx, func(tx WriteTx) error {
		_, err := ApplyPlanMetered(tx, rev, sched.Plan{Resizes: []sched.Resize{{Workload: "t/serve", From: 4, To: 2}}}, t3, m)
		return err
	})
	if !errors.Is(err, ErrConflict) {
		t.Errorf("stale resize: %v, want ErrConflict", err)
	}
	err = st.Update(ctx, func(tx WriteTx) error {
		n, err := CloseOrphanUsage(tx, t4, nil)
		if n != 0 {
			t.Errorf("orphan sweep closed %d records of a running workload", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	st.View(ctx, func(tx ReadTx) error {
		w, _ := Get[Workload](tx, "t/serve")
		if w.Spec.Replicas != 3 || len(w.Running.Replicas) != 3 || !w.Running.ReplicaStart(2).Equal(t3) || !w.Running.ReplicaStart(1).Equal(t0) {
			t.Errorf("workload after resizes: replicas %d, running %+v", w.Spec.Replicas, w.Running)
		}
		type span struct{ start, end time.Time }
		var got []span
		ScanUsage(tx, "", t4, func(_ string, r *meter.Record) bool {
			got = append(got, span{r.Start, r.End})
			return true
		})
		want := []span{{t0, time.Time{}}, {t0, time.Time{}}, {t1, t2}, {t1, t2}, {t3, time.Time{}}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("usage records %v, want %v", got, want)
		}
		totals, _ := UsageTotals(tx, t4)
		// 2 × 6 h + 2 × 2 h + 1 × 2 h.
		if len(totals) != 1 || totals[0].GPUHours != 18 {
			t.Errorf("totals %+v, want 18 GPU-hours", totals)
		}
		evs, _ := List[Event](tx, "")
		n := 0
		for _, e := range evs {
			if e.Is(EventWorkloadResized) {
				n++
			}
		}
		if n != 3 {
			t.Errorf("%d resize events, want 3", n)
		}
		return nil
	})
}

// TestUsageTuples: each record's tuple (its report dimensions but the
// workload) is numbered once, from 1, in the transaction that writes the
// record; a record's head carries its tuple's number, closing it keeps
// the number, and the numbering goes on after a restart. On both stores.
func TestUsageTuples(t *testing.T) {
	forEachStore(t, testUsageTuples)
}

func testUsageTuples(t *testing.T, st testStore, reopen func() testStore) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := []meter.Record{usageRecord("a", "w1", 0, t0), usageRecord("a", "w1", 1, t0), usageRecord("b", "w2", 0, t0), usageRecord("a", "w3", 0, t0)}
	recs[3].Charge = meter.ChargeSpot // a's second tuple
	put := func(st testStore, rs ...meter.Record) {
		t.Helper()
		err := st.Update(ctx, func(tx WriteTx) error {
			for i := range rs {
				if err := PutUsage(tx, &rs[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(st testStore, want int) {
		t.Helper()
		err := st.View(ctx, func(tx ReadTx) error {
			byNum := map[uint32]string{}
			ScanUsageTuples(tx, func(n uint32, tuple []byte) bool {
				if _, dup := byNum[n]; dup {
					t.Errorf("tuple number %d given twice", n)
				}
				byNum[n] = string(tuple)
				return true
			})
			if len(byNum) != want {
				t.Errorf("%d tuples numbered, want %d", len(byNum), want)
			}
			for n := range want {
				if _, ok := byNum[uint32(n+1)]; !ok {
					t.Errorf("no tuple numbered %d", n+1)
				}
			}
			return ScanUsage(tx, "", t0.Add(time.Hour), func(k string, r *meter.Record) bool {
				data, _ := tx.GetRaw(KindUsage, k)
				var h meter.RecordHead
				if !meter.Head(data, &h) {
					t.Errorf("%s: no head", k)
				} else if byNum[h.Tuple] != string(meter.AppendTuple(nil, r)) {
					t.Errorf("%s: its head's tuple %d is not its own", k, h.Tuple)
				}
				return true
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put(st, recs...)
	check(st, 3)
	closed := recs[0]
	closed.End = t0.Add(30 * time.Minute)
	put(st, closed)
	check(st, 3)
	st = reopen()
	c := usageRecord("c", "w4", 0, t0)
	put(st, c, recs[2])
	check(st, 4)
}
