package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/store"
)

// runInterval is one replica of one run as the event log tells it.
type runInterval struct {
	workload   string
	start, end time.Time // end zero: still running
	replica    int
}

func (r runInterval) String() string {
	return fmt.Sprintf("%s/%d [%s, %s)", r.workload, r.replica, r.start.Format(time.RFC3339Nano), r.end.Format(time.RFC3339Nano))
}

// referenceIntervals derives every run from the event log alone (not from
// the usage records): a WorkloadPlaced event opens a run at its time, the
// next WorkloadPreempted, WorkloadCancelled, WorkloadSucceeded or
// WorkloadFailed event of the workload closes it at its time; a
// WorkloadResized event ("resized from F to T replicas") of an elastic
// workload opens replicas F..T-1 at its time (growth) or closes T..F-1
// (shrink). The replicas a run starts with (its min for an elastic
// workload) and the GPUs come from the workloads' specs. The events are
// written in the same transactions as the changes, so they are the
// plans' history.
func referenceIntervals(t testing.TB, tx store.ReadTx) (map[string]runInterval, map[string]float64) {
	t.Helper()
	ws, err := store.List[store.Workload](tx, "")
	if err != nil {
		t.Fatal(err)
	}
	spec := map[string]*store.Workload{}
	for _, w := range ws {
		spec[w.Key()] = w
	}
	open := map[string][]time.Time{} // per running workload, its replicas' starts
	out := map[string]runInterval{}
	milli := map[string]float64{}
	closeFrom := func(key string, from int, at time.Time) {
		reps := open[key]
		for i := from; i < len(reps); i++ {
			out[store.UsageKey(reps[i], key, i)] = runInterval{workload: key, start: reps[i], end: at, replica: i}
		}
		if from < len(reps) {
			open[key] = reps[:from]
		}
	}
	tx.ScanRaw(store.KindEvent, "", "", func(_ string, data []byte) bool {
		var e store.Event
		if err = json.Unmarshal(data, &e); err != nil {
			return false
		}
		key, ok := strings.CutPrefix(e.Object, "workloads/")
		if !ok || spec[key] == nil {
			return true
		}
		switch e.Type {
		case store.EventWorkloadPlaced:
			closeFrom(key, 0, e.Time) // never happens: a run is closed before the next
			n := spec[key].Spec.MinReplicas()
			reps := make([]time.Time, n)
			for i := range reps {
				reps[i] = e.Time
			}
			open[key] = reps
		case store.EventWorkloadResized:
			var from, to int
			if _, err := fmt.Sscanf(e.Message, "resized from %d to %d replicas", &from, &to); err != nil {
				t.Errorf("resize event %q: %v", e.Message, err)
				return true
			}
			if to < from {
				closeFrom(key, to, e.Time)
			}
			for len(open[key]) < to {
				open[key] = append(open[key], e.Time)
			}
		case store.EventWorkloadPreempted, store.EventWorkloadCancelled, store.WorkloadStateEvent(store.StateSucceeded), store.WorkloadStateEvent(store.StateFailed):
			closeFrom(key, 0, e.Time)
			delete(open, key)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for key, reps := range open {
		for i, st := range reps {
			out[store.UsageKey(st, key, i)] = runInterval{workload: key, start: st, replica: i}
		}
	}
	for key, w := range spec {
		milli[key] = float64(w.Spec.GPUs)
	}
	return out, milli
}

// CheckUsageConservation compares the usage records of st with the runs
// of its event log: the same intervals, none lost, none doubled, none
// with another end, and the same GPU-hours up to until. It returns the
// number of intervals.
func CheckUsageConservation(t testing.TB, st store.Store, until time.Time) int {
	t.Helper()
	var n int
	err := st.View(context.Background(), func(tx store.ReadTx) error {
		ref, milli := referenceIntervals(t, tx)
		n = len(ref)
		got := map[string]meter.Record{}
		var refH, gotH float64
		err := store.ScanUsage(tx, "", until, func(k string, r *meter.Record) bool {
			if _, dup := got[k]; dup {
				t.Errorf("usage record %s twice", k)
			}
			got[k] = *r
			gotH += r.GPUHours(time.Time{}, until)
			return true
		})
		if err != nil {
			return err
		}
		var lost, extra, wrong []string
		for k, iv := range ref {
			end := iv.end
			if end.IsZero() || end.After(until) {
				end = until
			}
			refH += milli[iv.workload] / 1000 * end.Sub(iv.start).Hours()
			r, ok := got[k]
			switch {
			case !ok:
				lost = append(lost, iv.String())
			case !r.End.Equal(iv.end) || !r.Start.Equal(iv.start) || r.Workload != iv.workload || r.Replica != iv.replica:
				wrong = append(wrong, fmt.Sprintf("%s: record [%s, %s)", iv, r.Start.Format(time.RFC3339Nano), r.End.Format(time.RFC3339Nano)))
			}
		}
		for k, r := range got {
			if _, ok := ref[k]; !ok {
				extra = append(extra, fmt.Sprintf("%s/%d from %s", r.Workload, r.Replica, r.Start.Format(time.RFC3339Nano)))
			}
		}
		sort.Strings(lost)
		sort.Strings(extra)
		sort.Strings(wrong)
		if len(lost)+len(extra)+len(wrong) > 0 {
			t.Errorf("of %d intervals: %d lost %q, %d extra %q, %d with another span %q", len(ref), len(lost), first(lost), len(extra), first(extra), len(wrong), first(wrong))
		}
		if math.Abs(refH-gotH) > 1e-9*math.Max(1, refH) {
			t.Errorf("metered %.9f GPU-hours, the plans allocated %.9f", gotH, refH)
		}
		var open int
		store.OpenUsage(tx, func(string, string, time.Time) bool { open++; return true })
		running := 0
		for _, iv := range ref {
			if iv.end.IsZero() {
				running++
			}
		}
		if open != running {
			t.Errorf("%d records open, %d replicas running", open, running)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// first is at most the first 5 of xs.
func first(xs []string) []string { return xs[:min(len(xs), 5)] }
