package agent

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/probe"
)

// Options configure an agent.
type Options struct {
	// Server is the server's URL, or several replicas' URLs separated by
	// commas (the client follows the leader among them).
	Server, Token string
	NodeID        string
	Region, Zone  string
	Block, SKU    string
	// Host is how other replicas reach this node (default NodeID).
	Host      string
	Inventory Inventory
	// DataDir holds logs, process records and (by default) checkpoints.
	DataDir        string
	CheckpointRoot string
	// Listen is where logs are served (default 127.0.0.1:0); LogURL is the
	// URL the server uses to reach it (default http://<listen address>).
	Listen, LogURL string
	// Interval is the heartbeat period (default 5s); the server's answer
	// is held up to it while nothing changes, so new work arrives at once.
	Interval time.Duration
	// MaxBackoff bounds the reconnection backoff (default 1s, so that a
	// node is usable again soon after the server is reachable).
	MaxBackoff time.Duration
	// StaleGrace is the grace given to processes a previous agent left
	// running (default 10s).
	StaleGrace time.Duration
	// EventsListen is where replicas read their scheduled events
	// (ARBITER_EVENTS_URL; default 127.0.0.1:0).
	EventsListen string
	Logger       *slog.Logger
	// FenceCommand runs the fence watchdog (`arbiter agent fence`; the
	// agent appends --data, --owner and --agent-pid). Empty: the fence runs
	// in the agent's process, which a SIGSTOP of the agent stops too.
	FenceCommand []string
	// RunAs is the user (name or uid) replicas run as (default the
	// agent's). Replicas may run as root only with AllowRoot.
	RunAs     string
	AllowRoot bool
	// LogFollowFor bounds one follow answer of the log server (default
	// api.LogFollowFor); the caller then asks again from where it got to.
	LogFollowFor time.Duration
}

// replyTimeout is how long a heartbeat's answer may take beyond the time
// the server may hold it: a partition that swallows packets ends the
// attempt after it, and the next one follows within MaxBackoff.
const replyTimeout = time.Second

// Agent runs one node.
type Agent struct {
	opts Options
	c    *client.Client
	log  *slog.Logger

	mu    sync.Mutex
	procs map[api.ReplicaRef]*proc
	// ended are runs that exited or were stopped: an answer computed
	// before the server saw the report must not start them again.
	ended   map[api.ReplicaRef]bool
	reports []api.ReplicaReport
	wake    chan struct{}
	logURL  string
	logKey  string // the secret the server presents to read logs
	evURL   string
	// notices are the eviction notices given, by replicaKey.
	notices  map[string]ScheduledEvent
	noticing sync.WaitGroup
	// holding is set when a task waits for a stopping replica's GPUs.
	holding bool
	cut     chan struct{} // closed by Shutdown: notices end at once
	cutOnce sync.Once

	id    string // this agent instance, the owner of DATA/lease.json
	runAs runAs
	// running is set while Run runs (the in-process fence's AgentAlive).
	running atomic.Bool
	// deadline is when the lease ends (monoNow ns, see lease.go); lease is
	// the last lease the server granted (0: none yet).
	deadline atomic.Int64
	lease    atomic.Int64
	fenceLog atomic.Bool // the lease's end was logged

	// probes runs the probes the server gives this node; probed holds
	// their results until the next heartbeat carries them.
	probes *probe.Runner
	probed []api.ProbeResult
}

// maxProbed bounds the probe results an agent keeps for the server (the
// oldest go first).
const maxProbed = 4096

// New checks the options and creates an agent.
func New(o Options) (*Agent, error) {
	if o.Server == "" || o.Token == "" {
		return nil, errors.New("agent: --server and a token (--token-file, ARBITER_TOKEN_FILE or ARBITER_TOKEN) are required")
	}
	if o.NodeID == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, err
		}
		o.NodeID = strings.ToLower(strings.Split(h, ".")[0])
	}
	if o.Inventory == nil {
		return nil, errors.New("agent: no GPU inventory")
	}
	if o.Region == "" {
		o.Region = "local"
	}
	if o.Block == "" {
		o.Block = "b0"
	}
	if o.Host == "" {
		o.Host = o.NodeID
	}
	if o.DataDir == "" {
		o.DataDir = "arbiter-agent-" + o.NodeID
	}
	if o.CheckpointRoot == "" {
		o.CheckpointRoot = o.DataDir + "/checkpoints"
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Second
	}
	if o.StaleGrace <= 0 {
		o.StaleGrace = 10 * time.Second
	}
	if o.LogFollowFor <= 0 {
		o.LogFollowFor = api.LogFollowFor
	}
	if o.EventsListen == "" {
		o.EventsListen = "127.0.0.1:0"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	ra, err := resolveRunAs(o.RunAs, o.AllowRoot)
	if err != nil {
		return nil, err
	}
	// Replicas get absolute paths (ARBITER_CHECKPOINT_DIR and the rest).
	if o.DataDir, err = filepath.Abs(o.DataDir); err != nil {
		return nil, err
	}
	if o.CheckpointRoot, err = filepath.Abs(o.CheckpointRoot); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := crand.Read(key); err != nil {
		return nil, err
	}
	id := make([]byte, 8)
	if _, err := crand.Read(id); err != nil {
		return nil, err
	}
	return &Agent{opts: o, c: client.New(o.Server, o.Token), log: o.Logger.With("node", o.NodeID), logKey: hex.EncodeToString(key),
		procs: map[api.ReplicaRef]*proc{}, ended: map[api.ReplicaRef]bool{}, wake: make(chan struct{}, 1),
		notices: map[string]ScheduledEvent{}, cut: make(chan struct{}), id: hex.EncodeToString(id), runAs: ra}, nil
}

func (a *Agent) logf(format string, args ...any) { a.log.Info(fmt.Sprintf(format, args...)) }

// Run registers the node and serves it until ctx ends. Processes it runs
// are left running when it returns (as when the agent is killed); a new
// agent on the same data dir stops them before taking work. Use Shutdown
// to stop them too.
func (a *Agent) Run(ctx context.Context) error {
	a.running.Store(true)
	defer a.running.Store(false)
	// Stale processes first: nothing runs that the server did not assign.
	for _, r := range a.cleanupStale(a.opts.StaleGrace) {
		a.report(r)
	}
	// No lease until the server grants one; then the fence watches it.
	if err := writeLease(a.opts.DataDir, leaseFile{Owner: a.id, PID: os.Getpid()}); err != nil {
		return fmt.Errorf("agent: writing the lease file: %w", err)
	}
	a.startFence()
	ln, err := net.Listen("tcp", a.opts.Listen)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.logURL = a.opts.LogURL
	if a.logURL == "" {
		a.logURL = "http://" + ln.Addr().String()
	}
	hs := &http.Server{Handler: a.logHandler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	closeEvents, err := a.serveEvents()
	if err != nil {
		return err
	}
	defer closeEvents()
	a.probes = probe.NewRunner(probe.Options{Concurrency: 64, Record: a.probeDone})
	pctx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	go a.probes.Run(pctx, 100*time.Millisecond)

	backoff := firstBackoff(a.opts.MaxBackoff)
	registered := false
	for ctx.Err() == nil {
		if !registered {
			if err := a.register(ctx); err != nil {
				a.log.Warn("registering the node failed; retrying", "err", err, "in", backoff.String())
				if !sleep(ctx, jitter(backoff)) {
					break
				}
				backoff = nextBackoff(backoff, a.opts.MaxBackoff)
				continue
			}
			registered = true
		}
		if err := a.beat(ctx); err != nil {
			if ctx.Err() != nil {
				break
			}
			var ae *api.Error
			if errors.As(err, &ae) && ae.Code == api.CodeNotFound {
				registered = false // the server forgot the node
			}
			a.log.Warn("heartbeat failed; reconnecting", "err", err, "in", backoff.String())
			if !sleep(ctx, jitter(backoff)) {
				break
			}
			backoff = nextBackoff(backoff, a.opts.MaxBackoff)
			continue
		}
		backoff = firstBackoff(a.opts.MaxBackoff)
		a.mu.Lock()
		holding := a.holding
		a.mu.Unlock()
		if holding {
			// New work waits for evicted work to leave its GPUs; the stop
			// report wakes us, and a second is the most we wait without one
			// (less with a short lease: the next heartbeat renews it).
			t := time.NewTimer(leaseWait(time.Second, time.Duration(a.lease.Load())))
			select {
			case <-a.wake:
				// Pass the wake-up on: the next beat must carry the report.
				select {
				case a.wake <- struct{}{}:
				default:
				}
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
	return nil
}

// Shutdown stops every process the agent runs, each with its grace.
func (a *Agent) Shutdown() {
	a.cutOnce.Do(func() { close(a.cut) })
	defer a.noticing.Wait()
	a.mu.Lock()
	ps := make([]*proc, 0, len(a.procs))
	for _, p := range a.procs {
		ps = append(ps, p)
	}
	a.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		a.mu.Lock()
		select {
		case <-p.stopping:
			a.mu.Unlock()
			continue // already being stopped
		default:
			close(p.stopping)
		}
		a.mu.Unlock()
		wg.Go(func() { a.stop(p) })
	}
	wg.Wait()
}

// The reconnection backoff: 100ms, doubling up to max; each wait is
// jittered to between half and all of it, so that agents cut off together
// do not return in step, and never exceeds max.
func firstBackoff(max time.Duration) time.Duration { return min(100*time.Millisecond, max) }

func nextBackoff(d, max time.Duration) time.Duration { return min(2*d, max) }

func jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Int64N(int64(d)/2+1))
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// register creates the node, or finds it registered already.
func (a *Agent) register(ctx context.Context) error {
	gpus, err := a.opts.Inventory.GPUs()
	if err != nil {
		return err
	}
	sku := a.opts.SKU
	if sku == "" {
		if sku, err = a.pickSKU(ctx, gpus); err != nil {
			return err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 5*replyTimeout)
	defer cancel()
	labels := map[string]string{api.LabelAgent: "true", api.LabelHost: a.opts.Host}
	if allMIG(gpus) {
		// The scheduler puts only MIG instances on a node in MIG mode.
		labels[fleet.MIGLabel] = fleet.MIGEnabled
	}
	_, err = a.c.RegisterNode(rctx, api.NodeRegistration{ID: a.opts.NodeID, Region: a.opts.Region, Zone: a.opts.Zone, Block: a.opts.Block, SKU: sku,
		Labels: labels})
	var ae *api.Error
	if errors.As(err, &ae) && ae.Code == api.CodeConflict {
		err = nil // registered before
	}
	if err == nil {
		a.log.Info("node registered", "sku", sku, "gpus", len(gpus), "region", a.opts.Region)
	}
	return err
}

// allMIG reports whether the node has GPUs and all are in MIG mode: the
// scheduler's unit of MIG mode is the node (a node with some GPUs in MIG
// mode is registered without it, and its GPUs in MIG mode must be
// switched back or the others switched too).
func allMIG(gpus []api.GPUInfo) bool {
	for _, g := range gpus {
		if !g.MIG {
			return false
		}
	}
	return len(gpus) > 0
}

// pickSKU finds the catalog's machine size with these GPUs.
func (a *Agent) pickSKU(ctx context.Context, gpus []api.GPUInfo) (string, error) {
	if len(gpus) == 0 {
		return "", errors.New("agent: no GPUs found; give --sku")
	}
	sctx, cancel := context.WithTimeout(ctx, 5*replyTimeout)
	defer cancel()
	skus, err := a.c.SKUs(sctx)
	if err != nil {
		return "", err
	}
	var models []string
	for _, k := range skus {
		models = append(models, k.Model)
	}
	model := gpus[0].Model
	if m := catalogModel(model, gpus[0].MemoryMiB, models); m != "" {
		model = m
	}
	for _, k := range skus {
		if k.Model == model && k.GPUs == len(gpus) {
			return k.Name, nil
		}
	}
	return "", fmt.Errorf("agent: the catalog has no machine with %d %s GPUs; give --sku", len(gpus), model)
}

func (a *Agent) report(r api.ReplicaReport) {
	a.mu.Lock()
	a.reports = append(a.reports, r)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// beat sends one heartbeat and acts on the answer.
func (a *Agent) beat(ctx context.Context) error {
	gpus, err := a.opts.Inventory.GPUs()
	if err != nil {
		a.log.Warn("reading GPUs", "err", err)
	}
	a.mu.Lock()
	reports := a.reports
	a.reports = nil
	probed := a.probed
	a.probed = nil
	running := make([]api.ReplicaRef, 0, len(a.procs))
	for ref, p := range a.procs {
		select {
		case <-p.stopping:
			continue // being stopped: no longer ours to run
		default:
		}
		running = append(running, ref)
	}
	a.mu.Unlock()
	hb := api.Heartbeat{GPUs: gpus, Running: running, Reports: reports, LogURL: a.logURL, LogKey: a.logKey, ProbeResults: probed}
	// The first heartbeat learns the lease at once; later ones may be held
	// for a part of it only, so that renewals come in time.
	if lease := time.Duration(a.lease.Load()); len(reports) == 0 && lease > 0 {
		hb.Wait = api.Duration(leaseWait(a.opts.Interval, lease))
	}
	// A report arriving while the server holds the answer cuts it short;
	// an answer that does not come ends the attempt.
	bctx, cancel := context.WithTimeout(ctx, time.Duration(hb.Wait)+replyTimeout)
	defer cancel()
	sent := monoNow()
	if len(reports) == 0 {
		go func() {
			select {
			case <-a.wake:
				cancel()
			case <-bctx.Done():
			}
		}()
	}
	var reply api.HeartbeatReply
	err = a.c.Do(bctx, "POST", "/v1/nodes/"+a.opts.NodeID+"/heartbeat", hb, &reply)
	if err != nil {
		if ctx.Err() == nil && errors.Is(bctx.Err(), context.Canceled) {
			// Woken for a report: the server may not have seen these.
			a.mu.Lock()
			a.reports = append(reports, a.reports...)
			a.mu.Unlock()
			return nil
		}
		a.mu.Lock()
		a.reports = append(reports, a.reports...)
		a.keepProbed(probed)
		a.mu.Unlock()
		return err
	}
	a.renew(sent, time.Duration(reply.Lease))
	a.setProbes(reply.Probes)
	a.reconcile(reply, gpus)
	return nil
}

// probeDone keeps a probe's result for the next heartbeat.
func (a *Agent) probeDone(r probe.Result) {
	x := api.ProbeResult{Probe: r.Probe, At: r.At, Latency: api.Duration(r.Latency), OK: r.OK, Status: r.Status, Error: r.Err}
	a.mu.Lock()
	a.probed = append(a.probed, x)
	if over := len(a.probed) - maxProbed; over > 0 {
		a.probed = a.probed[over:]
	}
	a.mu.Unlock()
}

// keepProbed puts back results the server did not take, before the newer
// ones, keeping the newest maxProbed (a.mu held).
func (a *Agent) keepProbed(rs []api.ProbeResult) {
	a.probed = append(rs, a.probed...)
	if over := len(a.probed) - maxProbed; over > 0 {
		a.probed = a.probed[over:]
	}
}

// setProbes runs the probes the server's answer lists (the whole set):
// those that fail the agent's own checks are left out and logged.
func (a *Agent) setProbes(tasks []api.ProbeTask) {
	if a.probes == nil {
		return
	}
	specs := make([]probe.Spec, len(tasks))
	for i, t := range tasks {
		specs[i] = probe.Spec{Name: t.Name, URL: t.URL, Method: t.Method, Body: t.Body, HeadersFile: t.HeadersFile,
			Interval: time.Duration(t.Interval), Timeout: time.Duration(t.Timeout), ExpectStatus: t.ExpectStatus}
	}
	ps, errs := probe.Check("server", "probes", specs)
	if len(errs) > 0 {
		a.log.Warn("probes from the server left out", "err", errs.Err())
	}
	a.probes.Set(ps)
}

// renew extends the lease after an answered heartbeat sent at sent.
func (a *Agent) renew(sent, lease time.Duration) {
	d := leaseDeadline(sent, lease)
	if d <= a.deadline.Load() {
		return // an older heartbeat's answer
	}
	a.lease.Store(int64(lease))
	a.deadline.Store(d)
	if err := writeLease(a.opts.DataDir, leaseFile{Owner: a.id, PID: os.Getpid(), Deadline: d, Lease: lease}); err != nil {
		// The fence keeps the older deadline: it stops the replicas early.
		a.log.Error("renewing the lease file failed", "err", err)
	}
	if a.fenceLog.Swap(false) {
		a.log.Info("lease renewed", "lease", lease.String())
	}
}

// leaseValid reports whether the node's lease has not ended: replicas may
// start and run.
func (a *Agent) leaseValid() bool { return int64(monoNow()) < a.deadline.Load() }

// reconcile starts assigned replicas that do not run and stops running
// ones that are no longer assigned.
func (a *Agent) reconcile(reply api.HeartbeatReply, gpus []api.GPUInfo) {
	want := map[api.ReplicaRef]api.Task{}
	for _, t := range reply.Tasks {
		t.StartedAt = t.StartedAt.UTC()
		want[t.ReplicaRef] = t
	}
	notices := map[api.ReplicaRef]api.Notice{}
	for _, n := range reply.Notices {
		n.StartedAt = n.StartedAt.UTC()
		notices[n.ReplicaRef] = n
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for ref, p := range a.procs {
		if t, ok := want[ref]; ok && (t.GangSize != p.task.GangSize || !slices.Equal(t.Hosts, p.task.Hosts)) {
			// An elastic workload was resized: tell the replica its new
			// size (ARBITER_REPLICAS_FILE).
			p.task.GangSize, p.task.Hosts = t.GangSize, t.Hosts
			if err := a.writeReplicas(p.task); err != nil {
				a.log.Error("writing the replica set's size failed", "workload", t.Workload, "replica", t.Replica, "err", err)
			} else {
				a.log.Info("replica set resized", "workload", t.Workload, "replica", t.Replica, "replicas", t.GangSize)
			}
		}
		if _, ok := want[ref]; !ok {
			select {
			case <-p.stopping:
			default:
				close(p.stopping)
				if n, ok := notices[ref]; ok && n.After > 0 {
					a.noticing.Add(1)
					go a.noticeThenStop(p, n)
				} else {
					go a.stop(p)
				}
			}
		}
	}
	for ref := range a.ended {
		if _, ok := want[ref]; !ok {
			delete(a.ended, ref) // the server saw the end
		}
	}
	a.holding = false
	if !a.leaseValid() {
		// The answer came too late: the fence may be stopping replicas, and
		// the server may already requeue them. Start nothing.
		if !a.fenceLog.Swap(true) {
			a.log.Warn("the node's lease has ended; starting nothing until it is renewed")
		}
		want = nil
	}
	for ref, t := range want {
		if _, ok := a.procs[ref]; ok || a.ended[ref] {
			continue
		}
		if a.gpusBusy(t.GPUs) {
			// A preempted replica is still in its notice or grace period
			// on these GPUs: start once it has exited.
			a.holding = true
			continue
		}
		p, err := a.start(t, gpus)
		if err != nil {
			a.log.Error("starting a replica failed", "workload", t.Workload, "replica", t.Replica, "err", err)
			a.reports = append(a.reports, api.ReplicaReport{ReplicaRef: ref, Kind: api.ReportExited, Time: time.Now(), Code: 127, Message: err.Error()})
			continue
		}
		a.procs[ref] = p
		a.reports = append(a.reports, api.ReplicaReport{ReplicaRef: ref, Kind: api.ReportStarted, Time: p.started})
		a.log.Info("replica started", "workload", t.Workload, "replica", t.Replica, "gpus", t.GPUs, "pid", p.cmd.Process.Pid)
		go a.watch(p)
	}
	if len(a.reports) > 0 {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// watch reports a process's exit unless the agent is stopping it.
func (a *Agent) watch(p *proc) {
	<-p.done
	select {
	case <-p.stopping:
		return // stop reports it
	default:
	}
	if p.fenced {
		// The fence stopped it: not its own exit, and not the end of its
		// run (if the server still assigns it, it starts again).
		a.mu.Lock()
		delete(a.procs, p.task.ReplicaRef)
		a.mu.Unlock()
		sig, msg := fencedReport(p)
		a.log.Warn("replica fenced: the node's lease ended", "workload", p.task.Workload, "replica", p.task.Replica, "signal", sig)
		a.report(api.ReplicaReport{ReplicaRef: p.task.ReplicaRef, Kind: api.ReportStopped, Time: time.Now(), Code: p.code, Signal: sig, Message: msg})
		return
	}
	a.mu.Lock()
	delete(a.procs, p.task.ReplicaRef)
	a.ended[p.task.ReplicaRef] = true
	a.mu.Unlock()
	a.log.Info("replica exited", "workload", p.task.Workload, "replica", p.task.Replica, "code", p.code)
	a.report(api.ReplicaReport{ReplicaRef: p.task.ReplicaRef, Kind: api.ReportExited, Time: time.Now(), Code: p.code})
}

// fencedReport is the signal and message of a stopped report for p, which
// the fence stopped (p.fenced, read after p.done closed).
func fencedReport(p *proc) (string, string) {
	sig := "SIGTERM"
	if p.mark.Killed {
		sig = "SIGKILL"
	}
	return sig, fmt.Sprintf("fenced: the node's lease ended before a heartbeat renewed it; stopped with %s (grace %v), code %d", sig, time.Duration(p.task.GracePeriod), p.code)
}

// gpusBusy reports whether a replica being stopped still holds one of
// these GPUs. Callers hold a.mu.
func (a *Agent) gpusBusy(gpus []int) bool {
	for _, p := range a.procs {
		select {
		case <-p.stopping:
		default:
			continue // still assigned: the server did not give its GPUs away
		}
		// Busy until stop has recorded the end (even if the process has
		// just exited), so that reports stay in order.
		for _, g := range p.task.GPUs {
			if slices.Contains(gpus, g) {
				return true
			}
		}
	}
	return false
}

// stop ends a replica that is no longer assigned: SIGTERM, the grace
// period, SIGKILL; it reports which ended it.
func (a *Agent) stop(p *proc) {
	grace := time.Duration(p.task.GracePeriod)
	select {
	case <-p.done:
		// It had exited already; report that instead.
		a.mu.Lock()
		delete(a.procs, p.task.ReplicaRef)
		r := api.ReplicaReport{ReplicaRef: p.task.ReplicaRef, Kind: api.ReportStopped, Time: time.Now(), Code: p.code, Message: fmt.Sprintf("had exited with code %d before it was stopped", p.code)}
		if p.fenced {
			r.Signal, r.Message = fencedReport(p)
		}
		a.reports = append(a.reports, r)
		a.mu.Unlock()
		select {
		case a.wake <- struct{}{}:
		default:
		}
		return
	default:
	}
	// The fence finishes the stop (SIGKILL after the grace) should the
	// agent stop while the lease ends.
	p.recMu.Lock()
	if !p.recGone {
		rec := p.rec
		rec.Stopping = int64(monoNow())
		a.writeRecord(rec)
	}
	p.recMu.Unlock()
	sig, took := stopGroup(p.cmd.Process.Pid, p.done, grace)
	msg := fmt.Sprintf("exited %v after SIGTERM (grace %v), code %d", took.Round(time.Millisecond), grace, p.code)
	if sig == "SIGKILL" {
		msg = fmt.Sprintf("killed with SIGKILL after the grace period of %v (SIGTERM %v before)", grace, took.Round(time.Millisecond))
	}
	if p.fenced {
		// The fence had stopped it already (the agent itself was stopped,
		// by SIGSTOP say, while the fence acted): report that.
		sig, msg = fencedReport(p)
	}
	a.log.Info("replica stopped", "workload", p.task.Workload, "replica", p.task.Replica, "signal", sig, "after", took.String())
	// The report is queued in the same critical section that frees the
	// GPUs, so that it reaches the server before the start of whatever
	// takes them next.
	a.mu.Lock()
	delete(a.procs, p.task.ReplicaRef)
	a.ended[p.task.ReplicaRef] = true
	a.reports = append(a.reports, api.ReplicaReport{ReplicaRef: p.task.ReplicaRef, Kind: api.ReportStopped, Time: time.Now(), Code: p.code, Signal: sig, Message: msg})
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}
