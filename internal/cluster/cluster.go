// Package cluster elects one leader among the arbiter replicas that share
// an etcd store. Every replica joins with the URL it serves on; one at a
// time leads (runs the scheduler and everything else that writes), and
// its store writes are fenced on its election key: a replica that lost
// the leadership without noticing (paused, partitioned) has its writes
// refused by etcd itself.
//
// The election is etcd's (client/v3/concurrency): each replica holds a
// session, a lease kept alive while the process runs, and campaigns by
// creating a key under the election prefix bound to that lease. The
// oldest key leads. When the leader's process dies or stops, its lease
// expires after the TTL and its key goes with it; the next oldest leads.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Options configure Join.
type Options struct {
	// Prefix of the cluster's keys (default "/arbiter/"); the election
	// lives under PREFIX election/, the replica list under PREFIX replicas/.
	Prefix string
	// Advertise is the URL other replicas and clients reach this one at.
	Advertise string
	// TTL of the session lease: how long a dead leader keeps the
	// leadership (default 2s; etcd rounds to whole seconds, at least 1).
	TTL    time.Duration
	Logger *slog.Logger
}

// Replica is one member of the cluster as the replica list shows it.
type Replica struct {
	URL    string `json:"url"`
	Leader bool   `json:"leader"`
}

// Member is this replica's place in the cluster.
type Member struct {
	cli  *clientv3.Client
	o    Options
	log  *slog.Logger
	done chan struct{}

	mu       sync.Mutex
	session  *concurrency.Session
	election *concurrency.Election
	leading  bool   // elected and the session alive
	leader   string // the leader's URL as last observed ("" none)
}

// Join registers this replica (under its own session) and starts
// following the leadership. It does not campaign: Lead does.
func Join(ctx context.Context, cli *clientv3.Client, o Options) (*Member, error) {
	if o.Advertise == "" {
		return nil, errors.New("cluster: no advertise URL")
	}
	if !strings.HasPrefix(o.Advertise, "http://") && !strings.HasPrefix(o.Advertise, "https://") {
		return nil, fmt.Errorf("cluster: advertise URL %q: want http:// or https://", o.Advertise)
	}
	o.Advertise = strings.TrimRight(o.Advertise, "/")
	if o.Prefix == "" {
		o.Prefix = "/arbiter/"
	}
	if !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	if o.TTL <= 0 {
		o.TTL = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	m := &Member{cli: cli, o: o, log: o.Logger, done: make(chan struct{})}
	if err := m.newSession(ctx); err != nil {
		return nil, err
	}
	go m.observe()
	return m, nil
}

func (m *Member) ttlSeconds() int { return max(1, int((m.o.TTL+time.Second-1)/time.Second)) }

// newSession replaces the session (the old one is dead or never was)
// and registers the replica under it.
func (m *Member) newSession(ctx context.Context) error {
	s, err := concurrency.NewSession(m.cli, concurrency.WithTTL(m.ttlSeconds()), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return fmt.Errorf("cluster: session: %w", err)
	}
	if _, err := m.cli.Put(ctx, m.replicaKey(), m.o.Advertise, clientv3.WithLease(s.Lease())); err != nil {
		s.Close()
		return fmt.Errorf("cluster: registering %s: %w", m.o.Advertise, err)
	}
	m.mu.Lock()
	m.session = s
	m.election = concurrency.NewElection(s, m.o.Prefix+"election/")
	m.mu.Unlock()
	return nil
}

func (m *Member) replicaKey() string { return m.o.Prefix + "replicas/" + m.o.Advertise }

// observe keeps the leader's URL as the election reports it.
func (m *Member) observe() {
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-m.done:
			return
		default:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-m.done
			cancel()
		}()
		m.mu.Lock()
		e := m.election
		m.mu.Unlock()
		for resp := range e.Observe(ctx) {
			url := ""
			if len(resp.Kvs) > 0 {
				url = string(resp.Kvs[0].Value)
			}
			m.mu.Lock()
			m.leader = url
			m.mu.Unlock()
			backoff = 50 * time.Millisecond
		}
		cancel()
		select {
		case <-m.done:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// Self is this replica's URL.
func (m *Member) Self() string { return m.o.Advertise }

// Leader is the leader's URL as last observed ("" when none is known).
func (m *Member) Leader() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leading {
		return m.o.Advertise
	}
	return m.leader
}

// IsLeader says whether this replica believes it leads. Its writes are
// fenced anyway: a replica that believes so wrongly cannot write.
func (m *Member) IsLeader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leading
}

// Fence is the store's fence (store.EtcdOptions.Fence): the election key
// and its creation revision while this replica leads.
func (m *Member) Fence() (key string, rev int64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading {
		return "", 0, false
	}
	return m.election.Key(), m.election.Rev(), true
}

// Replicas lists the registered replicas, naming the leader.
func (m *Member) Replicas(ctx context.Context) ([]Replica, error) {
	resp, err := m.cli.Get(ctx, m.o.Prefix+"replicas/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	leader := m.Leader()
	var out []Replica
	for _, kv := range resp.Kvs {
		u := string(kv.Value)
		out = append(out, Replica{URL: u, Leader: u == leader})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out, nil
}

// Lead campaigns until ctx ends. Each time this replica is elected it
// calls lead with a context that ends when the leadership is lost (the
// session's lease expired or was revoked, or ctx ended); when lead
// returns it resigns and campaigns again.
func (m *Member) Lead(ctx context.Context, lead func(ctx context.Context)) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		m.mu.Lock()
		s, e := m.session, m.election
		m.mu.Unlock()
		select {
		case <-s.Done():
			if err := m.newSession(ctx); err != nil {
				m.log.Warn("cluster: new session", "err", err)
				sleep(ctx, backoff)
				backoff = min(2*backoff, 2*time.Second)
			}
			continue
		default:
		}
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-s.Done():
			case <-cctx.Done():
			}
			cancel()
		}()
		if err := e.Campaign(cctx, m.o.Advertise); err != nil {
			cancel()
			if ctx.Err() == nil {
				sleep(ctx, backoff)
			}
			continue
		}
		backoff = 100 * time.Millisecond
		m.mu.Lock()
		m.leading = true
		m.mu.Unlock()
		m.log.Info("cluster: leading", "self", m.o.Advertise, "key", e.Key(), "rev", e.Rev())
		lead(cctx)
		m.mu.Lock()
		m.leading = false
		m.mu.Unlock()
		cancel()
		m.log.Info("cluster: no longer leading", "self", m.o.Advertise)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		e.Resign(rctx)
		rcancel()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Close leaves the cluster: the session is revoked, so the leadership
// (if held) passes at once rather than after the TTL.
func (m *Member) Close() error {
	close(m.done)
	m.mu.Lock()
	s := m.session
	m.leading = false
	m.mu.Unlock()
	return s.Close()
}
