package store

import (
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestLiveCount: the per-tenant count of live workloads follows every
// write path (submit, place, cancel, delete) without a scan.
func TestLiveCount(t *testing.T) { forEachStore(t, tLiveCount) }

func tLiveCount(t *testing.T, st testStore, _ func() testStore) {
	live := func(tenant string) int64 {
		var n int64
		st.View(ctx, func(tx ReadTx) error { n = LiveWorkloads(tx, tenant); return nil })
		return n
	}
	err := st.Update(ctx, func(tx WriteTx) error {
		for _, n := range []string{"a", "b", "c"} {
			if err := Put(tx, job("contoso", n), MustNotExist); err != nil {
				return err
			}
		}
		return Put(tx, job("fabrikam", "a"), MustNotExist)
	})
	if err != nil {
		t.Fatal(err)
	}
	if live("contoso") != 3 || live("fabrikam") != 1 || live("other") != 0 {
		t.Fatalf("live counts %d %d %d, want 3 1 0", live("contoso"), live("fabrikam"), live("other"))
	}
	err = st.Update(ctx, func(tx WriteTx) error {
		w, err := Get[Workload](tx, WorkloadKey("contoso", "a"))
		if err != nil {
			return err
		}
		w.State = StateRunning // still live
		if err := Put(tx, w, w.Meta.Revision); err != nil {
			return err
		}
		w.State = StateCancelled
		if err := Put(tx, w, w.Meta.Revision); err != nil {
			return err
		}
		w.State = StateCancelled // a second write of an ended one
		if err := Put(tx, w, w.Meta.Revision); err != nil {
			return err
		}
		return Delete(tx, KindWorkload, WorkloadKey("contoso", "b"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := live("contoso"); got != 1 {
		t.Fatalf("contoso has %d live workloads, want 1", got)
	}
	// The bytes counter is the stored size of the one left (c).
	st.View(ctx, func(tx ReadTx) error {
		data, _ := tx.GetRaw(KindWorkload, WorkloadKey("contoso", "c"))
		if got := LiveBytes(tx, "contoso"); got != int64(len(data)) {
			t.Errorf("contoso's live bytes %d, want %d", got, len(data))
		}
		return nil
	})
}

// TestEventIndex: a tenant's scan reads only its events; the pruner's
// delete removes the index entry; a store without indexes gets them
// rebuilt when opened.
func TestEventIndex(t *testing.T) {
	st, path := open(t)
	err := st.Update(ctx, func(tx WriteTx) error {
		for i := range 10 {
			tenant := "fabrikam"
			if i%5 == 0 {
				tenant = "contoso"
			}
			if i == 7 {
				tenant = "" // admin-only
			}
			if err := AppendEvent(tx, &Event{Type: "X", Tenant: tenant}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	seqs := func(tenant string, after int64) []int64 {
		var out []int64
		st.View(ctx, func(tx ReadTx) error {
			ScanTenantEvents(tx, tenant, after, func(seq int64, data []byte) bool {
				out = append(out, seq)
				return true
			})
			return nil
		})
		return out
	}
	if got := seqs("contoso", 0); len(got) != 2 || got[0] != 1 || got[1] != 6 {
		t.Fatalf("contoso's events %v, want [1 6]", got)
	}
	if got := seqs("contoso", 1); len(got) != 1 || got[0] != 6 {
		t.Fatalf("contoso's events after 1: %v, want [6]", got)
	}
	if got := seqs("fabrikam", 0); len(got) != 7 {
		t.Fatalf("fabrikam has %d events, want 7", len(got))
	}
	if err := st.Update(ctx, func(tx WriteTx) error { return DeleteEvent(tx, 1, "contoso") }); err != nil {
		t.Fatal(err)
	}
	if got := seqs("contoso", 0); len(got) != 1 || got[0] != 6 {
		t.Fatalf("after pruning seq 1, contoso's events %v, want [6]", got)
	}
	var idx int
	st.View(ctx, func(tx ReadTx) error {
		tx.ScanRaw(KindEventIndex, "", "", func(string, []byte) bool { idx++; return true })
		return nil
	})
	if idx != 8 {
		t.Fatalf("%d index entries, want 8 (9 tenant events, 1 pruned)", idx)
	}

	// An older store: no index version, empty indexes.
	if err := st.Update(ctx, func(tx WriteTx) error { return Put(tx, job("contoso", "a"), MustNotExist) }); err != nil {
		t.Fatal(err)
	}
	err = st.db.Update(func(tx *bolt.Tx) error {
		for _, k := range []Kind{KindEventIndex, KindLiveIndex, KindCount} {
			if err := tx.DeleteBucket([]byte(k)); err != nil {
				return err
			}
		}
		return tx.Bucket(metaBucket).Delete([]byte(indexVersionKey))
	})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = OpenBolt(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.View(ctx, func(tx ReadTx) error {
		if n := LiveWorkloads(tx, "contoso"); n != 1 {
			t.Errorf("rebuilt live count %d, want 1", n)
		}
		var got []int64
		ScanTenantEvents(tx, "contoso", 0, func(seq int64, _ []byte) bool { got = append(got, seq); return true })
		if len(got) != 1 || got[0] != 6 {
			t.Errorf("rebuilt index: contoso's events %v, want [6]", got)
		}
		return nil
	})
}
