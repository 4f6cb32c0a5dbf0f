package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
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
// A node whose agent misses heartbeats for Options.NodeLostAfter is marked
// down and lost: the scheduler evicts its workloads (gangs whole) and they
// are requeued. When its agent heartbeats again, the node comes back up
// only once the agent reports no process the server did not assign it.

// Node labels an agent sets when it registers.
const (
	LabelAgent = "arbiter.io/agent" // "true": heartbeats are expected
	LabelHost  = "arbiter.io/host"  // the host other replicas reach it at
)

func init() {
	docs["POST /v1/nodes/{id}/heartbeat"] = routeDoc{summary: "Agent heartbeat: GPUs, running replicas, reports; answers the node's tasks (long-polls with wait). Admin or the node's token", admin: true, req: api.Heartbeat{}, resp: api.HeartbeatReply{}}
	docs["POST /v1/nodes/{id}/tokens"] = routeDoc{summary: "Create a node token for the node's agent: it may register and heartbeat that node only (the secret is returned once)", admin: true, req: api.TokenRequest{}, resp: api.Token{}, status: 201}
	docs["GET /v1/tenants/{tenant}/workloads/{name}/logs"] = routeDoc{summary: "A replica's output, fetched from its node's agent (text)", query: []string{"replica", "tail"}}
}

func (s *Server) agentRoutes() []apiRoute {
	return []apiRoute{
		{"POST /v1/nodes/{id}/heartbeat", s.heartbeat},
		{"POST /v1/nodes/{id}/tokens", s.createNodeToken},
		{"GET /v1/tenants/{tenant}/workloads/{name}/logs", s.workloadLogs},
	}
}

// agents tracks heartbeats in memory: a restarted server gives every
// agent-run node a full NodeLostAfter before it counts it lost.
type agents struct {
	mu       sync.Mutex
	lastSeen map[fleet.NodeID]time.Time
	logURL   map[fleet.NodeID]string
	logKey   map[fleet.NodeID]string
	ranOn    map[string]fleet.NodeID // "tenant/name#replica" -> node
}

func (a *agents) seen(id fleet.NodeID, now time.Time, logURL, logKey string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lastSeen == nil {
		a.lastSeen, a.logURL, a.logKey, a.ranOn = map[fleet.NodeID]time.Time{}, map[fleet.NodeID]string{}, map[fleet.NodeID]string{}, map[string]fleet.NodeID{}
	}
	a.lastSeen[id] = now
	if logURL != "" {
		a.logURL[id], a.logKey[id] = logURL, logKey
	}
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	if err := requireNode(r, r.PathValue("id")); err != nil {
		return err
	}
	var hb api.Heartbeat
	if err := s.decode(w, r, &hb); err != nil {
		return err
	}
	id := fleet.NodeID(r.PathValue("id"))
	if len(hb.GPUs) > 1024 || len(hb.Running) > 4096 || len(hb.Reports) > 4096 {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "", "too many GPUs, replicas or reports")
	}
	for _, rep := range hb.Reports {
		switch rep.Kind {
		case api.ReportStarted, api.ReportExited, api.ReportStopped:
		default:
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "reports.kind", "kind must be Started, Exited or Stopped, got %q", rep.Kind)
		}
	}
	s.agents.seen(id, s.now(), hb.LogURL, hb.LogKey)
	changed, err := s.applyHeartbeat(r.Context(), id, hb)
	if err != nil {
		return err
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
			evicted := x.State == store.StatePending || x.State == store.StateRunning && x.Running != nil && !x.Running.StartedAt.Equal(ref.StartedAt)
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
		for _, rep := range hb.Reports {
			c, err := s.applyReport(tx, id, rep, now)
			if err != nil {
				return err
			}
			changed = changed || c
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
				return store.AppendEvent(tx, &store.Event{Time: now, Type: "NodeRecovered", Object: "nodes/" + string(id), Message: "its agent heartbeats again and runs no stale process"})
			}
		}
		return nil
	})
	return changed, err
}

func (s *Server) applyReport(tx store.WriteTx, id fleet.NodeID, rep api.ReplicaReport, now time.Time) (bool, error) {
	x, err := store.Get[store.Workload](tx, rep.Workload)
	if err != nil {
		return false, nil // gone; nothing to record
	}
	obj := "workloads/" + x.Key()
	current := x.State == store.StateRunning && x.Running != nil && x.Running.StartedAt.Equal(rep.StartedAt)
	switch rep.Kind {
	case api.ReportStarted:
		s.agents.mu.Lock()
		s.agents.ranOn[fmt.Sprintf("%s#%d", rep.Workload, rep.Replica)] = id
		s.agents.mu.Unlock()
		return false, store.AppendEvent(tx, &store.Event{Time: now, Type: "ReplicaStarted", Object: obj, Tenant: x.Tenant,
			Message: fmt.Sprintf("replica %d started on %s", rep.Replica, id)})
	case api.ReportStopped:
		msg := fmt.Sprintf("replica %d on %s: %s", rep.Replica, id, rep.Message)
		x.LastStop = msg
		if err := store.Put(tx, x, x.Meta.Revision); err != nil {
			return false, err
		}
		return false, store.AppendEvent(tx, &store.Event{Time: now, Type: "ReplicaStopped", Object: obj, Tenant: x.Tenant, Message: msg})
	}
	// Exited on its own.
	msg := fmt.Sprintf("replica %d on %s exited with code %d", rep.Replica, id, rep.Code)
	if !current {
		return false, store.AppendEvent(tx, &store.Event{Time: now, Type: "ReplicaExited", Object: obj, Tenant: x.Tenant, Message: msg + " (an earlier run)"})
	}
	for _, e := range x.Exits {
		if e.Replica == rep.Replica && e.StartedAt.Equal(rep.StartedAt) {
			return false, nil // reported twice
		}
	}
	x.Exits = append(x.Exits, store.Exit{Replica: rep.Replica, Code: rep.Code, StartedAt: x.Running.StartedAt})
	done, failed := 0, false
	for _, e := range x.Exits {
		if e.StartedAt.Equal(x.Running.StartedAt) {
			done++
			failed = failed || e.Code != 0
		}
	}
	ended := failed || done >= x.Spec.Replicas
	if ended {
		x.State, x.Running, x.EndedAt = store.StateSucceeded, nil, now
		if failed {
			x.State = store.StateFailed
		}
	}
	if err := store.Put(tx, x, x.Meta.Revision); err != nil {
		return false, err
	}
	if err := store.AppendEvent(tx, &store.Event{Time: now, Type: "ReplicaExited", Object: obj, Tenant: x.Tenant, Message: msg}); err != nil {
		return false, err
	}
	if ended {
		return true, store.AppendEvent(tx, &store.Event{Time: now, Type: "Workload" + string(x.State), Object: obj, Tenant: x.Tenant, Message: msg})
	}
	return false, nil
}

// tasksOf lists the replicas assigned to a node.
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
					exited = exited || (e.Replica == i && e.StartedAt.Equal(x.Running.StartedAt))
				}
				if exited {
					continue
				}
				t := api.Task{
					ReplicaRef: api.ReplicaRef{Workload: x.Key(), Replica: i, StartedAt: x.Running.StartedAt},
					Tenant:     x.Tenant, Name: string(x.Spec.Name), GangSize: len(x.Running.Replicas),
					GPUs: rep.GPUs, Hosts: hosts, GracePeriod: api.Duration(x.Spec.GracePeriod), Preemptions: x.Preemptions,
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

// watchNodes marks agent-run nodes lost when they miss heartbeats for
// NodeLostAfter; the scheduler then evicts their work.
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
		now := s.now()
		var lost []fleet.NodeID
		err := s.st.View(ctx, func(tx store.ReadTx) error {
			nodes, err := store.List[store.Node](tx, "")
			if err != nil {
				return err
			}
			s.agents.mu.Lock()
			defer s.agents.mu.Unlock()
			for _, n := range nodes {
				if n.Labels[LabelAgent] != "true" || n.Down {
					continue
				}
				last, ok := s.agents.lastSeen[n.ID]
				if !ok {
					last = started
				}
				if now.Sub(last) > after {
					lost = append(lost, n.ID)
				}
			}
			return nil
		})
		if err != nil || len(lost) == 0 {
			continue
		}
		err = s.st.Update(ctx, func(tx store.WriteTx) error {
			for _, id := range lost {
				n, err := store.Get[store.Node](tx, string(id))
				if err != nil || n.Down {
					continue
				}
				n.Down, n.Lost = true, true
				if err := store.Put(tx, n, n.Meta.Revision); err != nil {
					return err
				}
				if err := store.AppendEvent(tx, &store.Event{Time: now, Type: "NodeLost", Object: "nodes/" + string(id), Message: fmt.Sprintf("no heartbeat for more than %v", after)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("node watch: marking nodes lost", "err", err)
			}
			continue
		}
		s.log.Warn("nodes lost: no heartbeat", "nodes", lost, "after", after.String())
		s.notify(true)
	}
}

// workloadLogs proxies a replica's log from the agent of its node.
func (s *Server) workloadLogs(w http.ResponseWriter, r *http.Request) error {
	x, err := s.loadWorkload(r)
	if err != nil {
		return err
	}
	rep, err := optIntParam(r.URL.Query(), "replica", 0, int64(x.Spec.Replicas-1), 0)
	if err != nil {
		return err
	}
	replica := int(rep)
	if _, err := optIntParam(r.URL.Query(), "tail", 0, 1<<20, 0); err != nil {
		return err
	}
	// The node of the replica's current run, or the last one an agent
	// reported it started on (kept in memory).
	var node fleet.NodeID
	if x.Running != nil && replica < len(x.Running.Replicas) {
		node = x.Running.Replicas[replica].Node
	} else {
		s.agents.mu.Lock()
		node = s.agents.ranOn[fmt.Sprintf("%s#%d", x.Key(), replica)]
		s.agents.mu.Unlock()
	}
	if node == "" {
		return apiErr(http.StatusNotFound, api.CodeNotFound, "", "replica %d of %q has not run on any node", replica, x.Spec.Name)
	}
	s.agents.mu.Lock()
	base, key := s.agents.logURL[node], s.agents.logKey[node]
	s.agents.mu.Unlock()
	if key == "" {
		key = s.opts.AdminToken // an agent that sends no key (older) checks its own token
	}
	if base == "" {
		return apiErr(http.StatusServiceUnavailable, api.CodeUnavailable, "", "the agent of node %s has not said where it serves logs", node)
	}
	u := fmt.Sprintf("%s/logs/%s/%s/%d", strings.TrimRight(base, "/"), url.PathEscape(x.Tenant), url.PathEscape(string(x.Spec.Name)), replica)
	if t := r.URL.Query().Get("tail"); t != "" {
		u += "?tail=" + url.QueryEscape(t)
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return apiErr(http.StatusServiceUnavailable, api.CodeUnavailable, "", "the agent of node %s does not answer", node)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return apiErr(http.StatusNotFound, api.CodeNotFound, "", "node %s has no log of replica %d of %q (status %d)", node, replica, x.Spec.Name, resp.StatusCode)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	io.Copy(w, io.LimitReader(resp.Body, 64<<20))
	return nil
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
