package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/etcdtest"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/store"
)

// The HA tests run real `arbiter serve` replicas on a real 3-member etcd
// cluster, kill and pause them (and etcd's raft leader) under concurrent
// submissions, and then check the final state: every acknowledged write
// is there, nothing is allocated twice or over capacity or limit, and no
// commit was made by a deposed leader (every commit names the election
// key it was fenced on; once a newer key has committed, an older one
// never commits again).

const haFleet = `limits:
  workloads_queued: 1000000
  queued_bytes: 1000000000
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 4}]
tenants:
  - name: acme
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 8, limit: 20}
  - name: bravo
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 8, limit: 20}
`

const haPrefix = "/arbiter-ha/"

// replica is one arbiter serve process of the cluster under test.
type replica struct {
	t        *testing.T
	url      string
	port     int
	data     string
	args     []string
	cmd      *exec.Cmd
	log      *syncBuffer
	done     chan error
	stopped  bool
	restarts int
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ps []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ps = append(ps, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ps
}

func (r *replica) start() {
	r.t.Helper()
	cmd := exec.Command(arbiterBin(r.t), append([]string{"serve", "--data", r.data, "--listen", fmt.Sprintf("127.0.0.1:%d", r.port), "--advertise", r.url}, r.args...)...)
	cmd.Env = append(os.Environ(), "ARBITER_ADMIN_TOKEN="+adminToken)
	r.log = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = r.log, r.log
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.cmd, r.done, r.stopped = cmd, make(chan error, 1), false
	go func(done chan error) { done <- cmd.Wait() }(r.done)
}

func (r *replica) alive() bool { return r.cmd != nil && r.cmd.ProcessState == nil && !r.exited() }

func (r *replica) exited() bool {
	select {
	case err := <-r.done:
		r.done <- err
		return true
	default:
		return false
	}
}

func (r *replica) kill() {
	if r.cmd != nil && !r.exited() {
		r.cmd.Process.Signal(syscall.SIGCONT)
		r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
		r.done <- nil
	}
}

// role asks /readyz what the replica is: "leader", "follower", or "" when
// it cannot serve.
func (r *replica) role() string {
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	resp, err := hc.Get(r.url + "/readyz")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var body map[string]string
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return ""
	}
	return body["role"]
}

func startHA(t *testing.T, n int, etcdEndpoints []string, cfg string, extra ...string) []*replica {
	t.Helper()
	ports := freePorts(t, n)
	var rs []*replica
	for i := range n {
		r := &replica{t: t, port: ports[i], url: fmt.Sprintf("http://127.0.0.1:%d", ports[i]), data: filepath.Join(t.TempDir(), fmt.Sprint("r", i)),
			args: []string{"--etcd-endpoints", strings.Join(etcdEndpoints, ","), "--etcd-prefix", haPrefix, "--election-ttl", "1s",
				"--config", cfg, "--interval", "200ms", "--rate-limit", "-1", "--rate-limit-per-source", "-1", "--log-level", "warn"}}
		r.args = append(r.args, extra...)
		r.start()
		t.Cleanup(r.kill)
		rs = append(rs, r)
	}
	waitFor(t, 30*time.Second, "a leader", func() bool { return leaderOf(rs) != nil })
	return rs
}

// leaderOf is the replica that says it leads (nil: none does).
func leaderOf(rs []*replica) *replica {
	for _, r := range rs {
		if r.alive() && !r.stopped && r.role() == "leader" {
			return r
		}
	}
	return nil
}

func urls(rs []*replica) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.url)
	}
	return strings.Join(out, ",")
}

// load submits workloads from several goroutines until stop is closed,
// each through the failover client with an idempotency key, and records
// what was acknowledged.
type load struct {
	acked    sync.Map // name → tenant
	nAcked   atomic.Int64
	failures atomic.Int64
	refused  atomic.Int64
	errs     sync.Map
	lastErr  atomic.Value
	wg       sync.WaitGroup
}

func (l *load) run(ctx context.Context, c *client.Client, workers int) {
	for w := range workers {
		l.wg.Go(func() {
			tenant := []string{"acme", "bravo"}[w%2]
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("w%d-%d", w, i)
				spec := api.WorkloadSpec{Name: name, Kind: "batch", GPUs: api.GPUs(resource.GPUs(1)), Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}, Preemptible: true, Priority: "low"}
				// As a careful client does: a submission that got no
				// answer in time is sent again with the same key until
				// one is acknowledged.
				key := client.NewIdempotencyKey()
				for ctx.Err() == nil {
					sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					t0 := time.Now()
					_, err := c.SubmitWithKey(sctx, tenant, key, spec)
					cancel()
					if err == nil {
						l.acked.Store(tenant+"/"+name, true)
						l.nAcked.Add(1)
						break
					}
					if ctx.Err() == nil {
						if l.failures.Add(1) < 30 {
							l.errs.Store(fmt.Sprintf("%s +%v %v", time.Now().Format("05.000"), time.Since(t0).Round(time.Millisecond), err), true)
						}
						l.lastErr.Store(err.Error())
						if ae := (*api.Error)(nil); errors.As(err, &ae) && ae.Status < 500 {
							l.refused.Add(1)
							break // refused, not lost: a 4xx is an answer
						}
					}
				}
			}
		})
	}
}

// probe submits one workload straight to r (no failover): whether r
// serves writes now.
func probe(r *replica, n int) bool {
	if r == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	spec := api.WorkloadSpec{Name: fmt.Sprint("probe-", n), Kind: "batch", GPUs: api.GPUs(resource.GPUs(1)), Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}, Preemptible: true, Priority: "low"}
	_, err := client.New(r.url, adminToken).Submit(ctx, "acme", spec)
	return err == nil
}

// TestHAFailover: 20 leader failovers under concurrent submissions — 14
// SIGKILLs of the leading arbiter, 3 SIGSTOPs of it (resumed after a new
// leader serves: it must not write), and 3 SIGKILLs of etcd's raft
// leader — then the invariants over the final state.
func TestHAFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real etcd cluster and arbiter replicas")
	}
	ec := etcdtest.Start(t, 3)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "fleet.yaml", haFleet)
	rs := startHA(t, 3, ec.Endpoints(), cfg)
	c := client.New(urls(rs), adminToken)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ld load
	ld.run(ctx, c, 4)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("acknowledged %d, failed %d, last error: %v", ld.nAcked.Load(), ld.failures.Load(), ld.lastErr.Load())
			ld.errs.Range(func(k, _ any) bool { t.Log(k); return true })
			for _, r := range rs {
				log := r.log.String()
				t.Logf("--- replica %s (restarts %d), last of its log:\n%s", r.url, r.restarts, log[max(0, len(log)-3000):])
			}
		}
	})

	// A write served after the failover: the load's acknowledgements move.
	served := func(since int64) bool { return ld.nAcked.Load() > since+2 }
	probes := 0
	// The failover time is measured by a probe writing to whichever
	// replica says it leads, so that it is the servers' time, not the
	// time the load's clients take to give up on a dead server.
	servesNew := func(old *replica) bool {
		l := leaderOf(rs)
		if l == nil || l == old {
			return false
		}
		probes++
		return probe(l, probes)
	}
	var took []time.Duration
	kinds := []string{}
	for i := range 20 {
		kind := "kill"
		switch {
		case i%7 == 3:
			kind = "stop"
		case i%7 == 5:
			kind = "etcd"
		}
		b := ld.nAcked.Load()
		waitFor(t, 30*time.Second, "load before the failover", func() bool { return leaderOf(rs) != nil && served(b) })
		old := leaderOf(rs)
		if old == nil {
			t.Fatal("no leader")
		}
		start := time.Now()
		switch kind {
		case "kill":
			old.kill()
		case "stop":
			old.cmd.Process.Signal(syscall.SIGSTOP)
			old.stopped = true
		case "etcd":
			li, err := ec.WaitLeader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ec.Kill(li)
			waitFor(t, 30*time.Second, "writes after the etcd leader's death", func() bool { probes++; return probe(leaderOf(rs), probes) })
			took = append(took, time.Since(start))
			kinds = append(kinds, kind)
			ec.Restart(li)
			continue
		}
		waitFor(t, 30*time.Second, "a new leader that serves", func() bool { return servesNew(old) })
		took = append(took, time.Since(start))
		kinds = append(kinds, kind)
		t.Logf("%s failover %d (%s of %s) done, acked %d", time.Now().Format("05.000"), i, kind, old.url, ld.nAcked.Load())
		switch kind {
		case "kill":
			old.restarts++
			old.start()
		case "stop":
			// Resumed, it still believes it leads until it sees its
			// lease gone; whatever it tries to write meanwhile is fenced.
			old.cmd.Process.Signal(syscall.SIGCONT)
			old.stopped = false
		}
	}
	cancel()
	ld.wg.Wait()
	for _, r := range rs {
		r.kill()
	}

	// The distribution of failover times.
	sorted := append([]time.Duration(nil), took...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	pct := func(p float64) time.Duration { return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))] }
	t.Logf("failovers: %d (kinds %v); time to a new leader serving writes: min %v p50 %v p90 %v max %v", len(took), kinds,
		sorted[0].Round(time.Millisecond), pct(0.5).Round(time.Millisecond), pct(0.9).Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond))
	for i, d := range took {
		t.Logf("  failover %2d (%s): %v", i+1, kinds[i], d.Round(time.Millisecond))
		if d > 5*time.Second {
			t.Errorf("failover %d (%s) took %v, want at most 5s", i+1, kinds[i], d)
		}
	}
	t.Logf("submissions acknowledged: %d; attempts that failed and were retried with the same key: %d; refused with a 4xx: %d (last error: %v)", ld.nAcked.Load(), ld.failures.Load(), ld.refused.Load(), ld.lastErr.Load())
	if ld.refused.Load() > 0 {
		t.Errorf("%d submissions were refused (a retried submission must replay, not conflict)", ld.refused.Load())
	}

	st, err := store.OpenEtcd(context.Background(), store.EtcdOptions{Endpoints: ec.Endpoints(), Prefix: haPrefix})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lost := 0
	ld.acked.Range(func(k, _ any) bool {
		err := st.View(context.Background(), func(tx store.ReadTx) error {
			_, err := store.Get[store.Workload](tx, k.(string))
			return err
		})
		if err != nil {
			lost++
			t.Errorf("acknowledged submission %s is not in the store: %v", k, err)
		}
		return true
	})
	t.Logf("acknowledged writes lost: %d", lost)
	if v := checkAllocation(t, st); len(v) > 0 {
		for _, x := range v {
			t.Error(x)
		}
	}
	t.Logf("double allocations and capacity or limit violations: %d", len(checkAllocation(t, st)))
	deposed := checkFencedHistory(t, ec.Client(t))
	t.Logf("commits by a deposed leader: %d", deposed)
	if deposed > 0 {
		t.Errorf("%d commits were made by a deposed leader", deposed)
	}
}

// checkAllocation is the invariant checker over a final state: no GPU
// over 1000 milli, no replica on a GPU its node lacks, no workload placed
// twice (two running records for one replica set are one key: a workload
// appears once in the store), no tenant over its limit.
func checkAllocation(t *testing.T, st store.Store) []string {
	t.Helper()
	var out []string
	cat := fleet.Builtin()
	st.View(context.Background(), func(tx store.ReadTx) error {
		nodes, err := store.List[store.Node](tx, "")
		if err != nil {
			out = append(out, err.Error())
			return nil
		}
		gpus := map[string]int{}
		for _, n := range nodes {
			if sku, ok := cat.SKU(n.SKU); ok {
				gpus[string(n.ID)] = sku.GPUs
			}
		}
		ws, err := store.List[store.Workload](tx, "")
		if err != nil {
			out = append(out, err.Error())
			return nil
		}
		milli := map[string]int64{}
		perTenant := map[string]int64{}
		seen := map[string]bool{}
		for _, w := range ws {
			if w.Running == nil || w.State != store.StateRunning && w.State != store.StatePending {
				continue
			}
			if seen[w.Key()] {
				out = append(out, fmt.Sprintf("workload %s is placed twice", w.Key()))
			}
			seen[w.Key()] = true
			for _, rep := range w.Running.Replicas {
				for _, g := range rep.GPUs {
					if g < 0 || g >= gpus[string(rep.Node)] {
						out = append(out, fmt.Sprintf("workload %s uses GPU %d of node %s, which has %d", w.Key(), g, rep.Node, gpus[string(rep.Node)]))
					}
					k := string(rep.Node) + "/" + strconv.Itoa(g)
					milli[k] += int64(rep.Milli)
					perTenant[w.Tenant] += int64(rep.Milli)
				}
			}
		}
		for k, m := range milli {
			if m > 1000 {
				out = append(out, fmt.Sprintf("GPU %s is allocated %d milli", k, m))
			}
		}
		for tenant, m := range perTenant {
			if m > 20*1000 {
				out = append(out, fmt.Sprintf("tenant %s runs %d milli-GPUs, over its limit of 20 GPUs", tenant, m))
			}
		}
		return nil
	})
	return out
}

// checkFencedHistory reads every revision of the commit key and counts
// the commits made under an election key older than one that had
// already committed: writes of a deposed leader.
func checkFencedHistory(t *testing.T, cli *clientv3.Client) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := cli.Watch(ctx, haPrefix+"commit", clientv3.WithRev(1))
	head, err := cli.Get(ctx, haPrefix+"commit")
	if err != nil || len(head.Kvs) == 0 {
		t.Fatalf("reading the commit key: %v", err)
	}
	last := head.Kvs[0].ModRevision
	var newest int64
	deposed, commits := 0, 0
	for resp := range w {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.Events {
			commits++
			key := string(e.Kv.Value)
			r := creationAt(ctx, cli, key, e.Kv.ModRevision)
			if r == 0 {
				continue // unfenced: the settings every replica writes at start
			}
			if r < 0 {
				deposed++
				t.Errorf("commit at revision %d names election key %q, which did not exist then", e.Kv.ModRevision, key)
				continue
			}
			if r < newest {
				deposed++
				t.Errorf("commit at revision %d made under %s (created at %d) after a leader elected at %d had committed", e.Kv.ModRevision, key, r, newest)
			}
			newest = max(newest, r)
			if e.Kv.ModRevision >= last {
				t.Logf("commits checked: %d", commits)
				return deposed
			}
		}
	}
	return deposed
}

// creationAt is the creation revision of election key key as of revision
// rev (the key may be deleted since; at rev it existed, as the commit's
// fence compared its creation revision). 0 for an unfenced commit.
func creationAt(ctx context.Context, cli *clientv3.Client, key string, rev int64) int64 {
	if key == "" {
		return 0
	}
	resp, err := cli.Get(ctx, key, clientv3.WithRev(rev))
	if err != nil || len(resp.Kvs) != 1 {
		return -1
	}
	return resp.Kvs[0].CreateRevision
}

// TestHAFollower: a follower answers reads from its copy of the store,
// sends writes to the leader with a 307 naming it, and so do the reads of
// state only the leader computes; /v1/cluster names the leader on both.
// The replicas reach etcd over TLS with client certificates.
func TestHAFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real etcd cluster and arbiter replicas")
	}
	ec := etcdtest.StartTLS(t, 1)
	cfg := writeFile(t, t.TempDir(), "fleet.yaml", haFleet)
	files := ec.TLS()
	rs := startHA(t, 2, ec.Endpoints(), cfg, "--etcd-cacert", files.CA, "--etcd-cert", files.Cert, "--etcd-key", files.Key)
	leader := leaderOf(rs)
	follower := rs[0]
	if follower == leader {
		follower = rs[1]
	}
	waitFor(t, 10*time.Second, "the follower ready", func() bool { return follower.role() == "follower" })
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(method, url, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp, b.String()
	}
	// A tenant made through the leader shows on the follower, read there.
	if resp, body := call("POST", leader.url+"/v1/tenants", `{"name":"carol"}`); resp.StatusCode != 201 {
		t.Fatalf("create on the leader: %d %s", resp.StatusCode, body)
	}
	waitFor(t, 10*time.Second, "the follower to read the new tenant", func() bool {
		resp, body := call("GET", follower.url+"/v1/tenants/carol", "")
		return resp.StatusCode == 200 && strings.Contains(body, `"carol"`)
	})
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/tenants", `{"name":"dave"}`},
		{"DELETE", "/v1/tenants/carol", ""},
		{"GET", "/v1/tenants/acme/workloads", ""},
		{"GET", "/v1/spot-prices", ""},
	} {
		resp, body := call(c.method, follower.url+c.path, c.body)
		if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != leader.url+c.path || resp.Header.Get(api.LeaderHeader) != leader.url {
			t.Errorf("%s %s on the follower: %d Location %q, want 307 to %s: %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Location"), leader.url+c.path, body)
		}
	}
	if resp, _ := call("GET", follower.url+"/v1/tenants/dave", ""); resp.StatusCode != 404 {
		t.Errorf("the redirected create was made by the follower: %d", resp.StatusCode)
	}
	for _, r := range rs {
		var info api.ClusterInfo
		resp, body := call("GET", r.url+"/v1/cluster", "")
		if err := json.Unmarshal([]byte(body), &info); err != nil || resp.StatusCode != 200 {
			t.Fatalf("cluster on %s: %d %s", r.url, resp.StatusCode, body)
		}
		if info.Leader != leader.url || info.Self != r.url || len(info.Replicas) != 2 {
			t.Errorf("cluster on %s: %+v, want leader %s and 2 replicas", r.url, info, leader.url)
		}
	}
	// Only the leader exports the state's gauges and the last cycle's time
	// (deploy/prometheus/rules.yaml aggregates by job for that).
	waitFor(t, 10*time.Second, "the leader's first cycle in /metrics", func() bool {
		_, body := call("GET", leader.url+"/metrics", "")
		return strings.Contains(body, "\narbiter_last_cycle_timestamp_seconds ")
	})
	for _, r := range rs {
		_, body := call("GET", r.url+"/metrics", "")
		for _, name := range []string{"arbiter_capacity_gpus{", "arbiter_nodes{", "arbiter_last_cycle_timestamp_seconds "} {
			if got := strings.Contains(body, "\n"+name); got != (r == leader) {
				t.Errorf("/metrics of %s (the leader: %v) has %s: %v", r.url, r == leader, name, got)
			}
		}
	}
}
