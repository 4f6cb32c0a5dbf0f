package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/server"
	"github.com/arbiterhq/arbiter/internal/store"
)

const meterKillConfig = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 2}]
tenants:
  - name: org
  - name: acme
    parent: org
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 8, limit: 16}
  - name: beta
    parent: org
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 8, limit: 16}
`

// TestMeteringConservationKill SIGKILLs a real arbiter serve while two
// tenants submit work of several priorities (high work preempts
// preemptible work) and cancel it, at several kill points; afterwards the
// usage records in the bbolt file are exactly the runs of the event log:
// no interval lost, none doubled, none with another span, the same
// GPU-hours.
func TestMeteringConservationKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the arbiter binary")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 21))
	dir := t.TempDir()
	cfg := writeFile(t, dir, "fleet.yaml", meterKillConfig)
	data := filepath.Join(dir, "data")
	total := 0
	for round, killAt := range []int{30, 120, 60, 200, 90} {
		killAt += rng.IntN(30)
		p := startServer(t, data, "--config", cfg, "--interval", "20ms", "--rate-limit", "-1")
		admin := client.New(p.addr, adminToken)
		// Half the work left running by the round before ends now: its
		// intervals close on this server, the others run on.
		for _, tenant := range []string{"acme", "beta"} {
			ws, err := admin.Workloads(context.Background(), tenant, "")
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range ws {
				if w.State == "Running" && i%2 == 0 {
					if _, err := admin.Cancel(context.Background(), tenant, w.Name); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		var n atomic.Int64
		var once sync.Once
		// The kill waits (while the other clients keep submitting) until
		// some of this round's work has been placed, so that every round
		// opens intervals for the next one to find; at most 10 s.
		placed := func() bool {
			for _, tenant := range []string{"acme", "beta"} {
				ws, err := admin.Workloads(context.Background(), tenant, "Running")
				if err != nil {
					return false
				}
				for _, w := range ws {
					if strings.HasPrefix(w.Name, fmt.Sprintf("r%d-", round)) {
						return true
					}
				}
			}
			return false
		}
		kill := func() {
			once.Do(func() {
				for deadline := time.Now().Add(10 * time.Second); !placed() && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
				p.kill()
			})
		}
		var wg sync.WaitGroup
		for c := 0; c < 4; c++ {
			tenant := []string{"acme", "beta"}[c%2]
			tok, err := admin.CreateToken(context.Background(), tenant, fmt.Sprintf("r%d-c%d", round, c))
			if err != nil {
				t.Fatal(err)
			}
			cl := client.New(p.addr, tok.Secret)
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, uint64(round*10+c)))
				var mine []string
				for i := 0; ; i++ {
					name := fmt.Sprintf("r%d-c%d-%d", round, c, i)
					s := api.WorkloadSpec{Name: name, GPUs: api.GPUs(1000 * (1 + r.IntN(4))), Replicas: 1 + r.IntN(2),
						Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}, Preemptible: true, Priority: "low"}
					switch r.IntN(4) {
					case 0:
						s.Priority, s.Preemptible = "high", false
					case 1:
						s.GPUs = 500 // a share of one GPU
					}
					if _, err := cl.Submit(context.Background(), tenant, s); err != nil {
						return // the server is gone
					}
					mine = append(mine, name)
					if r.IntN(2) == 0 {
						if _, err := cl.Cancel(context.Background(), tenant, mine[r.IntN(len(mine))]); err != nil {
							return
						}
					}
					if n.Add(1) >= int64(killAt) {
						kill()
						return
					}
				}
			}()
		}
		wg.Wait()
		kill()
		st, err := store.OpenBolt(filepath.Join(data, "arbiter.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		iv := server.CheckUsageConservation(t, st, time.Now().Add(time.Hour))
		st.Close()
		t.Logf("after kill %d (%d submissions): %d intervals, none lost or doubled", round, n.Load(), iv)
		total = iv
		if t.Failed() {
			t.Fatalf("after kill %d: usage records do not match the plans (seed %d)", round, seed)
		}
	}
	if total < 10 {
		t.Fatalf("only %d intervals metered in all: the load placed too little to test anything", total)
	}
}
