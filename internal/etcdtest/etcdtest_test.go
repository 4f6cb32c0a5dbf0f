package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"github.com/arbiterhq/arbiter/internal/testbin"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitFor polls cond every 20 ms until it returns nil or d passes; it returns
// the time it took and fails the test with cond's last error at the deadline.
func waitFor(t *testing.T, d time.Duration, what string, cond func(ctx context.Context) error) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		err := cond(ctx)
		if err == nil {
			return time.Since(start)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v: %v", what, d, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// put writes key=val through cli with a short timeout (waitFor retries it).
func put(ctx context.Context, cli *clientv3.Client, key, val string) error {
	return putWithin(ctx, cli, key, val, time.Second)
}

// putWithin is put with timeout d.
func putWithin(ctx context.Context, cli *clientv3.Client, key, val string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err := cli.Put(ctx, key, val)
	return err
}

// memberIDs returns each member's raft ID, by index.
func memberIDs(t *testing.T, c *Cluster) []uint64 {
	t.Helper()
	ids := make([]uint64, len(c.members))
	for i := range c.members {
		resp, err := status(context.Background(), c.Endpoint(i), 2*time.Second, nil)
		if err != nil {
			t.Fatalf("status of member %d: %v", i, err)
		}
		ids[i] = resp.Header.MemberId
	}
	return ids
}

func TestThreeMembersElectALeader(t *testing.T) {
	c := Start(t, 3)
	if got := len(c.Endpoints()); got != 3 {
		t.Fatalf("Endpoints: %d, want 3", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every member must name the member Leader returned.
	ids := memberIDs(t, c)
	for i := range c.members {
		resp, err := status(ctx, c.Endpoint(i), 2*time.Second, c.ClientTLS())
		if err != nil {
			t.Fatalf("status of member %d: %v", i, err)
		}
		if resp.Leader != ids[leader] {
			t.Errorf("member %d names leader %x, Leader() said member %d (%x)", i, resp.Leader, leader, ids[leader])
		}
	}
	cli := c.Client(t)
	if err := put(ctx, cli, "k", "v"); err != nil {
		t.Fatalf("put on a healthy cluster: %v", err)
	}
}

func TestKillLeaderFailover(t *testing.T) {
	c := Start(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, cli, "before", "1"); err != nil {
		t.Fatalf("put before the kill: %v", err)
	}
	c.Kill(old)
	killed := time.Now()
	elected := waitFor(t, 10*time.Second, "a new raft leader after killing the old one", func(ctx context.Context) error {
		i, err := c.Leader(ctx)
		if err == nil && i == old {
			return fmt.Errorf("the killed member %d is still reported leader", old)
		}
		return err
	})
	// Short put timeouts, so a put stuck on the dead member's connection
	// does not hide how soon the cluster accepts writes again.
	waitFor(t, 10*time.Second, "a put after killing the raft leader", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := cli.Put(ctx, "after", "1")
		return err
	})
	t.Logf("killed raft leader %d: new leader after %v, a put accepted after %v", old, elected, time.Since(killed))
}

func TestStoppedLeaderIsReplacedAndRejoins(t *testing.T) {
	c := Start(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(old)
	waitFor(t, 10*time.Second, "a new leader while the old one is stopped", func(ctx context.Context) error {
		i, err := c.Leader(ctx)
		if err == nil && i == old {
			return fmt.Errorf("the stopped member %d is still reported leader", old)
		}
		return err
	})
	waitFor(t, 10*time.Second, "a put while the old leader is stopped", func(ctx context.Context) error {
		return put(ctx, cli, "during", "1")
	})
	c.Cont(old)
	// The resumed member must follow the new leader and see the write made
	// while it was paused.
	mc := c.MemberClient(t, old)
	waitFor(t, 10*time.Second, "the resumed member to catch up", func(ctx context.Context) error {
		return hasKey(ctx, mc, "during", "1")
	})
}

// hasKey answers nil when cli's member holds key=val in its own state.
func hasKey(ctx context.Context, cli *clientv3.Client, key, val string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key, clientv3.WithSerializable())
	if err != nil {
		return err
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != val {
		return fmt.Errorf("%s: got %v, want %q", key, resp.Kvs, val)
	}
	return nil
}

func TestRestartedMemberCatchesUp(t *testing.T) {
	c := Start(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := (leader + 1) % 3
	c.Kill(victim)
	// A killed member must not answer.
	if err := hasKey(ctx, c.MemberClient(t, victim), "x", "y"); err == nil {
		t.Fatal("a killed member answered a read")
	}
	const n = 200
	for i := range n {
		// Not retried, so not the short timeout: on a loaded machine (CI
		// runs packages side by side) two members' fsyncs took over 700 ms.
		if err := putWithin(ctx, cli, "k"+strconv.Itoa(i), strconv.Itoa(i), 10*time.Second); err != nil {
			t.Fatalf("put %d with one member down: %v", i, err)
		}
	}
	c.Restart(victim)
	mc := c.MemberClient(t, victim)
	took := waitFor(t, 20*time.Second, "the restarted member to catch up", func(ctx context.Context) error {
		return hasKey(ctx, mc, "k"+strconv.Itoa(n-1), strconv.Itoa(n-1))
	})
	t.Logf("restarted member %d caught up %v after answering Status", victim, took)
	resp, err := mc.Get(ctx, "k", clientv3.WithPrefix(), clientv3.WithSerializable(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != n {
		t.Fatalf("restarted member holds %d keys, want %d", resp.Count, n)
	}
}

func TestLeaderWithEveryMemberDown(t *testing.T) {
	c := Start(t, 1)
	c.Kill(0)
	_, err := c.Leader(context.Background())
	if !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader with no member running: %v, want ErrNoLeader", err)
	}
	c.Restart(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if i, err := c.WaitLeader(ctx); err != nil || i != 0 {
		t.Fatalf("WaitLeader after restart: %d, %v", i, err)
	}
}

// TestScript runs scripts/etcd.sh cluster and stop as CI and a person would.
func TestScript(t *testing.T) {
	Binary(t) // build (or find) it first, with a clear failure
	script, err := testbin.Script("etcd")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out, err := exec.Command("bash", script, "cluster", dir, "3").Output()
	if err != nil {
		t.Fatalf("etcd.sh cluster: %v\n%s", err, stderrOf(err))
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if out, err := exec.Command("bash", script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("etcd.sh stop: %v\n%s", err, out)
		}
	}
	t.Cleanup(stop)
	eps := strings.Split(strings.TrimSpace(string(out)), ",")
	if len(eps) != 3 {
		t.Fatalf("etcd.sh cluster printed %q, want 3 comma-separated endpoints", out)
	}
	cli := newClient(t, nil, eps...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := put(ctx, cli, "script", "ok"); err != nil {
		t.Fatalf("put on the script's cluster: %v", err)
	}
	pids := make([]int, 3)
	for i := range pids {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("member-%d.pid", i)))
		if err != nil {
			t.Fatal(err)
		}
		if pids[i], err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	for i, pid := range pids {
		if alive(pid) {
			t.Errorf("member %d (pid %d) still alive after stop", i, pid)
		}
	}
}

// alive reports whether pid is a live process (a zombie, exited but not yet
// reaped by its new parent, is not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	rest := string(b)[strings.LastIndexByte(string(b), ')')+1:]
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
