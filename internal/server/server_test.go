package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/arbiterhq/arbiter/internal/alert"
	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
)

const testAdmin = "admin-secret-for-tests-0123456789"

// testConfig: eastus has 4 A100 machines in one block and 2 H100
// machines; westus2 has 2 A100 machines.
const testConfig = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 4}]
            - name: eus-h
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 2}]
    - name: westus2
      zones:
        - name: "1"
          blocks:
            - name: wus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 2}]
tenants:
  - name: customers
  - name: contoso
    parent: customers
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 16, limit: 16}
      - {flavor: A100-80G, region: westus2, limit: 16}
      - {flavor: H100-80G, region: eastus, limit: 16}
  - name: fabrikam
    parent: customers
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 8, limit: 32}
      - {flavor: H100-80G, region: eastus, limit: 16}
`

type harness struct {
	t     testing.TB
	s     *Server
	st    *store.BoltStore
	url   string
	admin *client.Client
	ctx   context.Context
}

func newHarness(t testing.TB, cfg string, o Options) *harness {
	t.Helper()
	return newHarnessOver(t, cfg, o, nil)
}

// newHarnessOver is newHarness with the server's store wrap(st) (nil:
// st itself), to inject faults around the real store.
func newHarnessOver(t testing.TB, cfg string, o Options, wrap func(*store.BoltStore) store.Store) *harness {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "arbiter.db"), &store.BoltOptions{MaxBatchDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if cfg != "" {
		c, err := config.Parse("test.yaml", []byte(cfg))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Seed(ctx, st, c, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	o.Store, o.AdminToken = st, testAdmin
	if wrap != nil {
		o.Store = wrap(st)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if _, bench := t.(*testing.B); !bench && o.checkCache == nil {
		o.checkCache = checkSchedCache(t)
	}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return &harness{t: t, s: s, st: st, url: hs.URL, admin: client.New(hs.URL, testAdmin), ctx: ctx}
}

// checkSchedCache makes every cycle of a test's server check the core's
// contract with the server's sched.Cache (the same plan as without it);
// differences are reported when the test ends (a cycle may run on the
// server's own goroutine).
func checkSchedCache(t testing.TB) func(cached, fresh sched.Plan) {
	var mu sync.Mutex
	var diffs []string
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range diffs {
			t.Errorf("the core's plan with the server's sched.Cache differs from the plan without it (-without +with):\n%s", d)
		}
	})
	return func(cached, fresh sched.Plan) {
		if !reflect.DeepEqual(cached, fresh) {
			mu.Lock()
			defer mu.Unlock()
			diffs = append(diffs, cmp.Diff(fresh, cached, cmp.Exporter(func(reflect.Type) bool { return true })))
		}
	}
}

// tenant creates a token for the tenant and returns its client.
func (h *harness) tenant(name string) *client.Client {
	h.t.Helper()
	tok, err := h.admin.CreateToken(h.ctx, name, "test")
	if err != nil {
		h.t.Fatal(err)
	}
	return client.New(h.url, tok.Secret)
}

func spec(name string, gpus, replicas int, regions ...string) api.WorkloadSpec {
	if len(regions) == 0 {
		regions = []string{"eastus"}
	}
	return api.WorkloadSpec{Name: name, GPUs: api.GPUs(gpus * 1000), Replicas: replicas, Flavors: []string{"A100-80G"}, Regions: regions}
}

func apiCode(err error) string {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestSubmitScheduleWhyUsage(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	contoso := h.tenant("contoso")
	ctx := h.ctx
	if _, err := contoso.Submit(ctx, "contoso", spec("a", 8, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := contoso.Submit(ctx, "contoso", spec("b", 8, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := contoso.Submit(ctx, "contoso", spec("a", 8, 1)); apiCode(err) != api.CodeConflict {
		t.Fatalf("duplicate submit: %v, want Conflict", err)
	}
	w, err := contoso.Why(ctx, "contoso", "a")
	if err != nil || !strings.Contains(w.Reason, "not yet considered") {
		t.Fatalf("why before a cycle: %+v %v", w, err)
	}
	h.s.Cycle(ctx)
	a, err := contoso.Workload(ctx, "contoso", "a")
	if err != nil || a.State != "Running" || len(a.Running.Replicas) != 2 {
		t.Fatalf("a after a cycle: %+v %v", a, err)
	}
	why, err := contoso.Why(ctx, "contoso", "b")
	if err != nil || why.State != "Pending" || why.Code != "QuotaLimit" || !strings.Contains(why.Reason, "16/16") {
		t.Fatalf("why b: %+v %v", why, err)
	}
	// The structured reasons the text is rendered from.
	var blockers []map[string]any
	if err := json.Unmarshal(why.Blockers, &blockers); err != nil || len(blockers) == 0 {
		t.Fatalf("why b's blockers %s: %v", why.Blockers, err)
	}
	if b := blockers[0]; b["code"] != "QuotaLimit" || b["tenant"] != "contoso" || b["region"] != "eastus" || b["limit"] == nil || b["requested"] == nil {
		t.Errorf("why b's first blocker: %v", b)
	}
	us, err := contoso.Usage(ctx, "contoso", "eastus")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range us {
		lim := "unlimited"
		if u.Limit != nil {
			lim = num(*u.Limit)
		}
		got[u.Name] = num(u.CurrentValue) + "/" + lim
	}
	if got["A100-80G GPUs"] != "16/16" || got["H100-80G GPUs"] != "0/16" || len(us) != 2 {
		t.Fatalf("usage eastus: %v", got)
	}
	// Cancel a: b runs at the next cycle.
	if _, err := contoso.Cancel(ctx, "contoso", "a"); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(ctx)
	b, _ := contoso.Workload(ctx, "contoso", "b")
	if b.State != "Running" {
		t.Fatalf("b after a was cancelled: %s", b.State)
	}
	ev, err := contoso.Events(ctx, 0, 0, 0)
	if err != nil || len(ev.Items) < 5 {
		t.Fatalf("events: %+v %v", ev, err)
	}
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func asAPI(err error, ae **api.Error) bool { return errors.As(err, ae) }

// TestOpenAPICoversRoutes: every route is described, every description is
// a route, and the document is valid JSON naming every path.
func TestOpenAPICoversRoutes(t *testing.T) {
	h := newHarness(t, "", Options{})
	routes := map[string]bool{}
	for _, rt := range h.s.apiRoutes() {
		routes[rt.pattern] = true
	}
	for _, rt := range h.s.apiRoutes() {
		if rt.doc.summary == "" || rt.auth == 0 {
			t.Errorf("route %s has no OpenAPI description or no access rule", rt.pattern)
		}
	}
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(h.s.openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for p := range routes {
		method, path, _ := strings.Cut(p, " ")
		if doc.Paths[path][strings.ToLower(method)] == nil {
			t.Errorf("openapi.json lacks %s", p)
		}
	}
}

// TestRevokedTokenRefusedAtOnce: tokens are cached between requests, but a
// token revoked (its tenant deleted) is refused on the very next request,
// and a token created after the cache was filled works at once.
func TestRevokedTokenRefusedAtOnce(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	if _, err := h.admin.CreateTenant(h.ctx, api.Tenant{Name: "gone"}); err != nil {
		t.Fatal(err)
	}
	c := h.tenant("gone")
	for i := 0; i < 3; i++ { // warm the cache
		if _, err := c.Usage(h.ctx, "gone", ""); err != nil {
			t.Fatal(err)
		}
	}
	later := h.tenant("contoso")
	if _, err := later.Usage(h.ctx, "contoso", ""); err != nil {
		t.Fatalf("token created after the cache was filled: %v", err)
	}
	if _, err := c.Usage(h.ctx, "gone", ""); err != nil { // cached again
		t.Fatal(err)
	}
	if err := h.admin.DeleteTenant(h.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Usage(h.ctx, "gone", "")
	if code := apiCode(err); code != api.CodeUnauthenticated {
		t.Fatalf("revoked token: got %v (code %q), want %s", err, code, api.CodeUnauthenticated)
	}
}

// testClock is a wall clock tests move by hand (Options.Clock).
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

// newTestClock starts at the real time (the harness seeds the config at
// the real time, so events stay in order).
func newTestClock() *testClock { return &testClock{now: time.Now().UTC()} }

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *testClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// webhookSink is a loopback webhook: every POSTed alert payload arrives on
// the channel; a request that is not a JSON POST fails the test.
func webhookSink(t *testing.T) (string, <-chan alert.Payload) {
	t.Helper()
	got := make(chan alert.Payload, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p alert.Payload
		b, _ := io.ReadAll(r.Body)
		if r.Method != "POST" || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &p) != nil {
			t.Errorf("webhook got %s %q", r.Method, b)
		}
		got <- p
	}))
	t.Cleanup(hook.Close)
	return hook.URL, got
}
