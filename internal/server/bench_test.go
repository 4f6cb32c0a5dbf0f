package server

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/arbiterhq/arbiter/internal/cluster"
	"github.com/arbiterhq/arbiter/internal/etcdtest"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/loadgen"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
)

// BenchmarkSubmit measures durable submissions over loopback HTTP with
// concurrent clients in a closed loop (each sends its next submission when
// the last is acknowledged), the scheduler loop running: every submission
// is acknowledged only after its commit is fsynced (commits are grouped).
// One sub-benchmark per client count (16, 32 and 64, or
// ARBITER_BENCH_CLIENTS alone) reports submissions/s and latency
// percentiles: fewer clients, lower latency and throughput.
//
//	go test ./internal/server -run XXX -bench 'Submit$' -benchtime 30000x
func BenchmarkSubmit(b *testing.B) {
	counts := []int{16, 32, 64}
	if n, err := strconv.Atoi(os.Getenv("ARBITER_BENCH_CLIENTS")); err == nil && n > 0 {
		counts = []int{n}
	}
	for _, clients := range counts {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { submitClosedLoop(b, clients) })
	}
}

func submitClosedLoop(b *testing.B, clients int) {
	cl, done := benchServer(b)
	defer done()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				err := benchSubmit(cl, i)
				lat[i] = time.Since(t0)
				if err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	reportLatency(b, lat, failed.Load(), elapsed)
}

// BenchmarkSubmitAtRate offers submissions at a fixed rate (open loop:
// ARBITER_BENCH_RATE per second, default 5,000, whatever the answers do)
// and measures each one's latency from the moment it was due to be sent,
// so that a stall delays every submission queued behind it and counts in
// the percentiles (no coordinated omission). Up to ARBITER_BENCH_CLIENTS (64) are in flight;
// the others wait their turn, and the wait counts.
//
//	go test ./internal/server -run XXX -bench SubmitAtRate -benchtime 60000x
func BenchmarkSubmitAtRate(b *testing.B) {
	rate := 5000.0
	if r, err := strconv.ParseFloat(os.Getenv("ARBITER_BENCH_RATE"), 64); err == nil && r > 0 {
		rate = r
	}
	if os.Getenv("ARBITER_BENCH_PROCESS") != "" {
		submitFromProcess(b, rate)
		return
	}
	cl, done := benchServer(b)
	defer done()
	b.ReportAllocs()
	b.ResetTimer()
	r := loadgen.OpenLoop(rate, b.N, benchClients(), func(i int) error { return benchSubmit(cl, i) })
	b.StopTimer()
	b.ReportMetric(rate, "offered/s")
	if f := os.Getenv("ARBITER_BENCH_DUMP"); f != "" {
		var sb strings.Builder
		for i, l := range r.Latency {
			fmt.Fprintf(&sb, "%d %d %d\n", r.Due[i].Microseconds(), l.Microseconds(), r.SendDelay[i].Microseconds())
		}
		os.WriteFile(f, []byte(sb.String()), 0o644)
	}
	// How late the load generator sent: the part of the latency spent
	// before the request left (all clients busy, or waiting for a CPU).
	late := slices.Clone(r.SendDelay)
	slices.Sort(late)
	b.ReportMetric(float64(late[len(late)*99/100].Microseconds())/1000, "send-delay-p99-ms")
	reportLatency(b, r.Latency, r.Failed, r.Elapsed)
}

// submitFromProcess is BenchmarkSubmitAtRate with the load generator in
// its own process (internal/loadgen/cmd), as clients are in real use: the server's
// process then schedules only its own goroutines. Both still share the
// machine's cores.
func submitFromProcess(b *testing.B, rate float64) {
	gen := filepath.Join(b.TempDir(), "loadgen")
	if out, err := exec.Command("go", "build", "-o", gen, "../loadgen/cmd").CombinedOutput(); err != nil {
		b.Fatalf("building the load generator: %v\n%s", err, out)
	}
	e := benchServerWith(b)
	defer e.done()
	b.ResetTimer()
	out, err := exec.Command(gen, "-url", e.url, "-token", e.token, "-rate", fmt.Sprint(rate), "-n", fmt.Sprint(b.N),
		"-clients", fmt.Sprint(benchClients())).Output()
	b.StopTimer()
	if err != nil {
		b.Fatalf("load generator: %v", err)
	}
	var r loadgen.Output
	if err := json.Unmarshal(out, &r); err != nil || len(r.LatencyUS) != b.N {
		b.Fatalf("load generator said %.200q: %v", out, err)
	}
	lat := make([]time.Duration, len(r.LatencyUS))
	for i, us := range r.LatencyUS {
		lat[i] = time.Duration(us) * time.Microsecond
	}
	b.ReportMetric(rate, "offered/s")
	reportLatency(b, lat, r.Failed, time.Duration(r.Elapsed*float64(time.Second)))
}

// benchServer starts the real handler on loopback over a bbolt file with
// the scheduler loop running (unless NOLOOP is set) and returns a tenant's
// client; done stops it all.
func benchServer(b *testing.B) (*client.Client, func()) {
	e := benchServerWith(b)
	return e.cl, e.done
}

// benchEnv is a running benchmark server and a tenant's credentials.
type benchEnv struct {
	srv        *Server
	cl, admin  *client.Client
	url, token string
	done       func()
}

func benchServerWith(b *testing.B) benchEnv {
	return benchServerFrom(b, benchConfig, "acme", api.WorkloadSpec{Name: "warmup", GPUs: 1000, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}})
}

// benchServerFrom is benchServerWith serving config cfg, the client
// tenant's, after submitting warm.
func benchServerFrom(b *testing.B, cfg, tenant string, warm api.WorkloadSpec) benchEnv {
	ctx, cancel := context.WithCancel(context.Background())
	// ARBITER_BENCH_BATCH_DELAY is serve's --batch-delay (default 1ms, as
	// serve's).
	delay := time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("ARBITER_BENCH_BATCH_DELAY")); err == nil {
		delay = d
	}
	minBatch, _ := strconv.Atoi(os.Getenv("ARBITER_BENCH_BATCH_MIN")) // serve's --batch-min (0: its default)
	var st store.Store
	var member *cluster.Member
	var err error
	if benchStore == "etcd" {
		st, member = benchEtcd(b)
	} else if st, err = store.OpenBolt(filepath.Join(b.TempDir(), "arbiter.db"), &store.BoltOptions{MaxBatchDelay: delay, MinBatchSize: minBatch}); err != nil {
		b.Fatal(err)
	}
	c, err := config.Parse("bench.yaml", []byte(cfg))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := Seed(store.Unfenced(ctx), st, c, time.Now()); err != nil {
		b.Fatal(err)
	}
	s, err := New(ctx, Options{Store: st, AdminToken: testAdmin, RateLimit: -1, Logger: slog.New(slog.DiscardHandler),
		Limits:     config.Limits{WorkloadsQueued: 10_000_000, QueuedBytes: 1 << 40}, // one tenant queues everything
		Cluster:    clusterOrNil(member),
		Scheduling: benchScheduling})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	var loop sync.WaitGroup
	loop.Add(1)
	go func() {
		defer loop.Done()
		if os.Getenv("NOLOOP") == "" {
			s.Run(ctx)
		}
	}()
	done := func() {
		cancel()
		loop.Wait()
		hs.Close()
		st.Close()
		// How the loop spent the run: cycles (all, and those answered
		// without running the core) and their mean duration.
		var m dto.Metric
		if s.metrics.cycle.Write(&m) == nil && m.Histogram.GetSampleCount() > 0 {
			n := m.Histogram.GetSampleCount()
			b.ReportMetric(float64(n), "cycles")
			b.ReportMetric(testutil.ToFloat64(s.metrics.quietCycles), "quiet-cycles")
			b.ReportMetric(testutil.ToFloat64(s.metrics.conflicts), "stale-plans")
			b.ReportMetric(m.Histogram.GetSampleSum()*1000/float64(n), "ms/cycle")
		}
		var cw dto.Metric
		if s.metrics.commitWrites != nil && s.metrics.commitWrites.Write(&cw) == nil && cw.Histogram.GetSampleCount() > 0 {
			c := float64(cw.Histogram.GetSampleCount())
			b.ReportMetric(c, "commits")
			b.ReportMetric(cw.Histogram.GetSampleSum()/c, "writers/commit")
		}
	}
	if member != nil {
		deadline := time.Now().Add(30 * time.Second)
		for !member.IsLeader() || !s.ready.Load() {
			if time.Now().After(deadline) {
				done()
				b.Fatal("the bench server did not become the leader")
			}
			time.Sleep(10 * time.Millisecond) // waiting for the election, not asserting
		}
	}
	admin := client.New(hs.URL, testAdmin)
	tok, err := admin.CreateToken(ctx, tenant, "bench")
	if err != nil {
		done()
		b.Fatal(err)
	}
	cl := client.New(hs.URL, tok.Secret)
	// The work is real: one submission goes through and is stored.
	if _, err := cl.Submit(ctx, tenant, warm); err != nil {
		done()
		b.Fatal(err)
	}
	return benchEnv{srv: s, cl: cl, admin: admin, url: hs.URL, token: tok.Secret, done: done}
}

// benchScheduling are the bench server's scheduler options (zero: the
// server's defaults).
var benchScheduling sched.Options

// benchStore selects the store benchServerWith opens: "" (bbolt) or
// "etcd" (a real 3-member etcd cluster on loopback, this server its
// elected, fenced leader).
var benchStore string

// BenchmarkSubmitStores is BenchmarkSubmit with 32 clients on bbolt and on
// etcd side by side, in one run:
//
//	go test ./internal/server -run XXX -bench SubmitStores -benchtime 20000x
func BenchmarkSubmitStores(b *testing.B) {
	for _, kind := range []string{"bbolt", "etcd"} {
		b.Run("store="+kind, func(b *testing.B) {
			benchStore = kind
			defer func() { benchStore = "" }()
			submitClosedLoop(b, 32)
		})
	}
}

func benchEtcd(b *testing.B) (store.Store, *cluster.Member) {
	ec := etcdtest.Start(b, 3)
	cli := ec.Client(b)
	m, err := cluster.Join(context.Background(), cli, cluster.Options{Advertise: "http://127.0.0.1:1", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	st, err := store.OpenEtcd(context.Background(), store.EtcdOptions{Client: cli, Fence: m.Fence})
	if err != nil {
		b.Fatal(err)
	}
	return st, m
}

func clusterOrNil(m *cluster.Member) Cluster {
	if m == nil {
		return nil
	}
	return m
}

// benchSubmit submits the i-th 1-GPU preemptible workload.
func benchSubmit(cl *client.Client, i int) error { return loadgen.Submit(cl, "acme", i) }

// reportLatency fails on any failed submission and reports submissions/s
// and latency percentiles.
func reportLatency(b *testing.B, lat []time.Duration, failed int64, elapsed time.Duration) {
	if failed > 0 {
		b.Fatalf("%d submissions failed", failed)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "subs/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(0.999), "p99.9-ms")
}

// benchConfig: 100 machines (800 A100 GPUs) and one tenant without limits.
const benchConfig = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 100}]
tenants:
  - name: acme
`

// benchClients is the open loop's bound on submissions in flight: 64
// unless ARBITER_BENCH_CLIENTS says otherwise.
func benchClients() int { return envInt("ARBITER_BENCH_CLIENTS", 64) }

// envInt is the positive integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
