package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

var ctx = context.Background()

func open(t *testing.T) (*BoltStore, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "arbiter.db")
	st, err := OpenBolt(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

func job(tenant, name string) *Workload {
	return &Workload{Tenant: tenant, State: StatePending, Spec: workload.Spec{
		Name: workload.ID(name), Tenant: tenant, GPUs: resource.GPUs(8), Replicas: 1,
		Flavors: []fleet.ModelID{"A100-80G"}, Regions: []string{"eastus"},
	}}
}

func TestPutGetListDelete(t *testing.T) { forEachStore(t, tPutGetListDelete) }

func tPutGetListDelete(t *testing.T, st testStore, _ func() testStore) {
	err := st.Update(ctx, func(tx WriteTx) error {
		for _, n := range []string{"b", "a", "c"} {
			if err := Put(tx, job("contoso", n), MustNotExist); err != nil {
				return err
			}
		}
		return Put(tx, job("fabrikam", "a"), MustNotExist)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.View(ctx, func(tx ReadTx) error {
		if got := tx.Revision(); got != 4 {
			t.Errorf("revision %d, want 4", got)
		}
		if got := tx.KindRevision(KindWorkload); got != 4 {
			t.Errorf("workload revision %d, want 4", got)
		}
		if got := tx.KindRevision(KindTenant); got != 0 {
			t.Errorf("tenant revision %d, want 0", got)
		}
		ws, err := List[Workload](tx, "contoso/")
		if err != nil {
			return err
		}
		var names []string
		for _, w := range ws {
			names = append(names, string(w.Spec.Name))
		}
		if fmt.Sprint(names) != "[a b c]" {
			t.Errorf("listed %v, want [a b c] (key order, contoso only)", names)
		}
		w, err := Get[Workload](tx, WorkloadKey("contoso", "b"))
		if err != nil {
			return err
		}
		if w.Meta.Created != 1 || w.Meta.Revision != 1 {
			t.Errorf("meta %+v, want created 1 revision 1", w.Meta)
		}
		if _, err := Get[Workload](tx, WorkloadKey("contoso", "zz")); !errors.Is(err, ErrNotFound) {
			t.Errorf("missing: %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(ctx, func(tx WriteTx) error { return Delete(tx, KindWorkload, WorkloadKey("contoso", "a")) })
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(ctx, func(tx WriteTx) error { return Delete(tx, KindWorkload, WorkloadKey("contoso", "a")) })
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
}

func TestPutExpectations(t *testing.T) { forEachStore(t, tPutExpectations) }

func tPutExpectations(t *testing.T, st testStore, _ func() testStore) {
	put := func(w *Workload, expect int64) error {
		return st.Update(ctx, func(tx WriteTx) error { return Put(tx, w, expect) })
	}
	w := job("contoso", "j")
	if err := put(w, MustNotExist); err != nil {
		t.Fatal(err)
	}
	if err := put(job("contoso", "j"), MustNotExist); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v, want ErrExists", err)
	}
	stale := *w
	w.State = StateCancelled
	if err := put(w, w.Meta.Revision); err != nil {
		t.Fatal(err)
	}
	if w.Meta.Revision != 2 || w.Meta.Created != 1 {
		t.Fatalf("meta after update %+v, want revision 2 created 1", w.Meta)
	}
	if err := put(&stale, stale.Meta.Revision); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale write: %v, want ErrConflict", err)
	}
	if err := put(job("contoso", "new"), 7); !errors.Is(err, ErrConflict) {
		t.Fatalf("expecting a revision of a missing object: %v, want ErrConflict", err)
	}
	// A failed transaction changes nothing, not even the revision.
	err := st.Update(ctx, func(tx WriteTx) error {
		if err := Put(tx, job("contoso", "x"), MustNotExist); err != nil {
			return err
		}
		return errors.New("boom")
	})
	if err == nil {
		t.Fatal("want the error of fn")
	}
	st.View(ctx, func(tx ReadTx) error {
		if tx.Revision() != 2 {
			t.Errorf("revision %d after a rolled back tx, want 2", tx.Revision())
		}
		if _, ok := tx.GetRaw(KindWorkload, "contoso/x"); ok {
			t.Error("rolled back write is visible")
		}
		return nil
	})
}

func TestDurableAcrossReopen(t *testing.T) { forEachStore(t, testDurableAcrossReopen) }

func testDurableAcrossReopen(t *testing.T, st testStore, reopen func() testStore) {
	if err := st.Update(ctx, func(tx WriteTx) error { return Put(tx, job("contoso", "j"), MustNotExist) }); err != nil {
		t.Fatal(err)
	}
	st2 := reopen()
	st2.View(ctx, func(tx ReadTx) error {
		if _, err := Get[Workload](tx, "contoso/j"); err != nil {
			t.Error(err)
		}
		if tx.Revision() != 1 {
			t.Errorf("revision %d after reopen, want 1", tx.Revision())
		}
		return nil
	})
}

func TestBatchConcurrentWriters(t *testing.T) { forEachStore(t, tBatchConcurrentWriters) }

func tBatchConcurrentWriters(t *testing.T, st testStore, _ func() testStore) {
	const n = 200
	// The failing writer below conflicts with this object, not with one the
	// others write: were it one of theirs, whichever came second would fail.
	if err := st.Update(ctx, func(tx WriteTx) error { return Put(tx, job("u", "dup"), MustNotExist) }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- st.Batch(ctx, func(tx WriteTx) error {
				if err := Put(tx, job("t", fmt.Sprintf("j%03d", i)), MustNotExist); err != nil {
					return err
				}
				return AppendEvent(tx, &Event{Type: "WorkloadSubmitted", Object: fmt.Sprint(i)})
			})
		}(i)
	}
	// One writer fails: its group is retried one by one, the others commit.
	failed := st.Batch(ctx, func(tx WriteTx) error { return Put(tx, job("u", "dup"), MustNotExist) })
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if failed == nil {
		t.Error("the conflicting writer committed")
	}
	st.View(ctx, func(tx ReadTx) error {
		ws, _ := List[Workload](tx, "t/")
		evs, _ := List[Event](tx, "")
		if len(ws) != n || len(evs) != n {
			t.Errorf("%d workloads and %d events, want %d each", len(ws), len(evs), n)
		}
		seen := map[int64]bool{}
		for _, e := range evs {
			if seen[e.Seq] || e.Seq != e.Meta.Revision {
				t.Errorf("event seq %d (revision %d) repeated or not its revision", e.Seq, e.Meta.Revision)
			}
			seen[e.Seq] = true
		}
		if want := int64(2*n + 1); tx.Revision() != want { // and the pre-created one
			t.Errorf("revision %d, want %d (one per write)", tx.Revision(), want)
		}
		return nil
	})
}

// TestBatchFailingWriters: in a group, a writer that fails after writing
// and one that panics get their own errors and leave nothing behind; the
// rest of the group commits.
func TestBatchFailingWriters(t *testing.T) { forEachStore(t, tBatchFailingWriters) }

func tBatchFailingWriters(t *testing.T, st testStore, _ func() testStore) {
	var mu sync.Mutex
	var seen []CommitStats
	st.ObserveCommits(func(c CommitStats) { mu.Lock(); seen = append(seen, c); mu.Unlock() })
	const n = 60
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = st.Batch(ctx, func(tx WriteTx) error {
				if err := Put(tx, job("t", fmt.Sprintf("j%03d", i)), MustNotExist); err != nil {
					return err
				}
				switch i % 10 {
				case 3:
					return fmt.Errorf("writer %d gives up", i)
				case 7:
					panic(fmt.Sprintf("writer %d panics", i))
				}
				return nil
			})
		}(i)
	}
	wg.Wait()
	st.View(ctx, func(tx ReadTx) error {
		for i, err := range errs {
			_, stored := tx.GetRaw(KindWorkload, fmt.Sprintf("t/j%03d", i))
			switch i % 10 {
			case 3, 7:
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("writer %d", i)) {
					t.Errorf("writer %d: error %v, want its own", i, err)
				}
				if stored {
					t.Errorf("writer %d failed but its workload is stored", i)
				}
			default:
				if err != nil || !stored {
					t.Errorf("writer %d: error %v, stored %v", i, err, stored)
				}
			}
		}
		return nil
	})
	// The observer sees committed writers only, each once.
	mu.Lock()
	defer mu.Unlock()
	writers := 0
	for _, x := range seen {
		writers += x.Writers
		if x.Writers < 1 || x.Wait < 0 || x.Commit <= 0 {
			t.Errorf("observed commit %+v", x)
		}
	}
	if want := n - 2*n/10; writers != want || len(seen) < 1 {
		t.Errorf("observed %d commits of %d writers, want at least 1 of %d", len(seen), writers, want)
	}
}

func TestScanAfter(t *testing.T) { forEachStore(t, tScanAfter) }

func tScanAfter(t *testing.T, st testStore, _ func() testStore) {
	st.Update(ctx, func(tx WriteTx) error {
		for i := 0; i < 5; i++ {
			if err := AppendEvent(tx, &Event{Type: "x"}); err != nil {
				return err
			}
		}
		return nil
	})
	st.View(ctx, func(tx ReadTx) error {
		var got []string
		tx.ScanRaw(KindEvent, "", RevKey(2), func(k string, _ []byte) bool { got = append(got, k); return len(got) < 2 })
		want := []string{RevKey(3), RevKey(4)}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("scan after 2: %v, want %v", got, want)
		}
		return nil
	})
}

func TestApplyPlan(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { testApplyPlan(t, b) })
	}
}

func testApplyPlan(t *testing.T, b backend) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	setup := func(t *testing.T) (testStore, int64) {
		st, _ := b.open(t)
		var base int64
		st.Update(ctx, func(tx WriteTx) error {
			Put(tx, &Tenant{Name: "contoso"}, MustNotExist)
			Put(tx, &Node{ID: "n1", Region: "eastus", Block: "b", SKU: "Standard_ND96amsr_A100_v4"}, MustNotExist)
			a := job("contoso", "a")
			a.Spec.Priority, a.SubmittedAt = workload.PriorityHigh, now.Add(-90*time.Second)
			Put(tx, a, MustNotExist)
			r := job("contoso", "r")
			r.State = StateRunning
			r.Running = &workload.Assignment{Flavor: "A100-80G", Region: "eastus", Replicas: []workload.Replica{{Node: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
			Put(tx, r, MustNotExist)
			base = tx.Revision()
			return nil
		})
		return st, base
	}
	plan := sched.Plan{
		Preemptions: []sched.Preemption{{Workload: "contoso/r", By: "contoso/a", Reason: "reclaim"}},
		Placements:  []sched.Placement{{Workload: "contoso/a", Node: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Milli: 1000, Flavor: "A100-80G", Region: "eastus"}},
	}
	apply := func(st testStore, base int64) (Applied, error) {
		var res Applied
		err := st.Update(ctx, func(tx WriteTx) error {
			var err error
			res, err = ApplyPlan(tx, base, plan, now)
			return err
		})
		return res, err
	}

	t.Run("applies", func(t *testing.T) {
		st, base := setup(t)
		res, err := apply(st, base)
		if err != nil {
			t.Fatal(err)
		}
		// a is placed for the first time: its wait is reported.
		if want := (Applied{Placed: 1, Preempted: 1, First: []FirstPlacement{{Priority: workload.PriorityHigh, Waited: 90 * time.Second}}}); !reflect.DeepEqual(res, want) {
			t.Errorf("applied %+v, want %+v", res, want)
		}
		st.View(ctx, func(tx ReadTx) error {
			a, _ := Get[Workload](tx, "contoso/a")
			r, _ := Get[Workload](tx, "contoso/r")
			if a.State != StateRunning || a.Running == nil || a.Running.Replicas[0].Node != "n1" || !a.Running.StartedAt.Equal(now) {
				t.Errorf("placed workload %+v", a)
			}
			if r.State != StatePending || r.Running != nil || r.Preemptions != 1 || r.LastPreemption != "reclaim" {
				t.Errorf("victim %+v", r)
			}
			evs, _ := List[Event](tx, "")
			if len(evs) != 2 {
				t.Errorf("%d events, want 2", len(evs))
			}
			return nil
		})
		// Applying the same plan again is stale.
		if _, err := apply(st, base); !errors.Is(err, ErrConflict) {
			t.Errorf("reapplied: %v, want ErrConflict", err)
		}
		// The victim placed again is not a first placement.
		var rev int64
		st.View(ctx, func(tx ReadTx) error { rev = tx.Revision(); return nil })
		again := sched.Plan{Placements: []sched.Placement{{Workload: "contoso/r", Node: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Milli: 1000, Flavor: "A100-80G", Region: "eastus"}}}
		var res2 Applied
		err = st.Update(ctx, func(tx WriteTx) error {
			var err error
			res2, err = ApplyPlan(tx, rev, again, now)
			return err
		})
		if err != nil || res2.Placed != 1 || len(res2.First) != 0 {
			t.Errorf("victim placed again: %+v, %v; want placed, no first placement", res2, err)
		}
	})
	t.Run("assignment is the reference applier's", func(t *testing.T) {
		st, base := setup(t)
		if _, err := apply(st, base); err != nil {
			t.Fatal(err)
		}
		want := sched.Apply([]*workload.Workload{{Spec: workload.Spec{Name: "contoso/a"}}}, plan, now)[0].Running
		st.View(ctx, func(tx ReadTx) error {
			a, _ := Get[Workload](tx, "contoso/a")
			if !reflect.DeepEqual(a.Running, want) {
				t.Errorf("store assignment %+v, reference %+v", a.Running, want)
			}
			return nil
		})
	})
	voiders := map[string]func(tx WriteTx) error{
		"node registered":     func(tx WriteTx) error { return Put(tx, &Node{ID: "n2"}, MustNotExist) },
		"tenant changed":      func(tx WriteTx) error { return Put(tx, &Tenant{Name: "contoso", Parent: "x"}, Any) },
		"reservation created": func(tx WriteTx) error { return Put(tx, &Reservation{Tenant: "contoso", Name: "r1"}, MustNotExist) },
		"partition set": func(tx WriteTx) error {
			return Put(tx, &Partition{Name: "p1", Tenant: "contoso", Nodes: []fleet.NodeID{"n1"}}, MustNotExist)
		},
		"claimant cancelled": func(tx WriteTx) error {
			w, _ := Get[Workload](tx, "contoso/a")
			w.State = StateCancelled
			return Put(tx, w, w.Meta.Revision)
		},
		"victim cancelled": func(tx WriteTx) error {
			w, _ := Get[Workload](tx, "contoso/r")
			w.State, w.Running = StateCancelled, nil
			return Put(tx, w, w.Meta.Revision)
		},
	}
	for name, change := range voiders {
		t.Run(name, func(t *testing.T) {
			st, base := setup(t)
			if err := st.Update(ctx, change); err != nil {
				t.Fatal(err)
			}
			var before int64
			st.View(ctx, func(tx ReadTx) error { before = tx.Revision(); return nil })
			if _, err := apply(st, base); !errors.Is(err, ErrConflict) {
				t.Fatalf("got %v, want ErrConflict", err)
			}
			st.View(ctx, func(tx ReadTx) error {
				if tx.Revision() != before {
					t.Error("a voided plan wrote something")
				}
				return nil
			})
		})
	}
	t.Run("submission does not void", func(t *testing.T) {
		st, base := setup(t)
		st.Update(ctx, func(tx WriteTx) error { return Put(tx, job("fabrikam", "z"), MustNotExist) })
		if _, err := apply(st, base); err != nil {
			t.Fatal(err)
		}
	})
}

// TestBatchWaitsForAGroup: a group smaller than MinBatchSize waits for more
// writers, and commits as soon as it has MinBatchSize of them (the delay
// here is an hour: were that wait not cut short, the test would time out),
// or when the delay is over.
func TestBatchWaitsForAGroup(t *testing.T) {
	st, err := OpenBolt(filepath.Join(t.TempDir(), "a.db"), &BoltOptions{MaxBatchDelay: time.Hour, MinBatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var commits []CommitStats // written by the committer, read after every writer returned
	st.ObserveCommits(func(c CommitStats) { commits = append(commits, c) })
	done := make(chan error, 4)
	for i := range 4 {
		go func() {
			done <- st.Batch(ctx, func(tx WriteTx) error { return Put(tx, job("t", fmt.Sprint("j", i)), MustNotExist) })
		}()
	}
	timeout := time.After(time.Minute)
	for range 4 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatal("four writers did not commit: the group kept waiting after it reached MinBatchSize")
		}
	}
	if len(commits) != 1 || commits[0].Writers != 4 {
		t.Errorf("commits %+v, want the 4 writers in one", commits)
	}

	lone, err := OpenBolt(filepath.Join(t.TempDir(), "b.db"), &BoltOptions{MaxBatchDelay: time.Millisecond, MinBatchSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer lone.Close()
	var alone []CommitStats
	lone.ObserveCommits(func(c CommitStats) { alone = append(alone, c) })
	if err := lone.Batch(ctx, func(tx WriteTx) error { return Put(tx, job("t", "alone"), MustNotExist) }); err != nil {
		t.Fatal(err)
	}
	if len(alone) != 1 || alone[0].Writers != 1 {
		t.Errorf("lone writer: commits %+v", alone)
	}
}
