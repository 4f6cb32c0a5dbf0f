package agent

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// Spot work gets a notice before it is stopped, as clouds' scheduled
// events warn spot VMs: the agent writes the event to the replica's
// $ARBITER_NOTICE_FILE and serves it at $ARBITER_EVENTS_URL (loopback, in
// the shape of Azure's Scheduled Events), waits the notice, then stops
// the replica (SIGTERM, grace, SIGKILL).

// ScheduledEvent is one event, in Azure Scheduled Events' shape; Issued
// (not Azure's) is when the agent gave the notice.
type ScheduledEvent struct {
	EventId           string   `json:"EventId"`
	EventType         string   `json:"EventType"` // Preempt
	ResourceType      string   `json:"ResourceType"`
	Resources         []string `json:"Resources"`
	EventStatus       string   `json:"EventStatus"` // Scheduled
	NotBefore         string   `json:"NotBefore"`   // RFC 1123, GMT
	Description       string   `json:"Description"`
	EventSource       string   `json:"EventSource"`
	DurationInSeconds int      `json:"DurationInSeconds"`
	Issued            string   `json:"Issued"` // RFC 3339, nanoseconds
}

// ScheduledEvents is what ARBITER_EVENTS_URL answers.
type ScheduledEvents struct {
	DocumentIncarnation int              `json:"DocumentIncarnation"`
	Events              []ScheduledEvent `json:"Events"`
}

func replicaKey(workload string, replica int) string { return workload + "#" + strconv.Itoa(replica) }

// NoticePath is the replica's ARBITER_NOTICE_FILE (written only when a
// notice is given).
func (a *Agent) NoticePath(workloadKey string, replica int) string {
	return filepath.Join(a.opts.DataDir, "notices", safeName(workloadKey), fmt.Sprintf("replica-%d.json", replica))
}

func (a *Agent) eventsURL(t api.Task) string {
	return fmt.Sprintf("%s/events/%s/%s/%d", a.evURL, url.PathEscape(t.Tenant), url.PathEscape(t.Name), t.Replica)
}

// serveEvents listens on the events address and serves scheduled events.
func (a *Agent) serveEvents() (func(), error) {
	ln, err := net.Listen("tcp", a.opts.EventsListen)
	if err != nil {
		return nil, fmt.Errorf("agent: events listener: %w", err)
	}
	a.evURL = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /events/{tenant}/{name}/{replica}", func(w http.ResponseWriter, r *http.Request) {
		rep, err := strconv.Atoi(r.PathValue("replica"))
		if err != nil {
			http.Error(w, "bad replica", http.StatusBadRequest)
			return
		}
		doc := ScheduledEvents{Events: []ScheduledEvent{}}
		a.mu.Lock()
		if ev, ok := a.notices[replicaKey(r.PathValue("tenant")+"/"+r.PathValue("name"), rep)]; ok {
			doc.DocumentIncarnation, doc.Events = 1, append(doc.Events, ev)
		}
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	return func() { hs.Close() }, nil
}

// noticeThenStop warns the replica, waits the notice (or until the
// process exits, or the agent shuts down), then stops it.
func (a *Agent) noticeThenStop(p *proc, n api.Notice) {
	defer a.noticing.Done()
	after := time.Duration(n.After)
	now := time.Now()
	ev := ScheduledEvent{
		EventId:   fmt.Sprintf("%s-%d-%d", safeName(p.task.Workload), p.task.Replica, now.UnixNano()),
		EventType: "Preempt", ResourceType: "VirtualMachine", Resources: []string{a.opts.NodeID}, EventStatus: "Scheduled",
		NotBefore: now.Add(after).UTC().Format(http.TimeFormat), Description: n.Reason, EventSource: "Platform", DurationInSeconds: -1,
		Issued: now.UTC().Format(time.RFC3339Nano),
	}
	key := replicaKey(p.task.Workload, p.task.Replica)
	path := a.NoticePath(p.task.Workload, p.task.Replica)
	a.mu.Lock()
	a.notices[key] = ev
	a.mu.Unlock()
	if b, err := json.Marshal(ev); err == nil {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if os.WriteFile(path+".tmp", append(b, '\n'), 0o644) == nil {
			os.Rename(path+".tmp", path)
		}
	}
	fmt.Fprintf(p.log, "--- arbiter: eviction notice at %s: SIGTERM not before %s (%s)\n", ev.Issued, now.Add(after).UTC().Format(time.RFC3339Nano), n.Reason)
	a.log.Info("eviction notice given", "workload", p.task.Workload, "replica", p.task.Replica, "notice", after.String(), "reason", n.Reason)
	t := time.NewTimer(after)
	select {
	case <-t.C:
	case <-p.done:
	case <-a.cut:
	}
	t.Stop()
	a.stop(p)
	a.mu.Lock()
	delete(a.notices, key)
	a.mu.Unlock()
	os.Remove(path)
}

// ReplicaSet is what ARBITER_REPLICAS_FILE holds: the replica set's size
// and each replica's host, by replica. The agent writes it before the
// replica starts and rewrites it (atomically: a new file renamed over the
// old) whenever the set's size changes (an elastic workload grown or
// shrunk); a replica that cares polls it. Replicas removed by a shrink
// are the highest ones, stopped as evicted replicas are (SIGTERM, grace,
// SIGKILL); the others go on without a restart.
type ReplicaSet struct {
	Replicas int      `json:"replicas"`
	Hosts    []string `json:"hosts"`
}

// ReplicasPath is the replica's ARBITER_REPLICAS_FILE.
func (a *Agent) ReplicasPath(workloadKey string, replica int) string {
	return filepath.Join(a.opts.DataDir, "replicas", safeName(workloadKey), fmt.Sprintf("replica-%d.json", replica))
}

// writeReplicas writes t's replica set to its replica's file.
func (a *Agent) writeReplicas(t api.Task) error {
	path := a.ReplicasPath(t.Workload, t.Replica)
	b, err := json.Marshal(ReplicaSet{Replicas: t.GangSize, Hosts: t.Hosts})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path+".tmp", append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}
