package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

const durabilityConfig = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 4}]
tenants:
  - name: acme
`

// TestDurability kills the server with SIGKILL while clients submit and
// cancel concurrently and the scheduler places work, at several kill
// points; after each restart every acknowledged submission is there, every
// acknowledged cancellation holds, and no GPU is allocated twice.
func TestDurability(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	cfg := writeFile(t, dir, "fleet.yaml", durabilityConfig)
	data := filepath.Join(dir, "data")
	acked := map[string]bool{}
	cancelled := map[string]bool{}
	killPoints := []int{1, 40, 150, 300, 80, 500}
	for round, killAt := range killPoints {
		killAt += rng.IntN(40)
		p := startServer(t, data, "--config", cfg, "--interval", "50ms", "--rate-limit", "-1")
		admin := client.New(p.addr, adminToken)
		check(t, admin, round, acked, cancelled)
		var tok api.Token
		tok, err := admin.CreateToken(context.Background(), "acme", fmt.Sprintf("r%d", round))
		if err != nil {
			t.Fatal(err)
		}
		cl := client.New(p.addr, tok.Secret)
		var mu sync.Mutex
		var n atomic.Int64
		var once sync.Once
		kill := func() { once.Do(p.kill) }
		var wg sync.WaitGroup
		for c := 0; c < 8; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					name := fmt.Sprintf("r%d-c%d-%d", round, c, i)
					gpus := api.GPUs(1000)
					if i%3 == 0 {
						gpus = 500 // shares of one GPU too
					}
					_, err := cl.Submit(context.Background(), "acme", api.WorkloadSpec{Name: name, GPUs: gpus, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}, Preemptible: i%2 == 0})
					if err != nil {
						return // the server is gone
					}
					mu.Lock()
					acked[name] = true
					mu.Unlock()
					if n.Add(1) >= int64(killAt) {
						kill()
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() { // cancels running work so that the scheduler keeps placing
			defer wg.Done()
			for {
				ws, err := cl.Workloads(context.Background(), "acme", "Running")
				if err != nil {
					return
				}
				if len(ws) == 0 {
					continue
				}
				w := ws[len(ws)/2]
				if _, err := cl.Cancel(context.Background(), "acme", w.Name); err != nil {
					return
				}
				mu.Lock()
				cancelled[w.Name] = true
				mu.Unlock()
			}
		}()
		wg.Wait()
		kill()
		t.Logf("round %d: killed after %d acknowledged submissions (%d in all, %d cancellations)", round, n.Load(), len(acked), len(cancelled))
	}
	p := startServer(t, data, "--interval", "50ms")
	check(t, client.New(p.addr, adminToken), len(killPoints), acked, cancelled)
}

func check(t *testing.T, admin *client.Client, round int, acked, cancelled map[string]bool) {
	t.Helper()
	ws, err := admin.Workloads(context.Background(), "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]api.Workload{}
	for _, w := range ws {
		have[w.Name] = w
	}
	missing := 0
	for name := range acked {
		if _, ok := have[name]; !ok {
			missing++
			if missing < 5 {
				t.Errorf("after kill %d: acknowledged submission %s is lost", round, name)
			}
		}
	}
	for name := range cancelled {
		if w := have[name]; w.State != "Cancelled" {
			t.Errorf("after kill %d: acknowledged cancellation of %s is lost (state %s)", round, name, w.State)
		}
	}
	type gpu struct {
		node string
		idx  int
	}
	used := map[gpu]int64{}
	running := 0
	for _, w := range ws {
		if w.State != "Running" {
			continue
		}
		running++
		for _, r := range w.Running.Replicas {
			for _, g := range r.GPUs {
				k := gpu{r.Node, g}
				used[k] += r.Milli
				if used[k] > 1000 {
					t.Errorf("after kill %d: GPU %d of %s allocated twice (%d milli)", round, g, r.Node, used[k])
				}
			}
		}
	}
	if missing > 0 {
		t.Fatalf("after kill %d: %d of %d acknowledged submissions lost", round, missing, len(acked))
	}
	t.Logf("after kill %d: %d acknowledged submissions all present, %d running, no GPU given twice", round, len(acked), running)
}
