package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
)

// TestLiveCacheMatchesFullRead: after submissions, cancellations and
// cycles in any order, the live cache (kept in key order by merging, with
// the scheduler's copies made once per stored version, and submissions
// taken as the handler committed them rather than decoded) answers
// exactly what a full read and fresh copies would.
func TestLiveCacheMatchesFullRead(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c := h.tenant("contoso")
	rng := rand.New(rand.NewPCG(1, 2))
	var names []string
	for step := 0; step < 200; step++ {
		switch r := rng.IntN(10); {
		case r < 6 || len(names) == 0:
			// Names out of key order, so that merges insert in the middle.
			n := fmt.Sprintf("w%03d", rng.IntN(1000))
			sp := spec(n, 1+rng.IntN(8), 1)
			switch rng.IntN(3) {
			case 0:
				// Empty maps as a raw body may carry them (the client
				// leaves them out): stored, they read back as none.
				body := fmt.Sprintf(`{"name":%q,"gpus":1,"flavors":["A100-80G"],"regions":["eastus"],"labels":{},"command":{"argv":["true"],"env":{}}}`, n)
				if err := c.Do(h.ctx, "POST", "/v1/tenants/contoso/workloads", json.RawMessage(body), nil); err == nil {
					names = append(names, n)
				}
				continue
			case 1:
				sp.Priority, sp.Preemptible = "low", true
				sp.Command = &api.Command{Argv: []string{"sleep", "1"}, Env: map[string]string{"A": "b"}, Dir: "/tmp"}
			}
			if _, err := c.Submit(h.ctx, "contoso", sp); err == nil {
				names = append(names, n)
			}
		case r < 8:
			i := rng.IntN(len(names))
			c.Cancel(h.ctx, "contoso", names[i])
			names = append(names[:i], names[i+1:]...)
		default:
			h.s.Cycle(h.ctx)
		}
		if step%7 != 0 {
			continue
		}
		err := h.st.View(h.ctx, func(tx store.ReadTx) error {
			ws, sw, err := h.s.live.live(tx)
			if err != nil {
				return err
			}
			want, err := listLive(tx)
			if err != nil {
				return err
			}
			if len(ws) != len(want) || len(sw) != len(want) {
				return fmt.Errorf("step %d: cache has %d/%d workloads, a full read %d", step, len(ws), len(sw), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(ws[i], want[i]) {
					return fmt.Errorf("step %d: workload %d: cache %s, full read %s", step, i, ws[i].Key(), want[i].Key())
				}
				if !reflect.DeepEqual(sw[i], schedWorkload(want[i])) {
					return fmt.Errorf("step %d: scheduler copy of %s differs", step, want[i].Key())
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if h.s.live.handed == 0 {
		t.Fatal("no submission was taken from the handler; the test checked only decoded copies")
	}
}

// TestWorldFleetCache: worlds read while no node changed share one fleet
// (the spot market and the core see the same one); a node cordoned, or
// a catalog swapped, gives the next world a fleet built anew, equal to
// what a read without the cache builds.
func TestWorldFleetCache(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	read := func(cache *liveCache) *world {
		t.Helper()
		var w *world
		if err := h.st.View(h.ctx, func(tx store.ReadTx) error {
			var err error
			w, err = loadWorldWith(tx, h.s.cat.Load(), false, cache)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return w
	}
	same := func(got, want *world) {
		t.Helper()
		if len(got.Fleet.Nodes) != len(want.Fleet.Nodes) || !reflect.DeepEqual(got.Down, want.Down) || !reflect.DeepEqual(got.Cordoned, want.Cordoned) || len(got.Nodes) != len(want.Nodes) {
			t.Fatalf("cached world: %d nodes, down %v, cordoned %v; read anew: %d, %v, %v", len(got.Fleet.Nodes), got.Down, got.Cordoned, len(want.Fleet.Nodes), want.Down, want.Cordoned)
		}
		for i, n := range got.Fleet.Nodes {
			if m := want.Fleet.Nodes[i]; n.ID != m.ID || n.Model != m.Model || n.Block != m.Block {
				t.Fatalf("node %d: %s %s %s, read anew %s %s %s", i, n.ID, n.Model, n.Block, m.ID, m.Model, m.Block)
			}
		}
	}
	a, b := read(&h.s.live), read(&h.s.live)
	if a.Fleet != b.Fleet || len(a.Fleet.Nodes) == 0 {
		t.Fatalf("two reads without a node change built two fleets (%p, %p)", a.Fleet, b.Fleet)
	}
	same(b, read(nil))
	id := a.Fleet.Nodes[0].ID
	if err := h.st.Update(h.ctx, func(tx store.WriteTx) error {
		n, err := store.Get[store.Node](tx, string(id))
		if err != nil {
			return err
		}
		n.Cordoned = true
		return store.Put(tx, n, store.Any)
	}); err != nil {
		t.Fatal(err)
	}
	c := read(&h.s.live)
	if c.Fleet == a.Fleet || len(c.Cordoned) != 1 || c.Cordoned[0] != id {
		t.Fatalf("after cordoning %s: the same fleet %v, cordoned %v", id, c.Fleet == a.Fleet, c.Cordoned)
	}
	same(c, read(nil))
	h.s.cat.Store(fleet.Builtin())
	if d := read(&h.s.live); d.Fleet == c.Fleet {
		t.Fatal("a new catalog kept the old fleet")
	}
}
