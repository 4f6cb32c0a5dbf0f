// Package etcdtest runs a real etcd cluster on loopback for tests.
//
// The etcd server is the one pinned in tools/etcd (built from its Go module by
// scripts/etcd.sh build, once per machine and cached), so a machine with only
// Go runs these tests. Start launches n members on free loopback ports in the
// test's temporary directory, waits until every member answers a Status call
// and agrees on a raft leader, and stops every member when the test ends.
// Kill, Stop, Cont and Restart inject the faults the HA tests need: SIGKILL,
// SIGSTOP (a member that looks partitioned), SIGCONT, and a restart of a
// killed member on its own data directory.
//
// The methods that take no context report failures with t.Fatalf on the
// testing.TB given to Start, so they must be called from the test's goroutine.
package etcdtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/arbiterhq/arbiter/internal/testbin"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrNoLeader is returned by Leader when no reachable member is the raft leader.
var ErrNoLeader = errors.New("etcdtest: no raft leader among the running members")

// startTimeout bounds how long Start and Restart wait for members to answer.
const startTimeout = 30 * time.Second

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns the path of the etcd server binary, building it through
// scripts/etcd.sh build on the first call in this process. A build failure is
// fatal (with the script's output): a test that needs etcd must not pass by
// skipping.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { buildPath, buildErr = testbin.Build("etcd") })
	if buildErr != nil {
		t.Fatalf("etcdtest: %v", buildErr)
	}
	return buildPath
}

// Start builds etcd if needed, starts an n-member cluster and waits until it is
// healthy. Everything stops in t.Cleanup. Ports that another process takes
// between the pick and etcd's bind make that try fail; Start then retries on
// fresh ports, and fails the test after three tries with the members' logs.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("etcdtest.Start: n = %d, want at least 1", n)
	}
	bin := Binary(t)
	var lastErr error
	for try := 1; try <= 3; try++ {
		dir := filepath.Join(t.TempDir(), "etcd")
		c, err := launch(t, bin, dir, n, nil)
		if err == nil {
			t.Cleanup(c.shutdown)
			return c
		}
		lastErr = err
		logs := c.logTails(30)
		c.shutdown()
		t.Logf("etcdtest: cluster try %d failed: %v\n%s", try, err, logs)
	}
	t.Fatalf("etcdtest: could not start a healthy %d-member cluster: %v", n, lastErr)
	return nil
}

// launch starts the n members of a new cluster in dir and waits until healthy.
func launch(t testing.TB, bin, dir string, n int, certs *TLSFiles) (*Cluster, error) {
	c := &Cluster{t: t, bin: bin, dir: dir, certs: certs}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return c, err
	}
	ports, err := pickPorts(2 * n)
	if err != nil {
		return c, err
	}
	peers := make([]string, n)
	for i := range n {
		m := &member{
			name:       fmt.Sprintf("m%d", i),
			dataDir:    filepath.Join(dir, fmt.Sprintf("member-%d", i)),
			logPath:    filepath.Join(dir, fmt.Sprintf("member-%d.log", i)),
			clientPort: ports[2*i],
			secure:     certs != nil,
			peerPort:   ports[2*i+1],
		}
		c.members = append(c.members, m)
		peers[i] = m.name + "=" + m.peerURL()
	}
	c.initialCluster = strings.Join(peers, ",")
	c.token = fmt.Sprintf("arbiter-etcdtest-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, m := range c.members {
		if err := c.spawn(m); err != nil {
			return c, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.waitHealthy(ctx); err != nil {
		return c, err
	}
	return c, nil
}

// Cluster is a running etcd cluster started by Start.
type Cluster struct {
	t              testing.TB
	bin, dir       string
	initialCluster string
	token          string

	certs *TLSFiles // nil: plain http

	mu      sync.Mutex
	members []*member
}

// Endpoints returns every member's client URL, in member order.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.clientURL()
	}
	return eps
}

// Endpoint returns member i's client URL.
func (c *Cluster) Endpoint(i int) string { return c.member(i).clientURL() }

// Dir returns the directory holding the members' data directories and logs
// (member-N and member-N.log).
func (c *Cluster) Dir() string { return c.dir }

// Client returns a client on every endpoint, closed in t.Cleanup.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return newClient(t, c.ClientTLS(), c.Endpoints()...)
}

// MemberClient returns a client on member i's endpoint only, closed in
// t.Cleanup; with clientv3.WithSerializable it reads that member's own state.
func (c *Cluster) MemberClient(t testing.TB, i int) *clientv3.Client {
	t.Helper()
	return newClient(t, c.ClientTLS(), c.Endpoint(i))
}

func newClient(t testing.TB, tc *tls.Config, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, TLS: tc})
	if err != nil {
		t.Fatalf("etcdtest: client on %v: %v", endpoints, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Kill sends SIGKILL to member i and waits until it has exited.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	m := c.member(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.state == killed {
		c.t.Fatalf("etcdtest: Kill(%d): member is already killed", i)
	}
	if err := m.kill(); err != nil {
		c.t.Fatalf("etcdtest: Kill(%d): %v", i, err)
	}
}

// Stop sends SIGSTOP to member i: it keeps its sockets but answers nothing,
// which its peers and clients see as a partition.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	c.signal(i, running, stopped, "Stop")
}

// Cont sends SIGCONT to member i, resuming a member paused by Stop.
func (c *Cluster) Cont(i int) {
	c.t.Helper()
	c.signal(i, stopped, running, "Cont")
}

// Restart starts killed member i again on its data directory and ports, and
// waits until it answers a Status call. It does not wait for it to catch up.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	m := c.member(i)
	c.mu.Lock()
	if m.state != killed {
		c.mu.Unlock()
		c.t.Fatalf("etcdtest: Restart(%d): member is %s, not killed", i, m.state)
	}
	err := c.spawn(m)
	c.mu.Unlock()
	if err != nil {
		c.t.Fatalf("etcdtest: Restart(%d): %v", i, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := c.waitStatus(ctx, m); err != nil {
		c.t.Fatalf("etcdtest: Restart(%d): %v\n%s", i, err, c.logTails(30))
	}
}

// Leader returns the index of the raft leader: the running member that says it
// is the leader (the one with the highest term, should a resumed old leader
// still claim it). It returns ErrNoLeader when no running member is the leader,
// for example during an election; callers wait on it with a deadline.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	best, bestTerm := -1, uint64(0)
	var errs []error
	for i, m := range c.members {
		c.mu.Lock()
		st := m.state
		c.mu.Unlock()
		if st != running {
			continue
		}
		resp, err := status(ctx, m.clientURL(), time.Second, c.ClientTLS())
		if err != nil {
			errs = append(errs, fmt.Errorf("member %d: %w", i, err))
			continue
		}
		if resp.Header.MemberId == resp.Leader && resp.RaftTerm >= bestTerm {
			best, bestTerm = i, resp.RaftTerm
		}
	}
	if best < 0 {
		if err := ctx.Err(); err != nil {
			return -1, err
		}
		return -1, errors.Join(append([]error{ErrNoLeader}, errs...)...)
	}
	return best, nil
}

// WaitLeader polls Leader until it names a member or ctx ends.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	for {
		i, err := c.Leader(ctx)
		if err == nil {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("waiting for a leader: %w (last: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// status asks the member at endpoint for its Status over a connection of its
// own. A member whose port refuses connections (killed, or still starting)
// fails at once rather than after the timeout.
func status(ctx context.Context, endpoint string, timeout time.Duration, tc *tls.Config) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(strings.TrimPrefix(endpoint, "http://"), "https://"))
	if err != nil {
		return nil, err
	}
	_ = conn.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: timeout, Logger: zap.NewNop(), TLS: tc})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	return cli.Status(ctx, endpoint)
}

// waitHealthy waits until every member answers Status and all of them name the
// same, non-zero raft leader.
func (c *Cluster) waitHealthy(ctx context.Context) error {
	for {
		leaders := map[uint64]bool{}
		var err error
		for _, m := range c.members {
			var resp *clientv3.StatusResponse
			resp, err = c.waitStatus(ctx, m)
			if err != nil {
				return err
			}
			leaders[resp.Leader] = true
		}
		if len(leaders) == 1 && !leaders[0] {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("members do not agree on a leader: %v", leaders)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitStatus polls member m's Status until it answers, m exits, or ctx ends.
func (c *Cluster) waitStatus(ctx context.Context, m *member) (*clientv3.StatusResponse, error) {
	for {
		resp, err := status(ctx, m.clientURL(), time.Second, c.ClientTLS())
		if err == nil {
			return resp, nil
		}
		select {
		case <-m.exited:
			return nil, fmt.Errorf("member %s exited: %v", m.name, m.waitErr)
		case <-ctx.Done():
			return nil, fmt.Errorf("member %s did not answer Status: %v", m.name, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// member returns member i, failing the test on a bad index.
func (c *Cluster) member(i int) *member {
	c.t.Helper()
	if i < 0 || i >= len(c.members) {
		c.t.Fatalf("etcdtest: member index %d out of range [0, %d)", i, len(c.members))
	}
	return c.members[i]
}

// signal moves member i from state from to state to by sending the matching signal.
func (c *Cluster) signal(i int, from, to state, what string) {
	c.t.Helper()
	m := c.member(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.state != from {
		c.t.Fatalf("etcdtest: %s(%d): member is %s, want %s", what, i, m.state, from)
	}
	if err := m.cmd.Process.Signal(to.signal()); err != nil {
		c.t.Fatalf("etcdtest: %s(%d): %v", what, i, err)
	}
	m.state = to
}

// spawn starts member m's process with the cluster's flags. Callers hold c.mu
// or own c exclusively.
func (c *Cluster) spawn(m *member) error {
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin,
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.clientURL(), "--advertise-client-urls", m.clientURL(),
		"--listen-peer-urls", m.peerURL(), "--initial-advertise-peer-urls", m.peerURL(),
		"--initial-cluster", c.initialCluster,
		"--initial-cluster-token", c.token,
		"--initial-cluster-state", "new",
		// The store commits a group of writes in one txn.
		"--max-txn-ops", "10000",
		"--max-request-bytes", "10485760",
		"--quota-backend-bytes", "4294967296",
		// Fast elections, so failover tests take seconds.
		"--heartbeat-interval", "50",
		"--election-timeout", "500",
		"--log-level", "warn",
	)
	if c.certs != nil {
		cmd.Args = append(cmd.Args, "--cert-file", c.certs.serverCert, "--key-file", c.certs.serverKey,
			"--trusted-ca-file", c.certs.CA, "--client-cert-auth")
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", m.name, err)
	}
	logf.Close() // the child holds its own descriptor
	m.cmd, m.state = cmd, running
	m.exited = make(chan struct{})
	go func(exited chan struct{}) {
		m.waitErr = cmd.Wait()
		close(exited)
	}(m.exited)
	return nil
}

// shutdown kills every member still alive and waits for them to exit.
func (c *Cluster) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.Failed() {
		c.t.Logf("etcdtest: member logs:\n%s", c.logTailsLocked(30))
	}
	for _, m := range c.members {
		if m.cmd != nil && m.state != killed {
			_ = m.kill()
		}
	}
}

// logTails returns the last n lines of every member's log.
func (c *Cluster) logTails(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logTailsLocked(n)
}

func (c *Cluster) logTailsLocked(n int) string {
	var b strings.Builder
	for _, m := range c.members {
		data, err := os.ReadFile(m.logPath)
		if err != nil {
			fmt.Fprintf(&b, "--- %s: %v\n", m.logPath, err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "--- %s (last %d lines)\n%s\n", m.logPath, len(lines), strings.Join(lines, "\n"))
	}
	return b.String()
}
