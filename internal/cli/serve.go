package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/arbiterhq/arbiter/internal/alert"
	"github.com/arbiterhq/arbiter/internal/cluster"
	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/probe"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/server"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

type serveFlags struct {
	data, listen, configFile, adminTokenFile, addrFile, logLevel string
	policies                                                     []string
	interval, policyInterval, nodeLostAfter                      time.Duration
	rateLimit, rateLimitPerSource                                float64
	metricsListen                                                string
	batchDelay                                                   time.Duration
	batchMin                                                     int
	alertsFile, notifyWebhook                                    string
	alertInterval                                                time.Duration
	probeConcurrency                                             int
	spotNotice                                                   time.Duration
	eventRetention                                               time.Duration
	eventHistory                                                 int64
	maxGrace                                                     time.Duration
	maxGraceClass                                                []string
	etcdEndpoints, advertise, etcdPrefix                         string
	electionTTL                                                  time.Duration
	etcdTLS                                                      etcdTLSFlags
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve [--data DIR] [--listen ADDR] [--config FILE]",
		Short: "Run the control plane: REST API, scheduler loop and durable store",
		Long: `Runs the control plane. State lives in DIR/arbiter.db (bbolt, fsynced on
every commit); with no state and no config it serves an empty fleet.
--config seeds the fleet, tenants, reservations and workloads from the same
YAML that "arbiter validate" checks, and --policy applies policy files;
objects that already exist in the store are kept as they are; its probes:
(endpoints to probe for latency, see docs/signals.md) replace the stored
probes at start.

The admin token is read from ARBITER_ADMIN_TOKEN, else from
--admin-token-file (default DIR/admin.token, created with a fresh random
token on first start, mode 0600); its token has the ID "admin" and a new
secret in the file replaces only it: every other token survives restarts.
Tenants, node agents and metrics scrapers get their own tokens with
"arbiter token create" (list, revoke and rotate them there). The API is
described at /v1/openapi.json; health is at /healthz and /readyz. Metrics
are at /metrics for the admin token or a metrics token; --metrics-listen
also serves them, alone and without a token, on an address of their own
(a private interface for the scraper).

High availability: with --etcd-endpoints the state lives in etcd instead
of DIR/arbiter.db, and several "arbiter serve" processes, each with its own
--advertise URL, share it. One leads (runs the scheduler, policies, alerts
and node leases; its writes are fenced on its leadership); the others answer
reads from their copy of the store and send other requests to the leader
with a 307 (GET /v1/cluster lists them; /readyz says whether this one can
serve). Every replica needs the same admin token. See docs/operations.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runServe(ctx, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", envOr("ARBITER_DATA", "arbiter-data"), "state directory (env ARBITER_DATA)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:7070", "address to listen on")
	fl.StringVarP(&f.configFile, "config", "c", "", "config file to seed fleet, tenants, reservations and workloads from")
	fl.StringArrayVar(&f.policies, "policy", nil, "policy file to apply at start (repeatable)")
	fl.StringVar(&f.adminTokenFile, "admin-token-file", "", "file holding the admin token (default DIR/admin.token)")
	fl.StringVar(&f.addrFile, "addr-file", "", "write the bound address here once listening (for --listen with port 0)")
	fl.DurationVar(&f.interval, "interval", 2*time.Second, "scheduling timer; changes also trigger a cycle")
	fl.DurationVar(&f.policyInterval, "policy-interval", 10*time.Second, "how often policies are evaluated")
	fl.DurationVar(&f.nodeLostAfter, "node-lost-after", 30*time.Second, "an agent-run node that misses heartbeats this long is marked lost and its work requeued")
	fl.DurationVar(&f.eventRetention, "event-retention", 24*time.Hour, "events older than this are pruned (0: keep regardless of age)")
	fl.Int64Var(&f.eventHistory, "event-history", 2_000_000, "events more than this many store revisions old are pruned, about half as many submissions (0: no bound)")
	fl.DurationVar(&f.spotNotice, "spot-notice", 30*time.Second, "notice spot work gets (ARBITER_NOTICE_FILE, ARBITER_EVENTS_URL) before its agent stops it on preemption; negative: none")
	fl.StringVar(&f.alertsFile, "alerts", "", "alert rules file (YAML) replacing the stored rules at start")
	fl.StringVar(&f.notifyWebhook, "notify-webhook", "", "URL that receives policies' notify actions as JSON POSTs (they are recorded as events in any case)")
	fl.DurationVar(&f.alertInterval, "alert-interval", 10*time.Second, "how often alert metrics are sampled and rules evaluated")
	fl.IntVar(&f.probeConcurrency, "probe-concurrency", probe.DefaultConcurrency, "most probe attempts the server has in flight (the config's probes:; a probe that finds no free slot waits its turn)")
	fl.Float64Var(&f.rateLimit, "rate-limit", 2000, "requests per second per token (negative: unlimited)")
	fl.Float64Var(&f.rateLimitPerSource, "rate-limit-per-source", 20, "requests per second per source address without a valid token; past it (twice as many at once) the address gets 429 before authentication (negative: unlimited)")
	fl.StringVar(&f.metricsListen, "metrics-listen", "", "also serve /metrics, alone and without a token, on this address (e.g. 10.0.0.5:9090)")
	fl.DurationVar(&f.batchDelay, "batch-delay", time.Millisecond, "how long a group of fewer than --batch-min writes waits for more to share its commit (writes that arrive during a commit always share the next)")
	fl.IntVar(&f.batchMin, "batch-min", 16, "group size at which a commit stops waiting for more writes")
	fl.DurationVar(&f.maxGrace, "max-grace", server.DefaultMaxGrace, "longest grace_period a workload may ask for (SIGTERM to SIGKILL when it is stopped); longer submissions are refused")
	fl.StringArrayVar(&f.maxGraceClass, "max-grace-class", nil, "CLASS=DURATION: the --max-grace of one priority class instead, e.g. spot=30s (repeatable)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.etcdEndpoints, "etcd-endpoints", envOr("ARBITER_ETCD_ENDPOINTS", ""), "URL[,URL...] of an etcd cluster to keep the state in, shared with other replicas, instead of DIR/arbiter.db (env ARBITER_ETCD_ENDPOINTS)")
	fl.StringVar(&f.advertise, "advertise", "", "with --etcd-endpoints: the URL clients and other replicas reach this replica at (default http://LISTEN)")
	f.etcdTLS.bind(fl)
	fl.StringVar(&f.etcdPrefix, "etcd-prefix", "/arbiter/", "with --etcd-endpoints: prefix of every key (one prefix per arbiter cluster)")
	fl.DurationVar(&f.electionTTL, "election-ttl", 2*time.Second, "with --etcd-endpoints: how long a leader that stopped answering keeps the leadership (etcd lease TTL, whole seconds)")
	return cmd
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func runServe(ctx context.Context, f serveFlags) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("serve: --log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if f.notifyWebhook != "" {
		if u, err := url.Parse(f.notifyWebhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("serve: --notify-webhook: want an http:// or https:// URL")
		}
	}
	if f.maxGrace <= 0 {
		return fmt.Errorf("serve: --max-grace must be positive, got %v", f.maxGrace)
	}
	graceClass := map[workload.Priority]time.Duration{}
	for _, v := range f.maxGraceClass {
		p, d, err := server.ParseMaxGraceClass(v)
		if err != nil {
			return fmt.Errorf("serve: --max-grace-class: %w", err)
		}
		graceClass[p] = d
	}
	var cfg *config.Config
	if f.configFile != "" {
		var err error
		if cfg, err = config.Load(f.configFile); err != nil {
			return err
		}
	}
	type polFile struct {
		name, file string
		data       []byte
	}
	var pols []polFile
	for _, p := range f.policies {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if _, err := policy.Load(p, data); err != nil {
			return err
		}
		pols = append(pols, polFile{name: policyName(p), file: filepath.Base(p), data: data})
	}
	var alertsSrc []byte
	if f.alertsFile != "" {
		data, err := os.ReadFile(f.alertsFile)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if _, err := alert.Load(f.alertsFile, data); err != nil {
			return err
		}
		alertsSrc = data
	}
	if err := os.MkdirAll(f.data, 0o700); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	admin := os.Getenv("ARBITER_ADMIN_TOKEN")
	if admin == "" {
		path := f.adminTokenFile
		if path == "" {
			path = filepath.Join(f.data, "admin.token")
		}
		var err error
		if admin, err = server.AdminTokenFile(path); err != nil {
			return err
		}
		log.Info("admin token", "file", path)
	}
	st, member, err := openServeStore(ctx, f, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if member != nil {
		defer member.Close()
	}
	if err := store.CheckRestored(ctx, st); err != nil {
		return fmt.Errorf("serve: %w; finish it with arbiter admin snapshot restore --force", err)
	}
	if cfg != nil {
		n, err := server.Seed(store.Unfenced(ctx), st, cfg, time.Now())
		if err != nil {
			return err
		}
		log.Info("config seeded", "file", f.configFile, "added", n)
	}
	var limits config.Limits
	var probes []probe.Spec
	if cfg != nil {
		limits = cfg.File.Limits
		if len(cfg.File.Probes) > 0 {
			probes = cfg.File.Probes
		}
	}
	scheduling := schedulingOf(cfg)
	var metering config.Metering
	if cfg != nil {
		metering = cfg.Metering
	}
	s, err := server.New(ctx, server.Options{Limits: limits, Store: st, AdminToken: admin, Interval: f.interval, PolicyInterval: f.policyInterval, NodeLostAfter: f.nodeLostAfter, SpotNotice: f.spotNotice, EventRetention: f.eventRetention, EventHistory: f.eventHistory, UsageRetention: metering.Retention, Pricing: metering.Pricing, RateLimit: f.rateLimit, SourceRateLimit: f.rateLimitPerSource, MetricsListen: f.metricsListen, Logger: log,
		AlertInterval: f.alertInterval, AlertsFile: filepath.Base(f.alertsFile), AlertsSource: alertsSrc, NotifyWebhook: f.notifyWebhook,
		Probes: probes, ProbesFile: filepath.Base(f.configFile), ProbeConcurrency: f.probeConcurrency,
		MaxGrace: f.maxGrace, MaxGraceClass: graceClass, Scheduling: scheduling, Cluster: clusterOf(member),
		Build: server.BuildInfo{Version: Version, Commit: binaryCommit()}})
	if err != nil {
		return err
	}
	for _, p := range pols {
		if err := s.ApplyPolicy(store.Unfenced(ctx), p.name, p.file, string(p.data)); err != nil {
			return fmt.Errorf("serve: --policy %s: %w", p.file, err)
		}
	}
	return s.Serve(ctx, f.listen, f.addrFile)
}

// policyName names a policy after its file: "rules.yaml" → "rules".
func policyName(path string) string {
	base := filepath.Base(path)
	return base[:len(base)-len(filepath.Ext(base))]
}

// openServeStore opens the store serve runs on: DIR/arbiter.db, or with
// --etcd-endpoints the etcd store, fenced on this replica's leadership.
func openServeStore(ctx context.Context, f serveFlags, log *slog.Logger) (store.Store, *cluster.Member, error) {
	if f.etcdEndpoints == "" {
		st, err := store.OpenBolt(filepath.Join(f.data, "arbiter.db"), &store.BoltOptions{MaxBatchDelay: f.batchDelay, MinBatchSize: f.batchMin})
		return st, nil, err
	}
	eps, err := parseEndpoints(f.etcdEndpoints)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: --etcd-endpoints: %w", err)
	}
	prefix, err := checkPrefix(f.etcdPrefix)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: %w", err)
	}
	f.etcdPrefix = prefix
	advertise := f.advertise
	if advertise == "" {
		if _, port, _ := net.SplitHostPort(f.listen); port == "0" {
			return nil, nil, errors.New("serve: --etcd-endpoints with --listen on port 0 needs --advertise (the URL other replicas and clients reach this one at)")
		}
		advertise = "http://" + f.listen
	}
	tc, err := f.etcdTLS.config(eps)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: %w", err)
	}
	cli, err := newEtcdClient(ctx, eps, tc)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: --etcd-endpoints: %w", err)
	}
	member, err := cluster.Join(ctx, cli, cluster.Options{Prefix: f.etcdPrefix, Advertise: advertise, TTL: f.electionTTL, Logger: log})
	if err != nil {
		cli.Close()
		return nil, nil, fmt.Errorf("serve: %w", err)
	}
	st, err := store.OpenEtcd(ctx, store.EtcdOptions{Client: cli, Prefix: f.etcdPrefix, Fence: member.Fence})
	if err != nil {
		member.Close()
		cli.Close()
		return nil, nil, err
	}
	log.Info("store", "etcd", eps, "prefix", f.etcdPrefix, "advertise", advertise)
	return &closingStore{EtcdStore: st, cli: cli}, member, nil
}

// closingStore closes the etcd client the store and the member share.
type closingStore struct {
	*store.EtcdStore
	cli *clientv3.Client
}

func (c *closingStore) Close() error {
	err := c.EtcdStore.Close()
	c.cli.Close()
	return err
}

// clusterOf is member as the server's Cluster (nil without one).
func clusterOf(m *cluster.Member) server.Cluster {
	if m == nil {
		return nil
	}
	return m
}

// schedulingOf is the scheduler options serve runs the server with: the
// config's options (scorer, preemption, overflow, honour window and
// options.planning, resolved as the simulator and `arbiter schedule` use
// them), or none without a config (the server then plans with
// sched.DefaultPlanning).
func schedulingOf(cfg *config.Config) sched.Options {
	if cfg == nil {
		return sched.Options{}
	}
	return cfg.Input().Options
}
