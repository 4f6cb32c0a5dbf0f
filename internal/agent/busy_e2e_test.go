//go:build cgo

package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	arbiter "github.com/arbiterhq/arbiter/internal/server"
	"github.com/arbiterhq/arbiter/internal/store"
)

// pinnedClock is the server's clock in the test: it moves only when told.
type pinnedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *pinnedClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *pinnedClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// TestBusyUtilizationEndToEnd (issue 23): an agent reads go-nvml's mock
// 8x H200 machine, whose utilization the test sets, and heartbeats a real
// server; the readings show on /metrics and drive the operators' busy
// utilization rule, which fires once the GPUs are busy over 85% for the
// window. The server's clock is pinned and policies tick by hand.
func TestBusyUtilizationEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	st, err := store.OpenBolt(filepath.Join(dir, "arbiter.db"), &store.BoltOptions{MaxBatchDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := &pinnedClock{now: time.Now().UTC()}
	s, err := arbiter.New(ctx, arbiter.Options{Store: st, AdminToken: adminToken, Clock: clk.Now, RateLimit: -1,
		NodeLostAfter: 30 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	admin := client.New(hs.URL, adminToken)

	var pct atomic.Uint32
	pct.Store(10)
	lib := dgxh200.New()
	for i, d := range lib.Devices {
		dev := d.(*server.Device)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			u := pct.Load()
			if i == 7 {
				u = 100 // one GPU always flat out
			}
			return nvml.Utilization{Gpu: u, Memory: u / 2}, nvml.SUCCESS
		}
	}
	inv, err := NewNVML(lib)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := admin.CreateNodeToken(ctx, "h200-0", "")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Server: hs.URL, Token: tok.Secret, NodeID: "h200-0", Region: "local", Block: "b0", Inventory: inv,
		DataDir: filepath.Join(dir, "agent"), CheckpointRoot: filepath.Join(dir, "ckpt"), Interval: 50 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), AllowRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { a.Run(actx); close(done) }()
	defer func() { acancel(); <-done; a.Shutdown() }()

	scrape := func() string {
		req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// waitMetrics polls /metrics until it holds every line (a heartbeat
	// with those readings arrived at the server's present time).
	waitMetrics := func(lines ...string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			body := scrape()
			ok := true
			for _, l := range lines {
				ok = ok && strings.Contains(body, l+"\n")
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/metrics never showed %q:\n%s", lines, grepLines(body, "arbiter_gpu_"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitMetrics(`arbiter_gpu_utilization_ratio{gpu="0",node="h200-0"} 0.1`, `arbiter_gpu_utilization_ratio{gpu="7",node="h200-0"} 1`)
	if body := scrape(); !strings.Contains(body, `arbiter_gpu_memory_total_bytes{gpu="0",node="h200-0"}`) {
		t.Fatalf("no memory series:\n%s", grepLines(body, "arbiter_gpu_"))
	}
	rules := `scheduling_policies:
  - name: gpus_busy
    conditions:
      - resource_type: gpu_cluster
        utilization_threshold: 85%
        utilization: busy
    actions:
      - type: notify
        message: the GPUs are busy
`
	if _, err := admin.ApplyPolicy(ctx, api.PolicyApply{Name: "busy", Source: rules}); err != nil {
		t.Fatal(err)
	}
	fired := func() bool {
		fs, err := admin.Firings(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if f.Rule == "gpus_busy" && f.Event == "fired" {
				return true
			}
		}
		return false
	}
	// (7×0.10 + 1)/8 = 0.2125 busy: the rule holds not. Nothing is
	// allocated, so only busy utilization can make it fire.
	s.TickPolicies(ctx)
	if fired() {
		t.Fatal("fired at 21% busy")
	}
	// The GPUs get busy: 90% each, 91.25% on the whole. After a window
	// the old samples are out and the mean is over 85%.
	pct.Store(90)
	clk.Advance(6 * time.Minute)
	waitMetrics(`arbiter_gpu_utilization_ratio{gpu="0",node="h200-0"} 0.9`)
	s.TickPolicies(ctx)
	if !fired() {
		t.Fatalf("did not fire at 91%% busy; /metrics:\n%s", grepLines(scrape(), "arbiter_gpu_utilization"))
	}
}

func grepLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
