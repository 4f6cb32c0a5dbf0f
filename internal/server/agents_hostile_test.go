package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// agentFleet is a harness with agent-run nodes n1 and n2 (each with its
// own token) and a running workload of contoso.
type agentFleet struct {
	*harness
	nodes map[string]*client.Client
	runs  int // runs placed: each starts a second after the last
}

const testLogKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func newAgentFleet(t *testing.T, o Options) *agentFleet {
	t.Helper()
	o.RateLimit = -1
	f := &agentFleet{harness: newHarness(t, testConfig, o), nodes: map[string]*client.Client{}}
	for _, id := range []string{"n1", "n2"} {
		tok, err := f.admin.CreateNodeToken(f.ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		c := client.New(f.url, tok.Secret)
		if _, err := c.RegisterNode(f.ctx, api.NodeRegistration{ID: id, Region: "eastus", Zone: "1", Block: "eus-a", SKU: "Standard_ND96amsr_A100_v4",
			Labels: map[string]string{LabelAgent: "true", LabelHost: id + ".example"}}); err != nil {
			t.Fatal(err)
		}
		f.nodes[id] = c
	}
	return f
}

// place stores workload name of contoso as running on node with the
// given GPUs (as a scheduling cycle would) and returns its run's start.
func (f *agentFleet) place(name string, node fleet.NodeID, gpus []int, grace time.Duration) time.Time {
	f.t.Helper()
	f.runs++
	started := time.Now().UTC().Truncate(time.Second).Add(time.Duration(f.runs) * time.Second)
	err := f.st.Update(f.ctx, func(tx store.WriteTx) error {
		x, err := store.Get[store.Workload](tx, store.WorkloadKey("contoso", name))
		if err != nil {
			x = &store.Workload{Tenant: "contoso", State: store.StatePending, SubmittedAt: started,
				Spec:    workload.Spec{Name: workload.ID(name), Tenant: "contoso", GPUs: 8000, Replicas: 1, Priority: workload.PriorityNormal, Flavors: []fleet.ModelID{"A100-80G"}, Regions: []string{"eastus"}},
				Command: &store.Command{Argv: []string{"/bin/true"}, Env: map[string]string{"SECRET": "s3cret"}}}
		}
		x.Spec.GracePeriod = grace
		x.State = store.StateRunning
		x.Running = &workload.Assignment{Flavor: "A100-80G", Region: "eastus", StartedAt: started, Replicas: []workload.Replica{{Node: node, GPUs: gpus, Milli: 8000}}}
		rev := x.Meta.Revision
		if rev == 0 {
			rev = store.MustNotExist
		}
		if err := store.Put(tx, x, rev); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: started, Type: "WorkloadPlaced", Object: "workloads/" + x.Key(), Tenant: "contoso"})
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return started
}

func (f *agentFleet) beat(node string, hb api.Heartbeat) (api.HeartbeatReply, error) {
	var reply api.HeartbeatReply
	if hb.Running == nil {
		hb.Running = []api.ReplicaRef{}
	}
	err := f.nodes[node].Do(f.ctx, "POST", "/v1/nodes/"+node+"/heartbeat", hb, &reply)
	return reply, err
}

func (f *agentFleet) stored(name string) *store.Workload {
	f.t.Helper()
	var x *store.Workload
	if err := f.st.View(f.ctx, func(tx store.ReadTx) error {
		var err error
		x, err = store.Get[store.Workload](tx, store.WorkloadKey("contoso", name))
		return err
	}); err != nil {
		f.t.Fatal(err)
	}
	return x
}

// TestForgedReportsIgnored: node n2's token (and the admin acting for
// n2) reports Started, Stopped and Exited code 1 for a workload that runs
// on n1: the answer is 200, the workload is not failed and no event of
// it carries n2's text. Reports naming a replica out of range or an
// unknown run change nothing either. n1's own report does end it.
func TestForgedReportsIgnored(t *testing.T) {
	f := newAgentFleet(t, Options{})
	at := f.place("victim", "n1", []int{0, 1, 2, 3, 4, 5, 6, 7}, time.Second)
	ref := api.ReplicaRef{Workload: "contoso/victim", Replica: 0, StartedAt: at}
	forged := []api.ReplicaReport{
		{ReplicaRef: ref, Kind: api.ReportStarted, Message: "n2-forged"},
		{ReplicaRef: ref, Kind: api.ReportStopped, Signal: "SIGKILL", Message: "n2-forged stop"},
		{ReplicaRef: ref, Kind: api.ReportExited, Code: 1, Message: "n2-forged exit"},
	}
	if _, err := f.beat("n2", api.Heartbeat{Reports: forged}); err != nil {
		t.Fatalf("n2's heartbeat with forged reports: %v (want 200: stale reports must not wedge an agent)", err)
	}
	var reply api.HeartbeatReply
	if err := f.admin.Do(f.ctx, "POST", "/v1/nodes/n2/heartbeat", api.Heartbeat{Running: []api.ReplicaRef{}, Reports: forged}, &reply); err != nil {
		t.Fatalf("the admin acting for n2: %v", err)
	}
	// n1 itself, on runs it was not given: another replica, another start.
	odd := []api.ReplicaReport{
		{ReplicaRef: api.ReplicaRef{Workload: "contoso/victim", Replica: 7, StartedAt: at}, Kind: api.ReportExited, Code: 1},
		{ReplicaRef: api.ReplicaRef{Workload: "contoso/victim", Replica: -1, StartedAt: at}, Kind: api.ReportStarted},
		{ReplicaRef: api.ReplicaRef{Workload: "contoso/victim", Replica: 0, StartedAt: at.Add(-time.Hour)}, Kind: api.ReportStopped, Message: "unknown run"},
		{ReplicaRef: api.ReplicaRef{Workload: "fabrikam/nothing", Replica: 0, StartedAt: at}, Kind: api.ReportExited, Code: 1},
	}
	if _, err := f.beat("n1", api.Heartbeat{Reports: odd}); err != nil {
		t.Fatalf("n1's heartbeat: %v", err)
	}
	x := f.stored("victim")
	if x.State != store.StateRunning || len(x.Exits) != 0 || len(x.Started) != 0 || x.LastStop != "" {
		t.Fatalf("forged reports changed the workload: state %s exits %v started %v last stop %q", x.State, x.Exits, x.Started, x.LastStop)
	}
	for _, ev := range f.eventsOf(t, "workloads/contoso/victim") {
		if strings.Contains(ev.Message, "n2") || strings.Contains(ev.Message, "unknown run") || strings.HasPrefix(ev.Type, "Replica") {
			t.Errorf("event from a forged report: %s %q", ev.Type, ev.Message)
		}
	}
	if got := f.s.agents.ignored.Load(); got != int64(2*len(forged)+len(odd)) {
		t.Errorf("ignored reports counted %d, want %d", got, 2*len(forged)+len(odd))
	}
	// The node it runs on reports for real: it starts, then fails.
	if _, err := f.beat("n1", api.Heartbeat{Reports: []api.ReplicaReport{{ReplicaRef: ref, Kind: api.ReportStarted}, {ReplicaRef: ref, Kind: api.ReportExited, Code: 1}}}); err != nil {
		t.Fatal(err)
	}
	if x := f.stored("victim"); x.State != store.StateFailed {
		t.Fatalf("n1's own exit: state %s, want Failed", x.State)
	}
}

// TestStopOfEarlierRunNeedsItsNode: once a run is evicted, only the node
// that reported it started may report its stop (the record is durable on
// the workload, not in the server's memory).
func TestStopOfEarlierRunNeedsItsNode(t *testing.T) {
	f := newAgentFleet(t, Options{})
	at := f.place("job", "n1", []int{0, 1}, time.Second)
	ref := api.ReplicaRef{Workload: "contoso/job", Replica: 0, StartedAt: at}
	if _, err := f.beat("n1", api.Heartbeat{Reports: []api.ReplicaReport{{ReplicaRef: ref, Kind: api.ReportStarted}}}); err != nil {
		t.Fatal(err)
	}
	f.place("job", "n2", []int{0, 1}, time.Second) // moved: the n1 run is earlier now
	stop := []api.ReplicaReport{{ReplicaRef: ref, Kind: api.ReportStopped, Signal: "SIGTERM", Message: "exited after SIGTERM\nforged line"}}
	if _, err := f.beat("n2", api.Heartbeat{Reports: stop}); err != nil {
		t.Fatal(err)
	}
	if x := f.stored("job"); x.LastStop != "" || len(x.Started) != 1 || x.Started[0].Gone {
		t.Fatalf("n2 reported n1's stop: last stop %q, started %+v", x.LastStop, x.Started)
	}
	if _, err := f.beat("n1", api.Heartbeat{Reports: stop}); err != nil {
		t.Fatal(err)
	}
	x := f.stored("job")
	if !strings.Contains(x.LastStop, "on n1: exited after SIGTERM forged line") || len(x.Started) != 1 || !x.Started[0].Gone {
		t.Fatalf("n1's stop of its earlier run: last stop %q, started %+v", x.LastStop, x.Started)
	}
}

func (f *agentFleet) eventsOf(t *testing.T, object string) []api.Event {
	t.Helper()
	page, err := f.admin.Events(f.ctx, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []api.Event
	for _, ev := range page.Items {
		if ev.Object == object {
			out = append(out, ev)
		}
	}
	return out
}

// TestLogURLChecked: a heartbeat's log_url must be http(s) on the node's
// address (its host label or the address it heartbeats from) and not the
// server's own; others are refused with a 400 naming log_url.
func TestLogURLChecked(t *testing.T) {
	f := newAgentFleet(t, Options{})
	for _, c := range []struct {
		url, key, field string
	}{
		{f.url, testLogKey, "log_url"}, // the server's own API
		{f.url + "/v1", testLogKey, "log_url"},
		{strings.Replace(f.url, "127.0.0.1", "localhost", 1), testLogKey, "log_url"}, // neither its label nor its IP
		{"file:///etc/passwd", testLogKey, "log_url"},
		{"gopher://n1.example:70/", testLogKey, "log_url"},
		{"http://admin:pw@n1.example:9000/", testLogKey, "log_url"},
		{"http://n2.example:9000/", testLogKey, "log_url"},
		{"http://evil.example/", testLogKey, "log_url"},
		{"http://169.254.169.254/latest/meta-data/", testLogKey, "log_url"},
		{"http://n1.example:9000/?x=1", testLogKey, "log_url"},
		{"http://n1.example:9000/#x", testLogKey, "log_url"},
		{"http:///logs", testLogKey, "log_url"},
		{"::not a url", testLogKey, "log_url"},
		{"http://n1.example:9000/" + strings.Repeat("a", 3000), testLogKey, "log_url"},
		{"http://n1.example:9000", "", "log_key"},
		{"http://n1.example:9000", "short", "log_key"},
		{"http://n1.example:9000", strings.Repeat("k", 300), "log_key"},
		{"http://n1.example:9000", testLogKey, ""},
		{"https://N1.EXAMPLE/agent", testLogKey, ""},
		{"http://127.0.0.1:9000", testLogKey, ""}, // where its heartbeats come from
		{"http://[::1]:9000", testLogKey, "log_url"},
	} {
		_, err := f.beat("n1", api.Heartbeat{LogURL: c.url, LogKey: c.key})
		var ae *api.Error
		switch {
		case c.field == "" && err != nil:
			t.Errorf("log_url %q refused: %v", c.url, err)
		case c.field != "" && (!errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != c.field):
			t.Errorf("log_url %.80q key %.40q: %v, want a 400 naming %s", c.url, c.key, err, c.field)
		}
	}
}

// TestLogsSendNoSecret: even with an accepted log_url, a tenant's logs
// request makes the server send no bearer token, only a signature of that
// request for that node, which expires; redirects are not followed.
func TestLogsSendNoSecret(t *testing.T) {
	f := newAgentFleet(t, Options{})
	var mu sync.Mutex
	var got []*http.Request
	elsewhere := 0
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere++
		mu.Unlock()
	}))
	defer other.Close()
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Clone(r.Context()))
		mu.Unlock()
		if r.URL.Query().Get("tail") == "5" {
			http.Redirect(w, r, other.URL+"/v1/workloads", http.StatusFound)
			return
		}
		w.Write([]byte("hello from the fake agent\n"))
	}))
	defer agent.Close()
	if _, err := f.beat("n1", api.Heartbeat{LogURL: agent.URL, LogKey: testLogKey}); err != nil {
		t.Fatal(err)
	}
	f.place("job", "n1", []int{0}, time.Second)
	tenant := f.tenant("contoso")
	b, err := tenant.Logs(f.ctx, "contoso", "job", 0, 0)
	if err != nil || string(b) != "hello from the fake agent\n" {
		t.Fatalf("logs: %q %v", b, err)
	}
	if _, err := tenant.Logs(f.ctx, "contoso", "job", 0, 5); apiCode(err) != api.CodeNotFound {
		t.Errorf("a redirecting agent: %v, want not found (the redirect is not followed)", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if elsewhere != 0 {
		t.Errorf("the server followed the agent's redirect")
	}
	if len(got) != 2 {
		t.Fatalf("the fake agent got %d requests, want 2", len(got))
	}
	for _, r := range got {
		h := r.Header.Get("Authorization")
		if strings.Contains(strings.ToLower(h), "bearer") || strings.Contains(h, testAdmin) || strings.Contains(h, testLogKey) {
			t.Errorf("the server sent a secret: Authorization %q", h)
		}
		now := time.Now()
		if err := api.VerifyLogRequest(h, testLogKey, r.Method, r.URL.EscapedPath(), r.URL.RawQuery, "n1", now); err != nil {
			t.Errorf("%s: the signature does not verify: %v", r.URL, err)
		}
		if err := api.VerifyLogRequest(h, testLogKey, r.Method, "/logs/fabrikam/other/0", r.URL.RawQuery, "n1", now); err == nil {
			t.Errorf("the signature of %s opens another path", r.URL)
		}
		if err := api.VerifyLogRequest(h, testLogKey, r.Method, r.URL.EscapedPath(), r.URL.RawQuery, "n2", now); err == nil {
			t.Errorf("the signature for n1 is accepted by n2")
		}
		if err := api.VerifyLogRequest(h, testLogKey, r.Method, r.URL.EscapedPath(), r.URL.RawQuery, "n1", now.Add(api.LogSigLifetime+time.Second)); err == nil {
			t.Errorf("the signature does not expire")
		}
	}
}

// evict puts workload name of contoso back to pending, as a preemption.
func (f *agentFleet) evict(name string) {
	f.t.Helper()
	err := f.st.Update(f.ctx, func(tx store.WriteTx) error {
		x, err := store.Get[store.Workload](tx, store.WorkloadKey("contoso", name))
		if err != nil {
			return err
		}
		x.State, x.Running = store.StatePending, nil
		x.Preemptions++
		if err := store.Put(tx, x, x.Meta.Revision); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: time.Now(), Type: "WorkloadPreempted", Object: "workloads/" + x.Key(), Tenant: "contoso"})
	})
	if err != nil {
		f.t.Fatal(err)
	}
}
