package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// The node agent API (issue 7). Agents use the admin token: they register
// their node (POST /v1/nodes), then heartbeat. A heartbeat carries the
// node's GPUs, the replicas it runs and what happened to them; the answer
// is the replicas the node should run. With `wait` the answer is held
// until the node's tasks change, so heartbeats double as the watch.
//
// Each heartbeat reply grants the node a lease of Options.NodeLostAfter. A
// node whose agent misses heartbeats for the lease plus the longest grace
// period of its replicas (its agent stops them when its lease ends) is
// marked down and lost: the scheduler evicts its workloads (gangs whole) and they
// are requeued. When its agent heartbeats again, the node comes back up
// only once the agent reports no process the server did not assign it.

// Node labels an agent sets when it registers (defined in api, so that
// the agent need not link the server).
const (
	LabelAgent = api.LabelAgent // "true": heartbeats are expected
	LabelHost  = api.LabelHost  // the host other replicas reach it at
)

// agents tracks heartbeats in memory: a restarted server gives every
// agent-run node a full NodeLostAfter before it counts it lost.
type agents struct {
	mu       sync.Mutex
	lastSeen map[fleet.NodeID]time.Time
	// logURL and logKey are where each node's agent serves logs (checked:
	// on the node's address) and the key the server signs requests with.
	logURL map[fleet.NodeID]string
	logKey map[fleet.NodeID]string
	// gpus are each node's latest GPU readings (gpuuse.go).
	gpus map[fleet.NodeID]gpuReading
	// ignored counts reports refused because they name a replica run the
	// server did not assign to the reporting node.
	ignored atomic.Int64
}

func (a *agents) seen(id fleet.NodeID, now time.Time, logURL, logKey string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lastSeen == nil {
		a.lastSeen, a.logURL, a.logKey = map[fleet.NodeID]time.Time{}, map[fleet.NodeID]string{}, map[fleet.NodeID]string{}
	}
	a.lastSeen[id] = now
	if logURL != "" {
		a.logURL[id], a.logKey[id] = logURL, logKey
	}
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	// The route's rule (nodeSelf) let only the admin and this node's
	// token through.
	var hb api.Heartbeat
	if err := s.decode(w, r, &hb); err != nil {
		return err
	}
	id := fleet.NodeID(r.PathValue("id"))
	if len(hb.GPUs) > 1024 || len(hb.Running) > 4096 || len(hb.Reports) > 4096 {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "", "too many GPUs, replicas or reports")
	}
	if err := checkReports(hb.Reports); err != nil {
		return err
	}
	if err := checkGPUs(hb.GPUs); err != nil {
		return err
	}
	if err := s.checkLogEndpoint(r, id, hb.LogURL, hb.LogKey); err != nil {
		return err
	}
	s.agents.seen(id, s.now(), hb.LogURL, hb.LogKey)
	changed, err := s.applyHeartbeat(r.Context(), id, hb)
	if err != nil {
		return err
	}
	s.agents.recordGPUs(id, s.now(), hb.GPUs) // a registered node's (applyHeartbeat found it)
	if len(hb.ProbeResults) > 0 {
		if err := s.probes.fromAgent(id, s.nodeRegion(r.Context(), id), hb.ProbeResults); err != nil {
			return err
		}
	}
	if changed {
		s.notify(true)
	}
	wait := min(time.Duration(hb.Wait), 30*time.Second)
	deadline := time.Now().Add(wait)
	for {
		ch := s.changes()
		reply, err := s.tasksOf(r.Context(), id)
		if err != nil {
			return err
		}
		if left := time.Until(deadline); wait <= 0 || left <= 0 || !sameRuns(reply.Tasks, hb.Running) || reply.Down {
			if err := s.addNotices(r.Context(), &reply, hb.Running); err != nil {
				return err
			}
			// The node's lease: its agent stops its replicas when it has not
			// renewed it in time (see watchNodes).
			reply.Lease = api.Duration(s.opts.NodeLostAfter)
			writeJSON(w, http.StatusOK, reply)
			return nil
		}
		left := time.Until(deadline)
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return r.Context().Err()
		}
		t.Stop()
	}
}

// addNotices gives a notice for each replica the agent runs that is no
// longer its task because its spot workload was preempted (it is pending
// again, or already runs elsewhere): the agent warns the process and
// stops it SpotNotice later.
func (s *Server) addNotices(ctx context.Context, reply *api.HeartbeatReply, running []api.ReplicaRef) error {
	if s.opts.SpotNotice <= 0 || reply.Down || len(running) == 0 {
		return nil
	}
	assigned := map[api.ReplicaRef]bool{}
	for _, t := range reply.Tasks {
		ref := t.ReplicaRef
		ref.StartedAt = ref.StartedAt.UTC()
		assigned[ref] = true
	}
	return s.st.View(ctx, func(tx store.ReadTx) error {
		for _, ref := range running {
			ref.StartedAt = ref.StartedAt.UTC()
			if assigned[ref] {
				continue
			}
			x, err := store.Get[store.Workload](tx, ref.Workload)
			if err != nil || x.Spec.Priority != workload.PrioritySpot || x.Preemptions == 0 {
				continue // gone, not spot or never preempted: stop at once
			}
			evicted := x.State == store.StatePending || x.State == store.StateRunning && x.Running != nil && !x.Running.ReplicaStart(ref.Replica).Equal(ref.StartedAt)
			if !evicted {
				continue // cancelled or ended: no notice
			}
			reply.Notices = append(reply.Notices, api.Notice{ReplicaRef: ref, Reason: x.LastPreemption, After: api.Duration(s.opts.SpotNotice)})
		}
		return nil
	})
}

func sameRuns(tasks []api.Task, running []api.ReplicaRef) bool {
	if len(tasks) != len(running) {
		return false
	}
	have := map[api.ReplicaRef]bool{}
	for _, r := range running {
		r.StartedAt = r.StartedAt.UTC()
		have[r] = true
	}
	for _, t := range tasks {
		ref := t.ReplicaRef
		ref.StartedAt = ref.StartedAt.UTC()
		if !have[ref] {
			return false
		}
	}
	return true
}

// applyHeartbeat records reports (starts, exits, stops) and brings a lost
// node back once its agent runs nothing stale.
func (s *Server) applyHeartbeat(ctx context.Context, id fleet.NodeID, hb api.Heartbeat) (changed bool, err error) {
	now := s.now()
	err = s.st.Update(ctx, func(tx store.WriteTx) error {
		changed = false
		node, err := store.Get[store.Node](tx, string(id))
		if err != nil {
			return notFound("node", string(id))
		}
		ignored := 0
		for _, rep := range hb.Reports {
			c, err := s.applyReport(tx, id, rep, now)
			if errors.Is(err, errNotAssigned) {
				ignored++
				continue
			}
			if err != nil {
				return err
			}
			changed = changed || c
		}
		if ignored > 0 {
			// Answered 200 all the same: an agent with stale reports must
			// not be stuck resending them.
			total := s.agents.ignored.Add(int64(ignored))
			s.log.Warn("heartbeat: reports on replica runs not assigned to the node ignored", "node", id, "ignored", ignored, "total", total)
		}
		if node.Lost && node.Down {
			// Stale processes first: the node takes work only when its
			// agent runs nothing (every assignment of it was evicted).
			if len(hb.Running) == 0 {
				node.Down, node.Lost = false, false
				if err := store.Put(tx, node, node.Meta.Revision); err != nil {
					return err
				}
				changed = true
				return store.AppendEvent(tx, &store.Event{Time: now, Type: store.EventNodeRecovered, Object: store.NodeObject(id), Message: "its agent heartbeats again and runs no stale process"})
			}
		}
		return nil
	})
	return changed, err
}

// tasksOf lists the replicas assigned to a node.
// nodeRegion is the region of node id ("" when it is not registered).
func (s *Server) nodeRegion(ctx context.Context, id fleet.NodeID) string {
	var region string
	_ = s.st.View(ctx, func(tx store.ReadTx) error {
		n, err := store.Get[store.Node](tx, string(id))
		if err == nil {
			region = n.Region
		}
		return nil
	})
	return region
}

func (s *Server) tasksOf(ctx context.Context, id fleet.NodeID) (api.HeartbeatReply, error) {
	reply := api.HeartbeatReply{Tasks: []api.Task{}}
	err := s.st.View(ctx, func(tx store.ReadTx) error {
		wd, err := loadWorldWith(tx, s.cat.Load(), true, &s.live)
		if err != nil {
			return err
		}
		host := map[fleet.NodeID]string{}
		for _, n := range wd.Nodes {
			host[n.ID] = string(n.ID)
			if h := n.Labels[LabelHost]; h != "" {
				host[n.ID] = h
			}
			if n.ID == id {
				reply.Down, reply.Lost = n.Down || n.Drained, n.Lost
				reply.Probes = s.probes.tasksFor(id, n.Region)
			}
		}
		if reply.Down {
			return nil
		}
		for _, x := range wd.Workloads {
			if x.State != store.StateRunning || x.Running == nil {
				continue
			}
			hosts := make([]string, len(x.Running.Replicas))
			for i, rep := range x.Running.Replicas {
				hosts[i] = host[rep.Node]
			}
			for i, rep := range x.Running.Replicas {
				if rep.Node != id {
					continue
				}
				exited := false
				for _, e := range x.Exits {
					exited = exited || (e.Replica == i && e.StartedAt.Equal(x.Running.ReplicaStart(i)))
				}
				if exited {
					continue
				}
				t := api.Task{
					ReplicaRef: api.ReplicaRef{Workload: x.Key(), Replica: i, StartedAt: x.Running.ReplicaStart(i)},
					Tenant:     x.Tenant, Name: string(x.Spec.Name), GangSize: len(x.Running.Replicas),
					GPUs: rep.GPUs, MIG: rep.MIG, Hosts: hosts, GracePeriod: api.Duration(s.graceFor(x.Spec)), Preemptions: x.Preemptions,
					Command: commandOut(x.Command),
				}
				reply.Tasks = append(reply.Tasks, t)
			}
		}
		return nil
	})
	sort.Slice(reply.Tasks, func(i, j int) bool {
		a, b := reply.Tasks[i], reply.Tasks[j]
		return a.Workload < b.Workload || a.Workload == b.Workload && a.Replica < b.Replica
	})
	return reply, err
}

func commandOut(c *store.Command) *api.Command {
	if c == nil {
		return nil
	}
	return &api.Command{Argv: c.Argv, Env: c.Env, Dir: c.Dir}
}

func commandIn(c *api.Command) *store.Command {
	if c == nil {
		return nil
	}
	out := &store.Command{Argv: c.Argv, Env: c.Env, Dir: c.Dir}
	if len(out.Env) == 0 {
		out.Env = nil // as it reads back from the store
	}
	return out
}

// watchNodes marks agent-run nodes lost when they have not renewed their
// lease: no heartbeat for NodeLostAfter (the lease each heartbeat reply
// grants) plus the longest grace period of the replicas assigned to the
// node. An agent that cannot renew its lease stops its replicas (SIGTERM,
// the grace, SIGKILL) before the lease ends, so by the time the scheduler
// evicts and requeues them no process of theirs runs any more: a replica
// never runs on two nodes at once.
func (s *Server) watchNodes(ctx context.Context) {
	after := s.opts.NodeLostAfter
	every := min(max(after/4, 10*time.Millisecond), time.Second)
	started := s.now()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.checkLeases(ctx, started)
	}
}

// checkLeases marks lost the agent-run nodes whose lease and grace ran
// out at now (a restarted server counts from started) and drops their GPU
// readings.
func (s *Server) checkLeases(ctx context.Context, started time.Time) {
	after := s.opts.NodeLostAfter
	now := s.now()
	var lost map[fleet.NodeID]time.Duration
	err := s.st.View(ctx, func(tx store.ReadTx) (err error) {
		lost, err = s.lostNodes(tx, now, started)
		return err
	})
	if err != nil || len(lost) == 0 {
		return
	}
	var ids []fleet.NodeID
	err = s.st.Update(ctx, func(tx store.WriteTx) error {
		ids = ids[:0]
		for id, grace := range lost {
			n, err := store.Get[store.Node](tx, string(id))
			if err != nil || n.Down {
				continue
			}
			n.Down, n.Lost = true, true
			if err := store.Put(tx, n, n.Meta.Revision); err != nil {
				return err
			}
			msg := fmt.Sprintf("no heartbeat for more than %v (its lease) plus %v (the longest grace period of its replicas)", after, grace)
			if err := store.AppendEvent(tx, &store.Event{Time: now, Type: store.EventNodeLost, Object: store.NodeObject(id), Message: msg}); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("node watch: marking nodes lost", "err", err)
		}
		return
	}
	s.agents.forgetGPUs(ids) // no stale busy values
	s.log.Warn("nodes lost: lease not renewed", "nodes", ids, "lease", after.String())
	s.notify(true)
}

// lostNodes returns the agent-run nodes whose lease and grace have run
// out at now (a restarted server counts from started), with the grace it
// waited for each.
func (s *Server) lostNodes(tx store.ReadTx, now, started time.Time) (map[fleet.NodeID]time.Duration, error) {
	after := s.opts.NodeLostAfter
	nodes, err := store.List[store.Node](tx, "")
	if err != nil {
		return nil, err
	}
	silent := map[fleet.NodeID]time.Duration{} // past the lease: how long silent
	s.agents.mu.Lock()
	for _, n := range nodes {
		if n.Labels[LabelAgent] != "true" || n.Down {
			continue
		}
		last, ok := s.agents.lastSeen[n.ID]
		if !ok {
			last = started
		}
		if d := now.Sub(last); d > after {
			silent[n.ID] = d
		}
	}
	s.agents.mu.Unlock()
	lost := map[fleet.NodeID]time.Duration{}
	if len(silent) == 0 {
		return lost, nil
	}
	grace, err := s.nodeGraces(tx, silent)
	if err != nil {
		return nil, err
	}
	for id, d := range silent {
		if d > after+grace[id] {
			lost[id] = grace[id]
		}
	}
	return lost, nil
}

// nodeGraces returns, for each of these nodes, the longest grace period
// (capped as graceFor caps it, the grace agents are told) of the replicas of running workloads assigned
// to it: how long its agent may take to stop them once its lease ended.
func (s *Server) nodeGraces(tx store.ReadTx, nodes map[fleet.NodeID]time.Duration) (map[fleet.NodeID]time.Duration, error) {
	ws, err := store.List[store.Workload](tx, "")
	if err != nil {
		return nil, err
	}
	out := make(map[fleet.NodeID]time.Duration, len(nodes))
	for _, x := range ws {
		if x.State != store.StateRunning || x.Running == nil {
			continue
		}
		g := s.graceFor(x.Spec)
		for _, rep := range x.Running.Replicas {
			if _, ok := nodes[rep.Node]; ok && g > out[rep.Node] {
				out[rep.Node] = g
			}
		}
	}
	return out, nil
}

// createNodeToken makes a token for one node's agent (admin): it may
// register that node and heartbeat it, nothing else, so a compromised
// machine cannot act for the others or touch tenants. The node need not
// be registered yet.
func (s *Server) createNodeToken(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	return s.issueToken(w, r, store.Token{Node: id}, "agent", func(store.ReadTx) error {
		if !validName(id) {
			return badName("id", id)
		}
		return nil
	})
}
