package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// The end-to-end tests build the real binary once and drive it only
// through the CLI and the API on loopback.

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func arbiterBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "arbiter-e2e-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "arbiter")
		out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/arbiter").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

const adminToken = "e2e-admin-token-0123456789abcdef"

// proc is a running server.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	log  *syncBuffer
	done chan error
}

// syncBuffer is a bytes.Buffer the server process writes to while the
// test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startServer(t *testing.T, data string, args ...string) *proc {
	t.Helper()
	bin := arbiterBin(t)
	addrFile := filepath.Join(data, "addr")
	os.Remove(addrFile)
	cmd := exec.Command(bin, append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0", "--addr-file", addrFile}, args...)...)
	cmd.Env = append(os.Environ(), "ARBITER_ADMIN_TOKEN="+adminToken)
	p := &proc{t: t, cmd: cmd, log: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			p.addr = "http://" + string(b)
			break
		}
		select {
		case err := <-p.done:
			t.Fatalf("server exited: %v\n%s", err, p.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not start:\n%s", p.log)
		}
		time.Sleep(10 * time.Millisecond) // waiting for a process, not asserting
	}
	waitFor(t, 10*time.Second, "readyz", func() bool {
		resp, err := http.Get(p.addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cli runs the binary as a client.
func cli(t *testing.T, p *proc, token string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(arbiterBin(t), args...)
	// ARBITER_CONFIG: a file that does not exist, so that no client context
	// of the user's applies.
	cmd.Env = append(os.Environ(), "ARBITER_SERVER="+p.addr, "ARBITER_TOKEN="+token, "ARBITER_TENANT=", "ARBITER_CONTEXT=",
		"ARBITER_CONFIG="+filepath.Join(t.TempDir(), "config.yaml"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String() + errb.String(), fmt.Errorf("arbiter %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func mustCLI(t *testing.T, p *proc, token string, args ...string) string {
	t.Helper()
	out, err := cli(t, p, token, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func cliJSON(t *testing.T, p *proc, token string, v any, args ...string) {
	t.Helper()
	out := mustCLI(t, p, token, append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("arbiter %v: %v\n%s", args, err, out)
	}
}

// e2eFleet: eastus has 32 A100 GPUs in one block and 2 H100 machines;
// westus2 has 16 A100 GPUs.
const e2eFleet = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 4}]
            - name: eus-h
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 2}]
    - name: westus2
      zones:
        - name: "1"
          blocks:
            - name: wus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 2}]
`

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func job(name string, gpus, replicas int, regions string, extra ...string) string {
	s := fmt.Sprintf("name: %s\ngpus: %d\nreplicas: %d\nflavors: [A100-80G]\nregions: [%s]\n", name, gpus, replicas, regions)
	return s + strings.Join(extra, "\n") + "\n"
}

// TestEndToEnd: tenants, quotas, a reservation, workloads that queue,
// borrow, get reclaimed and overflow; usage and why tell the truth.
func TestEndToEnd(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "fleet.yaml", e2eFleet)
	p := startServer(t, filepath.Join(dir, "data"), "--config", cfg, "--interval", "500ms", "--policy-interval", "100ms")
	ctx := context.Background()
	admin := client.New(p.addr, adminToken)

	// Tenants and quotas, through the CLI.
	mustCLI(t, p, adminToken, "tenant", "create", "customers")
	mustCLI(t, p, adminToken, "tenant", "create", "contoso", "--parent", "customers",
		"--quota", "flavor=A100-80G,region=eastus,limit=8",
		"--quota", "flavor=A100-80G,region=westus2,limit=16",
		"--quota", "flavor=H100-80G,region=eastus,limit=16",
		"--allowed-priorities", "critical,high,normal,low,spot")
	mustCLI(t, p, adminToken, "tenant", "create", "training", "--quota", "flavor=A100-80G,region=eastus,guaranteed=32,limit=32")
	mustCLI(t, p, adminToken, "tenant", "create", "research", "--quota", "flavor=A100-80G,region=eastus,limit=32")
	tok := map[string]string{}
	for _, n := range []string{"contoso", "training", "research"} {
		var tk api.Token
		cliJSON(t, p, adminToken, &tk, "tenant", "token", "create", n)
		tok[n] = tk.Secret
	}
	if out := mustCLI(t, p, adminToken, "tenant", "list"); !strings.Contains(out, "contoso") || !strings.Contains(out, "training") {
		t.Fatalf("tenant list:\n%s", out)
	}
	state := func(tenant, name string) api.Workload {
		w, err := client.New(p.addr, tok[tenant]).Workload(ctx, tenant, name)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	waitState := func(tenant, name, want string) api.Workload {
		t.Helper()
		var w api.Workload
		waitFor(t, 10*time.Second, tenant+"/"+name+" "+want, func() bool { w = state(tenant, name); return w.State == want })
		return w
	}
	submit := func(tenant, name, spec string) {
		t.Helper()
		f := writeFile(t, dir, name+".yaml", spec)
		mustCLI(t, p, tok[tenant], "workload", "submit", "-f", f)
	}

	// Borrowing: research has no guarantee and borrows all 32 eastus GPUs
	// that training is guaranteed but does not use.
	submit("research", "sweep", job("sweep", 8, 4, "eastus"))
	waitState("research", "sweep", "Running")

	// Reclaim: training claims 16 of its guarantee; research's borrower is
	// preempted and queues, and why says so.
	submit("training", "train", job("train", 8, 2, "eastus", "topology: same-block", "priority: high"))
	waitState("training", "train", "Running")
	sweep := waitState("research", "sweep", "Pending")
	if sweep.Preemptions != 1 || !strings.Contains(sweep.LastPreemption, "training reclaims its guarantee") {
		t.Fatalf("sweep after reclaim: %+v", sweep)
	}
	var why api.Why
	waitFor(t, 5*time.Second, "why sweep", func() bool {
		why = api.Why{}
		cliJSON(t, p, tok["research"], &why, "workload", "why", "sweep")
		return why.Code != ""
	})
	if why.State != "Pending" || why.Code == "QuotaLimit" || !strings.Contains(strings.Join(why.Details, "\n"), "last preempted: tenant training reclaims") {
		t.Fatalf("why sweep: %+v", why)
	}

	// A reservation, all or nothing.
	out := mustCLI(t, p, tok["contoso"], "reservation", "create", "--name", "r1", "--sku", "Standard_ND96isr_H100_v5", "--capacity", "1", "--region", "eastus")
	if !strings.Contains(out, "r1") {
		t.Fatalf("reservation create:\n%s", out)
	}
	if out, err := cli(t, p, tok["contoso"], "reservation", "create", "--name", "r2", "--sku", "Standard_ND96isr_H100_v5", "--capacity", "2", "--region", "eastus"); err == nil || !strings.Contains(out, "InsufficientCapacity") || !strings.Contains(out, "1 available") {
		t.Fatalf("over-large reservation: %v\n%s", err, out)
	}
	submit("contoso", "vm", "name: vm\nkind: vm\npriority: critical\ngpus: 8\nflavors: [H100-80G]\nregions: [eastus]\nreservation: r1\n")
	vm := waitState("contoso", "vm", "Running")
	if !vm.Running.OnReservation {
		t.Fatalf("vm not on its reservation: %+v", vm.Running)
	}
	var res api.Reservation
	waitFor(t, 5*time.Second, "reservation utilization", func() bool {
		cliJSON(t, p, tok["contoso"], &res, "reservation", "show", "r1")
		return res.AllocatedGPUs == 8000
	})
	if res.ReservedGPUs != 8000 || res.Capacity != 1 {
		t.Fatalf("reservation: %+v", res)
	}
	cliJSON(t, p, tok["contoso"], &res, "reservation", "resize", "r1", "--capacity", "2")
	if res.Capacity != 2 || len(res.Nodes) != 2 {
		t.Fatalf("grown reservation: %+v", res)
	}
	if out, err := cli(t, p, tok["contoso"], "reservation", "resize", "r1", "--capacity", "3"); err == nil || !strings.Contains(out, "InsufficientCapacity") {
		t.Fatalf("growing beyond the fleet: %v\n%s", err, out)
	}
	cliJSON(t, p, tok["contoso"], &res, "reservation", "resize", "r1", "--capacity", "1")
	if res.Capacity != 1 || res.AllocatedGPUs != 8000 {
		t.Fatalf("shrunk reservation must keep the machine in use: %+v", res)
	}
	if out, err := cli(t, p, tok["contoso"], "reservation", "delete", "r1"); err == nil || !strings.Contains(out, "Conflict") {
		t.Fatalf("deleting a reservation in use: %v\n%s", err, out)
	}

	// Overflow: contoso's eastus limit is 8; the second VM goes to westus2.
	submit("contoso", "vm-a", job("vm-a", 8, 1, "eastus, westus2", "kind: vm"))
	waitState("contoso", "vm-a", "Running")
	submit("contoso", "vm-b", job("vm-b", 8, 1, "eastus, westus2", "kind: vm"))
	vmb := waitState("contoso", "vm-b", "Running")
	if vmb.Running.Region != "westus2" {
		t.Fatalf("vm-b should overflow to westus2: %+v", vmb.Running)
	}
	// Queue: a VM that only accepts eastus waits at the quota limit.
	submit("contoso", "vm-c", job("vm-c", 8, 1, "eastus", "kind: vm"))
	waitFor(t, 5*time.Second, "why vm-c", func() bool {
		why = api.Why{} // decoding keeps fields the answer leaves out
		cliJSON(t, p, tok["contoso"], &why, "workload", "why", "vm-c")
		return why.Code != ""
	})
	if why.Code != "QuotaLimit" || !strings.Contains(why.Reason, "at limit 8/8") {
		t.Fatalf("why vm-c: %+v", why)
	}
	// The usage table tells the truth: 8 of 8 A100 in eastus, and the
	// reservation's 8 H100 count against the H100 quota (the VM on it does
	// not count again).
	out = mustCLI(t, p, tok["contoso"], "usage", "list", "--region", "eastus")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "CURRENT VALUE") || !strings.Contains(lines[0], "RESERVED") || !strings.Contains(lines[0], "LIMIT") {
		t.Fatalf("usage header: %q", lines[0])
	}
	var usage []api.Usage
	cliJSON(t, p, tok["contoso"], &usage, "usage", "list", "--region", "eastus")
	got := map[string]string{}
	for _, u := range usage {
		got[u.Flavor] = fmt.Sprintf("%g/%g reserved %g", u.CurrentValue, *u.Limit, u.Reserved)
	}
	if got["A100-80G"] != "8/8 reserved 0" || got["H100-80G"] != "8/16 reserved 8" || len(got) != 2 {
		t.Fatalf("usage eastus: %v\n%s", got, out)
	}

	// Reclaim again: training takes its other 16 GPUs back; contoso's
	// borrower in eastus is preempted and overflows to westus2.
	submit("training", "train2", job("train2", 8, 2, "eastus", "topology: same-block"))
	waitState("training", "train2", "Running")
	vma := waitState("contoso", "vm-a", "Running")
	waitFor(t, 10*time.Second, "vm-a moved to westus2", func() bool {
		vma = state("contoso", "vm-a")
		return vma.Running != nil && vma.Running.Region == "westus2"
	})
	if vma.Preemptions != 1 {
		t.Fatalf("vm-a: %+v", vma)
	}

	// Cancel, then delete the reservation.
	mustCLI(t, p, tok["contoso"], "workload", "cancel", "vm")
	mustCLI(t, p, tok["contoso"], "reservation", "delete", "r1")
	if out := mustCLI(t, p, tok["contoso"], "workload", "list"); !strings.Contains(out, "Cancelled") || strings.Contains(out, "sweep") {
		t.Fatalf("workload list of contoso:\n%s", out)
	}
	if out, err := cli(t, p, tok["contoso"], "workload", "show", "sweep", "--tenant", "research"); err == nil || !strings.Contains(out, "NotFound") {
		t.Fatalf("contoso reading research's workload: %v\n%s", err, out)
	}

	// Policies: applied through the CLI, evaluated on live metrics.
	pol := writeFile(t, dir, "rules.yaml", `policies:
  - name: cap-research
    when: {metric: utilization, of: cluster, above: 10%}
    then: [{type: set_limit, target: "tenant:research", limit: 8}]
`)
	if out := mustCLI(t, p, adminToken, "policy", "apply", "-f", pol); !strings.Contains(out, "cap-research") {
		t.Fatalf("policy apply:\n%s", out)
	}
	var fs []api.Firing
	waitFor(t, 10*time.Second, "a firing", func() bool {
		var err error
		fs, err = admin.Firings(ctx, "rules")
		return err == nil && len(fs) > 0
	})
	if fs[0].Rule != "cap-research" || fs[0].Event != "fired" {
		t.Fatalf("firings: %+v", fs)
	}
	if _, err := cli(t, p, tok["contoso"], "policy", "apply", "-f", pol); err == nil {
		t.Fatal("a tenant applied a policy")
	}

	// Alerts (a split rule), pushed metrics, partitions and node tokens
	// through the binary.
	alerts := writeFile(t, dir, "alerts.yaml", `webhook: http://127.0.0.1:9/hook
rules:
  - name: tenant-waiting
    metric: pending_gpus
    of: "tenant:*"
    split: true
    aggregation: max
    window: 5m
    frequency: 1m
    operator: ">"
    threshold: 64
`)
	if out := mustCLI(t, p, adminToken, "alert", "apply", "-f", alerts); !strings.Contains(out, "tenant-waiting") || !strings.Contains(out, "pending_gpus of tenant:*") {
		t.Fatalf("alert apply:\n%s", out)
	}
	if out := mustCLI(t, p, adminToken, "alert", "list", "-o", "json"); !strings.Contains(out, `"split": true`) {
		t.Fatalf("alert list:\n%s", out)
	}
	if out, err := cli(t, p, tok["contoso"], "alert", "apply", "-f", alerts); err == nil || !strings.Contains(out, "Forbidden") {
		t.Fatalf("a tenant applied alert rules:\n%s", out)
	}
	if out := mustCLI(t, p, adminToken, "metric", "push", "--metric", "p95_latency", "--target", "service:chat", "--value", "0.2"); !strings.Contains(out, "ACCEPTED") {
		t.Fatalf("metric push:\n%s", out)
	}
	if out, err := cli(t, p, adminToken, "metric", "push", "--metric", "p95_latency", "--target", "chat", "--value", "0.2"); err == nil || !strings.Contains(out, "samples[0].target") {
		t.Fatalf("metric push without a target kind:\n%s", out)
	}
	if out := mustCLI(t, p, adminToken, "partition", "list"); !strings.Contains(out, "NAME") {
		t.Fatalf("partition list:\n%s", out)
	}
	if out := mustCLI(t, p, adminToken, "node", "token", "create", "wus-a-n0000", "-o", "json"); !strings.Contains(out, `"node": "wus-a-n0000"`) {
		t.Fatalf("node token create:\n%s", out)
	}

	// Fleet, events, metrics, health, OpenAPI.
	if out := mustCLI(t, p, adminToken, "node", "list", "--region", "westus2"); strings.Count(out, "wus-a-n") != 2 {
		t.Fatalf("node list:\n%s", out)
	}
	if out := mustCLI(t, p, tok["contoso"], "events"); !strings.Contains(out, "WorkloadPlaced") || strings.Contains(out, "research") {
		t.Fatalf("contoso's events:\n%s", out)
	}
	if code, _ := getAs(t, p.addr+"/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d, want 401 (it names tenants)", code)
	}
	_, body := getAs(t, p.addr+"/metrics", adminToken)
	for _, m := range []string{`arbiter_allocated_gpus{flavor="A100-80G",region="eastus",tenant="training"} 32`, "arbiter_schedule_cycle_duration_seconds_bucket", "arbiter_preemptions_total", "arbiter_policy_firings_total"} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	// Workloads were submitted, so group commits happened.
	for _, m := range []string{"arbiter_store_commit_duration_seconds_count", "arbiter_store_commit_wait_seconds_count", "arbiter_store_commit_writes_sum"} {
		if !regexp.MustCompile(`(?m)^` + m + ` [1-9]`).MatchString(body) {
			t.Errorf("/metrics lacks %s > 0 (the store's group commits)", m)
		}
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(get(t, p.addr+"/v1/openapi.json")), &doc); err != nil || doc["openapi"] == nil {
		t.Fatalf("openapi.json: %v", err)
	}
	// A workload may name node pools; no node of this fleet is in "spare",
	// and why says so.
	submit("contoso", "pinned", "name: pinned\ngpus: 1\nflavors: [H100-80G]\nregions: [eastus]\npools: [spare]\n")
	waitFor(t, 5*time.Second, "why pinned", func() bool {
		why = api.Why{}
		cliJSON(t, p, tok["contoso"], &why, "workload", "why", "pinned")
		return why.Code != ""
	})
	if !strings.Contains(why.Reason, "pools [spare]") {
		t.Errorf("why pinned: %+v, want the pool named", why)
	}
	if strings.Contains(p.log.String(), adminToken) || strings.Contains(p.log.String(), tok["contoso"]) {
		t.Fatal("a token secret appears in the server log")
	}
}

// getAs GETs url with token (none when "") and returns status and body.
func getAs(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

var _ = errors.New
