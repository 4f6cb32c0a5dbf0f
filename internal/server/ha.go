package server

import (
	"context"
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter/internal/alert"
	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/cluster"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/policy/effects"
	"github.com/arbiterhq/arbiter/internal/store"
)

// High availability. Several replicas share one etcd store; one leads
// (internal/cluster). The leader runs everything that writes on its own
// (the scheduler loop, policies, alerts, node-lease expiry, pruning) and
// answers every request. A follower keeps a live copy of the store (the
// etcd store's mirror) and answers the reads that come from the store
// alone; it sends everything else to the leader with a 307.

// Cluster is the replica set a server runs in (cluster.Member).
type Cluster interface {
	Self() string
	Leader() string
	IsLeader() bool
	Replicas(ctx context.Context) ([]cluster.Replica, error)
	// Lead campaigns until ctx ends, calling lead for each term.
	Lead(ctx context.Context, lead func(ctx context.Context))
}

// syncer is a store that can wait until it holds every commit made
// before the call (store.EtcdStore).
type syncer interface {
	Sync(ctx context.Context) error
}

// changeFollower is a store that reports commits made by other replicas.
type changeFollower interface {
	OnChange(fn func(rev int64))
}

// leaderReads are the GET routes a follower cannot answer from the store:
// they show state only the leader computes (the last cycle's pending
// reasons, the policies' effects, spot prices, alert states).
var leaderReads = map[string]bool{
	"GET /v1/spot-prices":                           true,
	"GET /v1/workloads":                             true,
	"GET /v1/tenants/{tenant}/workloads":            true,
	"GET /v1/tenants/{tenant}/workloads/{name}":     true,
	"GET /v1/tenants/{tenant}/workloads/{name}/why": true,
	"GET /v1/alerts":                                true,
}

// toLeader answers a request this replica must not serve as a follower:
// 307 to the leader, or 503 while no leader is known. It reports whether
// it answered.
func (s *Server) toLeader(w http.ResponseWriter, r *http.Request, pattern string) bool {
	c := s.opts.Cluster
	if c == nil || c.IsLeader() {
		return false
	}
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && !leaderReads[pattern] {
		return false
	}
	leader := c.Leader()
	if leader == "" || leader == c.Self() {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeNoLeader, Message: "no replica leads the cluster yet; retry"})
		return true
	}
	w.Header().Set(api.LeaderHeader, leader)
	w.Header().Set("Location", leader+r.URL.RequestURI())
	writeJSON(w, http.StatusTemporaryRedirect, &api.Error{Code: api.CodeNotLeader, Message: "this replica does not lead; send the request to " + leader})
	return true
}

// getCluster answers GET /v1/cluster.
func (s *Server) getCluster(w http.ResponseWriter, r *http.Request) error {
	c := s.opts.Cluster
	if c == nil {
		writeJSON(w, http.StatusOK, api.ClusterInfo{Replicas: []api.ClusterReplica{{Leader: true}}})
		return nil
	}
	rs, err := c.Replicas(r.Context())
	if err != nil {
		return err
	}
	out := api.ClusterInfo{Self: c.Self(), Leader: c.Leader(), Replicas: []api.ClusterReplica{}}
	for _, x := range rs {
		out.Replicas = append(out.Replicas, api.ClusterReplica{URL: x.URL, Leader: x.Leader})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// readiness says whether this replica can serve, and if not why.
func (s *Server) readiness(ctx context.Context) (bool, string) {
	if c := s.opts.Cluster; c != nil {
		if c.IsLeader() {
			if !s.ready.Load() {
				return false, "leading, but the scheduler loop has not started"
			}
			return true, "leader"
		}
		if c.Leader() == "" {
			return false, "no replica leads the cluster"
		}
		if s.lagging.Load() {
			return false, "the store copy is behind"
		}
		return true, "follower"
	}
	if !s.ready.Load() {
		return false, "the scheduler loop has not started"
	}
	return true, "ready"
}

// runCluster is Run in a replica set: it follows the store and campaigns;
// each time it is elected it catches up with the store, reloads what the
// previous leader changed, and runs the leader's loops for the term.
func (s *Server) runCluster(ctx context.Context) {
	if cf, ok := s.st.(changeFollower); ok {
		cf.OnChange(func(int64) { s.notify(false) })
	}
	go s.watchLag(ctx)
	s.opts.Cluster.Lead(ctx, func(lctx context.Context) {
		if sy, ok := s.st.(syncer); ok {
			sctx, cancel := context.WithTimeout(lctx, 10*time.Second)
			err := sy.Sync(sctx)
			cancel()
			if err != nil {
				s.log.Warn("cluster: could not catch up with the store; stepping down", "err", err)
				return
			}
		}
		if err := s.resume(lctx); err != nil {
			s.log.Warn("cluster: could not reload the state; stepping down", "err", err)
			return
		}
		s.log.Info("cluster: leading", "self", s.opts.Cluster.Self())
		s.runLoops(lctx)
		s.ready.Store(false)
		s.metrics.stepDown()
		s.stepDownGPUs()
	})
}

// watchLag keeps lagging: whether this replica's copy of the store is
// more than a few seconds behind etcd (a follower then answers /readyz
// with 503).
func (s *Server) watchLag(ctx context.Context) {
	sy, ok := s.st.(syncer)
	if !ok {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		s.lagging.Store(sy.Sync(sctx) != nil)
		cancel()
	}
}

// resume reloads, at the start of a term, the state the last leader may
// have changed: the catalog, the policies with their rule state, the
// alert rules with theirs.
func (s *Server) resume(ctx context.Context) error {
	var cat = s.cat.Load()
	err := s.st.View(ctx, func(tx store.ReadTx) error {
		c, err := loadCatalog(tx)
		if err == nil {
			cat = c
		}
		return err
	})
	if err != nil {
		return err
	}
	s.cat.Store(cat)
	if err := s.probes.load(ctx); err != nil {
		return err
	}
	s.policies.reset()
	if err := s.policies.load(ctx); err != nil {
		return err
	}
	s.alerts.reset()
	return s.alerts.load(ctx)
}

// reset forgets every engine and its state (a new term loads them again).
func (pr *policyRunner) reset() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.engines = map[string]*policy.Engine{}
	pr.active = map[string][]policy.ActiveAction{}
	pr.windows = policy.NewWindows(policyWindow)
	pr.rt = effects.NewState()
	pr.last = nil
	pr.revs = map[string]int64{}
	pr.notified = map[string]map[string]savedNotice{}
	pr.saved = nil
	pr.gen++
}

// reset forgets the rules and their state (a new term loads them again).
func (ar *alertRunner) reset() {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	ar.eval = alert.NewEvaluator(nil)
	ar.set = nil
}
