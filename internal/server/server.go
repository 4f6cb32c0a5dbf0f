package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/probe"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Options configure a Server.
type Options struct {
	// Store holds the state; the server does not close it.
	Store store.Store
	// AdminToken is the secret of the bootstrap admin token (required).
	// New stores its hash and forgets the secret.
	AdminToken string
	// Interval is the scheduler's timer (default 2s); a change also
	// triggers a cycle, at most one every MinInterval (default 50ms).
	Interval    time.Duration
	MinInterval time.Duration
	// PolicyInterval is how often policies are evaluated (default 10s).
	PolicyInterval time.Duration
	// RateLimit is requests per second per token (0: default 2000;
	// negative: unlimited); Burst defaults to twice the rate.
	RateLimit float64
	Burst     int
	// SourceRateLimit is requests per second per source address that
	// carry no valid token (none, unknown, expired or revoked); a source
	// past it (SourceBurst, default twice the rate, at once) is answered
	// 429 before authentication, whatever its token (0: default 20;
	// negative: unlimited).
	SourceRateLimit float64
	SourceBurst     int
	// MetricsListen, when set, is an address Serve also listens on for
	// GET /metrics alone, without a token (for a scraper on a private
	// interface). On the main listener /metrics needs the admin token or
	// a metrics token.
	MetricsListen string
	// MaxBody bounds request bodies (default 1 MiB).
	MaxBody int64
	Logger  *slog.Logger
	// Clock is the wall clock (default time.Now); tests may pin it.
	Clock func() time.Time
	// AlertInterval is how often alert metrics are sampled and rules
	// evaluated (default 10s); AlertsSource, when set, replaces the stored
	// alert rules at start (AlertsFile names it in messages).
	AlertInterval time.Duration
	AlertsFile    string
	AlertsSource  []byte
	// Probes, when set (the server config's probes:), replace the stored
	// probes at start (ProbesFile names them in messages);
	// ProbeConcurrency bounds the server's attempts in flight (default
	// probe.DefaultConcurrency).
	Probes           []probe.Spec
	ProbesFile       string
	ProbeConcurrency int
	// NodeLostAfter is how long an agent-run node may miss heartbeats
	// before it is marked lost and its work requeued (default 30s).
	NodeLostAfter time.Duration
	// SpotNotice is the notice spot work gets before an agent stops it
	// on preemption (default 30s; negative: none).
	SpotNotice time.Duration
	// EventRetention and EventHistory bound the event log: events older
	// than EventRetention, or more than EventHistory revisions behind the
	// store's, are pruned every minute (0: no bound of that kind; see
	// prune.go).
	EventRetention time.Duration
	EventHistory   int64
	// UsageRetention keeps the usage records that ended within it: those
	// closed longer ago are deleted every minute, in transactions of at
	// most usagePruneBatch records looked at (0: keep every record; see
	// PruneUsage).
	UsageRetention time.Duration
	// Pricing are the price overrides and tenants' price plans the usage
	// records are priced with (nil: the catalog's prices, list for all).
	Pricing *meter.Pricing
	// NotifyWebhook receives policies' notify actions as JSON POSTs
	// (Notification); empty: they are only recorded as events.
	NotifyWebhook string
	// MaxGrace caps workloads' grace periods (default DefaultMaxGrace);
	// MaxGraceClass replaces it for a priority class (see grace.go).
	MaxGrace      time.Duration
	MaxGraceClass map[workload.Priority]time.Duration
	// Limits bound tenants' objects, fields and answers (zero values: the
	// defaults, config.DefaultLimits; see limits.go).
	Limits config.Limits
	// Scheduling are the scheduler options each cycle runs with: the
	// config file's options (scorer, disable_preemption,
	// overflow_before_preempt, planning), as the simulator and `arbiter
	// schedule` use them. An unknown scorer is refused (ErrUnknownScorer).
	// A zero Planning plans with sched.DefaultPlanning (NoPlanning plans
	// nothing).
	Scheduling sched.Options
	// Build names the binary in arbiter_build_info (the CLI passes its
	// version and commit; the server does not know them).
	Build BuildInfo
	// Cluster, when set, makes this server one replica of several over a
	// shared (etcd) store: it runs the leader's loops only while it leads
	// and, as a follower, sends writes to the leader (ha.go).
	Cluster Cluster

	// checkCache, when set (tests), is given each plan the core made with
	// the server's sched.Cache and the plan of the same input without it.
	checkCache func(cached, fresh sched.Plan)
}

// Server is the control plane: the HTTP API and the scheduler loop over a
// Store. Create it with New, serve Handler, run Run.
type Server struct {
	opts Options
	st   store.Store
	log  *slog.Logger
	now  func() time.Time
	cat  atomic.Pointer[fleet.Catalog]
	// schedCache is the core's memo across cycles (sched.Cache), held by
	// one cycle at a time (schedule).
	schedMu    sync.Mutex
	schedCache sched.Cache
	// spotLast are the spot prices the open spot records were last priced
	// at (repriceSpot); spotSeen: since the start.
	spotMu   sync.Mutex
	spotLast map[meter.SpotKey]float64
	spotSeen bool
	kick     chan struct{}
	ready    atomic.Bool
	// lagging: this follower's copy of the store is behind (ha.go).
	lagging atomic.Bool
	// bindIdle: the last attempt to bind approaching reservations that
	// bound nothing (see bindApproaching).
	bindIdle bindAttempt

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every commit

	why      atomic.Pointer[whyIndex]
	limiter  *limiter
	sources  *limiter // per source address, before authentication
	metrics  *metrics
	policies *policyRunner
	prom     *promClient
	spot     spotMarket
	fair     fairState // decayed usage (options.fair_share), leader only
	alerts   *alertRunner
	probes   *probeRunner
	// ui are the dashboard's sessions, hist what it charts (ui.go).
	ui         uiSessions
	hist       history
	shapeCache atomic.Pointer[shapeAt]
	openAPI    []byte
	live       liveCache
	settledMu  sync.Mutex
	settled    *settled
	tokens     tokenCache
	pageKey    []byte // signs continue tokens (paging.go)
	handler    http.Handler
	agents     agents
	gpuUse     gpuUse        // the allocated GPUs' use, as the last policy tick measured it
	limits     config.Limits // Options.Limits with defaults
}

// New creates a server over a store and makes sure the admin token is the
// one given.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Store == nil {
		return nil, errors.New("server: no store")
	}
	if len(o.AdminToken) < 16 {
		return nil, errors.New("server: the admin token must have at least 16 characters")
	}
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.MinInterval <= 0 {
		o.MinInterval = 50 * time.Millisecond
	}
	if o.PolicyInterval <= 0 {
		o.PolicyInterval = 10 * time.Second
	}
	if o.RateLimit == 0 {
		o.RateLimit = 2000
	}
	if o.Burst <= 0 {
		o.Burst = int(2 * o.RateLimit)
	}
	if o.SourceRateLimit == 0 {
		o.SourceRateLimit = 20
	}
	if o.SourceBurst <= 0 {
		o.SourceBurst = int(max(2*o.SourceRateLimit, 1))
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.AlertInterval <= 0 {
		o.AlertInterval = 10 * time.Second
	}
	if o.NodeLostAfter <= 0 {
		o.NodeLostAfter = 30 * time.Second
	}
	if o.SpotNotice == 0 {
		o.SpotNotice = 30 * time.Second
	}
	if err := o.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if err := checkScheduling(o.Scheduling); err != nil {
		return nil, err
	}
	o.Scheduling = schedulingOptions(o.Scheduling)
	s := &Server{
		opts: o, st: o.Store, log: o.Logger, now: o.Clock, limits: o.Limits.WithDefaults(),
		kick:    make(chan struct{}, 1),
		changed: make(chan struct{}),
		limiter: newLimiter(o.RateLimit, o.Burst, o.Clock),
		sources: newLimiter(o.SourceRateLimit, o.SourceBurst, o.Clock),
	}
	s.opts.AdminToken = "" // only its hash is kept, in the store
	s.why.Store(&whyIndex{})
	s.metrics = newMetrics(o.Build)
	s.metrics.register(newGPUCollector(s))
	if co, ok := o.Store.(commitObserver); ok {
		s.metrics.watchCommits(co)
	}
	var cat *fleet.Catalog
	// These writes set what every replica needs; they are made whether
	// this replica leads or not (store.Unfenced), each in one serializable
	// transaction.
	err := s.st.Update(store.Unfenced(ctx), func(tx store.WriteTx) error {
		var err error
		if cat, err = loadCatalog(tx); err != nil {
			return err
		}
		if s.pageKey, err = loadContinueKey(tx); err != nil {
			return err
		}
		return setAdminToken(tx, o.AdminToken, s.now())
	})
	if err != nil {
		return nil, err
	}
	s.cat.Store(cat)
	s.metrics.register(&s.spot, newCostCollector(s))
	s.policies = newPolicyRunner(s)
	// Probes first: policies may name the services they measure.
	s.probes = newProbeRunner(s)
	if o.Probes != nil {
		err = s.probes.apply(ctx, o.ProbesFile, o.Probes)
	} else {
		err = s.probes.load(ctx)
	}
	if err != nil {
		return nil, err
	}
	s.prom = newPromClient()
	if err := s.policies.load(ctx); err != nil {
		return nil, err
	}
	if err := s.st.View(ctx, s.spot.load(s)); err != nil {
		return nil, err
	}
	s.loadFairShare(ctx)
	s.alerts = newAlertRunner(s)
	if o.AlertsSource != nil {
		err = s.alerts.apply(ctx, o.AlertsFile, string(o.AlertsSource))
	} else {
		err = s.alerts.load(ctx)
	}
	if err != nil {
		return nil, err
	}
	if s.openAPI, err = buildOpenAPI(s.apiRoutes()); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the HTTP handler of the whole API.
func (s *Server) Handler() http.Handler { return s.handler }

// Run runs the scheduler loop and the policy timer until ctx ends.
func (s *Server) Run(ctx context.Context) {
	if s.opts.Cluster != nil {
		s.runCluster(ctx)
		return
	}
	s.runLoops(ctx)
}

// runLoops runs the leader's loops until ctx ends.
func (s *Server) runLoops(ctx context.Context) {
	s.loadFairShare(ctx)
	s.ready.Store(true)
	s.log.Info("scheduler", "scorer", scorerName(s.opts.Scheduling), "disable_preemption", s.opts.Scheduling.DisablePreemption, "overflow_before_preempt", s.opts.Scheduling.OverflowBeforePreempt, "planning_depth", s.opts.Scheduling.Planning.Depth)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.alertLoop(ctx) })
	wg.Go(func() { s.probeLoop(ctx) })
	wg.Go(func() { s.promLoop(ctx) })
	go s.watchNodes(ctx)
	wg.Go(func() { s.pruneLoop(ctx) })
	wg.Go(func() { s.lastUseLoop(ctx) })
	s.scheduleLoop(ctx)
	// The spot markets' last state, however recent the last write.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.saveSpot(sctx, s.now(), true)
	s.saveFairShare(sctx, s.now(), true)
}

// Serve listens on addr and runs everything until ctx ends; addrFile,
// when set, receives the bound address (useful with port 0).
func (s *Server) Serve(ctx context.Context, addr, addrFile string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if addrFile != "" {
		tmp := addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(ln.Addr().String()), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, addrFile); err != nil {
			return err
		}
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	s.log.Info("listening", "addr", ln.Addr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(ln) }()
	var ms *http.Server
	if s.opts.MetricsListen != "" {
		mln, err := net.Listen("tcp", s.opts.MetricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("server: metrics listener: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", s.MetricsHandler())
		ms = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
		s.log.Info("serving metrics without a token", "addr", mln.Addr().String())
		go func() { errc <- ms.Serve(mln) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		hs.Close()
		if ms != nil {
			ms.Close()
		}
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ms != nil {
		ms.Shutdown(sctx)
	}
	err = hs.Shutdown(sctx)
	<-done
	return err
}

// notify wakes watchers and the scheduler after a commit.
func (s *Server) notify(schedule bool) {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	if schedule {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func (s *Server) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// HashToken returns the stored form of a token secret.
func HashToken(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// NewSecret returns a fresh random token secret.
func NewSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return "arb_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// AdminTokenFile returns the admin secret kept in dir, creating it (mode
// 0600) on first use.
func AdminTokenFile(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		tok := strings.TrimSpace(string(b))
		if len(tok) < 16 {
			return "", fmt.Errorf("server: %s: the admin token must have at least 16 characters", path)
		}
		return tok, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("server: %w", err)
	}
	tok := NewSecret()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("server: %w", err)
	}
	return tok, nil
}

// Seed loads a config file's catalog overrides, fleet, tenants,
// reservations, partitions and workloads into the store. Objects that
// already exist are kept as they are: the store, changed through the API,
// wins.
func Seed(ctx context.Context, st store.Store, c *config.Config, now time.Time) (added int, err error) {
	err = st.Update(ctx, func(tx store.WriteTx) error {
		added = 0
		if c.File.Catalog != nil {
			data, err := json.Marshal(c.File.Catalog)
			if err != nil {
				return err
			}
			if err := store.Put(tx, &store.Setting{Name: settingCatalog, Value: data}, store.Any); err != nil {
				return err
			}
		}
		existing, err := store.List[store.Node](tx, "")
		if err != nil {
			return err
		}
		seq := int64(len(existing))
		put := func(o store.Object) error {
			if _, ok := tx.GetRaw(o.Kind(), o.Key()); ok {
				return nil
			}
			added++
			return store.Put(tx, o, store.MustNotExist)
		}
		down := map[fleet.NodeID]bool{}
		for _, id := range c.File.Down {
			down[id] = true
		}
		for _, n := range c.Fleet.Nodes {
			seq++
			if err := put(&store.Node{ID: n.ID, Seq: seq, Region: n.Region, Zone: n.Zone, Block: n.Block, SKU: n.SKU.Name, Labels: n.Labels, Down: down[n.ID]}); err != nil {
				return err
			}
		}
		for _, t := range c.File.Tenants {
			o := &store.Tenant{Name: t.Name, Parent: t.Parent, AllowedPriorities: t.AllowedPriorities}
			for _, q := range t.Quota {
				o.Quotas = append(o.Quotas, store.Quota{Flavor: q.Flavor, Region: q.Region, Guaranteed: q.Guaranteed, Limit: q.Limit, Lendable: q.Lendable, Weight: q.Weight, Priority: q.Priority})
			}
			if err := put(o); err != nil {
				return err
			}
		}
		for _, r := range c.File.Reservations {
			if err := put(&store.Reservation{Tenant: r.Owner, Name: r.Name, Region: r.Region, Zone: r.Zone, SKU: r.SKU, Count: r.Count, Start: r.Start, End: r.End, Nodes: r.Nodes}); err != nil {
				return err
			}
		}
		for _, p := range c.File.Partitions {
			if err := put(&store.Partition{Name: p.Name, Tenant: p.Tenant, Blocks: p.Blocks, Nodes: p.Nodes}); err != nil {
				return err
			}
		}
		for _, w := range c.Workloads {
			o := &store.Workload{Tenant: w.Tenant, Spec: w.Spec, State: store.StatePending, SubmittedAt: w.SubmittedAt, Running: w.Running}
			if w.Running != nil {
				o.State = store.StateRunning
			}
			if err := put(o); err != nil {
				return err
			}
		}
		if added > 0 {
			return store.AppendEvent(tx, &store.Event{Time: now, Type: store.EventConfigSeeded, Object: store.ConfigObject, Message: fmt.Sprintf("%d objects added from the config", added)})
		}
		return nil
	})
	return added, err
}
