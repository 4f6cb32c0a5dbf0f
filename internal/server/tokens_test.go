package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/store"
)

// restartOn opens a new server over the harness's store with secret as
// the admin token file's secret, as a restarted process would.
func restartOn(t *testing.T, h *harness, secret string) string {
	t.Helper()
	s, err := New(h.ctx, Options{Store: h.st, AdminToken: secret, RateLimit: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestTokensSurviveRestart (issue 12, item 9): a restart with the same
// admin secret changes no token; one with a new secret replaces the
// bootstrap admin token only. Node, tenant, metrics and other admin
// tokens keep working (today's code deleted every token without a
// tenant, node tokens included, on every start).
func TestTokensSurviveRestart(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	node, err := h.admin.CreateNodeToken(h.ctx, "eus-a-n0000", "")
	if err != nil {
		t.Fatal(err)
	}
	ten, err := h.admin.CreateToken(h.ctx, "contoso", "ci")
	if err != nil {
		t.Fatal(err)
	}
	var created []api.Token
	for _, role := range []string{store.RoleMetrics, store.RoleAdmin} {
		tok, err := h.admin.CreateTokenOf(h.ctx, api.TokenCreate{Role: role})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, tok)
	}
	before, err := h.admin.Tokens(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	check := func(url string, secret, wantRole string) {
		t.Helper()
		me, err := client.New(url, secret).WhoAmI(h.ctx)
		if err != nil || me.Role != wantRole {
			t.Fatalf("%s token after a restart: %+v %v", wantRole, me, err)
		}
	}
	all := func(url string) {
		t.Helper()
		check(url, node.Secret, store.RoleNode)
		check(url, ten.Secret, store.RoleTenant)
		check(url, created[0].Secret, store.RoleMetrics)
		check(url, created[1].Secret, store.RoleAdmin)
	}
	for i := range 3 {
		url := restartOn(t, h, testAdmin)
		all(url)
		check(url, testAdmin, store.RoleAdmin)
		after, err := client.New(url, testAdmin).Tokens(h.ctx)
		if err != nil || fmt.Sprint(ids(after)) != fmt.Sprint(ids(before)) {
			t.Fatalf("restart %d changed the tokens: %v -> %v (%v)", i, ids(before), ids(after), err)
		}
	}
	// A new admin secret replaces the bootstrap token alone.
	const newAdmin = "another-admin-secret-0123456789"
	url := restartOn(t, h, newAdmin)
	all(url)
	if _, err := client.New(url, testAdmin).WhoAmI(h.ctx); apiCode(err) != api.CodeUnauthenticated {
		t.Fatalf("the old admin secret after it was replaced: %v", err)
	}
	me, err := client.New(url, newAdmin).WhoAmI(h.ctx)
	if err != nil || me.TokenID != bootstrapAdminID {
		t.Fatalf("the new admin secret: %+v %v", me, err)
	}
	// The admin secret may not be another token's.
	if _, err := New(h.ctx, Options{Store: h.st, AdminToken: ten.Secret}); err == nil {
		t.Fatal("a tenant token's secret became the admin token")
	}
}

func ids(ts []api.Token) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID+":"+t.Role+":"+t.Tenant+t.Node)
	}
	return out
}

// TestTokenLifecycle (issue 12, item 8): tokens are listed with ID, name,
// role, creation, last use and expiry, never their secret; revoked and
// rotated secrets are refused at the next request; expired tokens are
// refused; deleting a node or a tenant revokes its tokens.
func TestTokenLifecycle(t *testing.T) {
	var now atomic.Pointer[time.Time]
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now.Store(&t0)
	clock := func() time.Time { return *now.Load() }
	advance := func(d time.Duration) { n := clock().Add(d); now.Store(&n) }
	h := newHarness(t, testConfig, Options{RateLimit: -1, Clock: clock})
	ctx := h.ctx

	tok, err := h.admin.CreateTokenOf(ctx, api.TokenCreate{Role: "tenant", Tenant: "contoso", Name: "ci", ExpiresIn: api.Duration(time.Hour)})
	if err != nil || !strings.HasPrefix(tok.ID, "tok_") || tok.Secret == "" || tok.Role != "tenant" || !tok.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("create: %+v %v", tok, err)
	}
	c := client.New(h.url, tok.Secret)
	advance(time.Minute)
	if _, err := c.Workloads(ctx, "contoso", ""); err != nil {
		t.Fatal(err)
	}
	list, err := h.admin.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got *api.Token
	for i := range list {
		if list[i].Secret != "" {
			t.Fatalf("a list shows a secret: %+v", list[i])
		}
		if list[i].ID == tok.ID {
			got = &list[i]
		}
	}
	if got == nil || got.Name != "ci" || got.Tenant != "contoso" || !got.LastUsedAt.Equal(t0.Add(time.Minute)) || !got.CreatedAt.Equal(t0) {
		t.Fatalf("listed: %+v in %v", got, ids(list))
	}
	// Last use reaches the store at a flush.
	if err := h.s.flushLastUse(ctx); err != nil {
		t.Fatal(err)
	}
	h.st.View(ctx, func(tx store.ReadTx) error {
		st, err := store.Get[store.Token](tx, HashToken(tok.Secret))
		if err != nil || !st.LastUsedAt.Equal(t0.Add(time.Minute)) {
			t.Errorf("stored last use: %+v %v", st, err)
		}
		return nil
	})

	// Rotation: same ID, name and role; the old secret is refused at once.
	rot, err := h.admin.RotateToken(ctx, tok.ID)
	if err != nil || rot.ID != tok.ID || rot.Name != "ci" || rot.Secret == "" || rot.Secret == tok.Secret {
		t.Fatalf("rotate: %+v %v", rot, err)
	}
	if _, err := c.WhoAmI(ctx); apiCode(err) != api.CodeUnauthenticated {
		t.Fatalf("the rotated-away secret: %v", err)
	}
	c = client.New(h.url, rot.Secret)
	if me, err := c.WhoAmI(ctx); err != nil || me.TokenID != tok.ID {
		t.Fatalf("the rotated secret: %+v %v", me, err)
	}
	// Expiry.
	advance(time.Hour)
	var ae *api.Error
	if _, err := c.WhoAmI(ctx); !asAPI(err, &ae) || ae.Status != http.StatusUnauthorized || ae.Message != "token expired" {
		t.Fatalf("an expired token: %v", err)
	}
	// Revocation.
	t2, err := h.admin.CreateToken(ctx, "contoso", "")
	if err != nil {
		t.Fatal(err)
	}
	c2 := client.New(h.url, t2.Secret)
	if _, err := c2.WhoAmI(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.admin.RevokeToken(ctx, t2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.WhoAmI(ctx); apiCode(err) != api.CodeUnauthenticated {
		t.Fatalf("a revoked token: %v", err)
	}
	if err := h.admin.RevokeToken(ctx, t2.ID); apiCode(err) != api.CodeNotFound {
		t.Fatalf("revoking twice: %v", err)
	}
	if err := h.admin.RevokeToken(ctx, bootstrapAdminID); apiCode(err) != api.CodeConflict {
		t.Fatalf("revoking the admin token file's token: %v", err)
	}
	if _, err := h.admin.RotateToken(ctx, bootstrapAdminID); apiCode(err) != api.CodeConflict {
		t.Fatalf("rotating the admin token file's token: %v", err)
	}

	// Deleting a node revokes its tokens.
	nt, err := h.admin.CreateTokenOf(ctx, api.TokenCreate{Role: "node", Node: "eus-a-n0003"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.admin.DeleteNode(ctx, "eus-a-n0003"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(h.url, nt.Secret).WhoAmI(ctx); apiCode(err) != api.CodeUnauthenticated {
		t.Fatalf("the token of a deleted node: %v", err)
	}
	// Deleting a tenant revokes its tokens.
	if _, err := h.admin.CreateTenant(ctx, api.Tenant{Name: "temp", Parent: "customers"}); err != nil {
		t.Fatal(err)
	}
	tt, err := h.admin.CreateToken(ctx, "temp", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.admin.DeleteTenant(ctx, "temp"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(h.url, tt.Secret).WhoAmI(ctx); apiCode(err) != api.CodeUnauthenticated {
		t.Fatalf("the token of a deleted tenant: %v", err)
	}
}

// TestTenantTokenSelfService: a tenant token lists, creates, rotates and
// revokes its own tenant's tokens and nothing else; what it creates
// expires no later than itself.
func TestTenantTokenSelfService(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	ctx := h.ctx
	mine, err := h.admin.CreateTokenOf(ctx, api.TokenCreate{Role: "tenant", Tenant: "contoso", ExpiresIn: api.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := h.admin.CreateToken(ctx, "fabrikam", "")
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(h.url, mine.Secret)
	child, err := c.CreateTokenOf(ctx, api.TokenCreate{Role: "tenant", ExpiresIn: api.Duration(24 * time.Hour)})
	if err != nil || child.Tenant != "contoso" || child.ExpiresAt.After(mine.ExpiresAt) {
		t.Fatalf("a tenant's own token: %+v %v (creator expires %v)", child, err, mine.ExpiresAt)
	}
	for _, bad := range []struct {
		req  api.TokenCreate
		code string
	}{
		{api.TokenCreate{Role: "tenant", Tenant: "fabrikam"}, api.CodeNotFound},
		{api.TokenCreate{Role: "admin"}, api.CodeForbidden},
		{api.TokenCreate{Role: "metrics"}, api.CodeForbidden},
		{api.TokenCreate{Role: "node", Node: "eus-a-n0000"}, api.CodeForbidden},
	} {
		if _, err := c.CreateTokenOf(ctx, bad.req); apiCode(err) != bad.code {
			t.Errorf("tenant creates %+v: %v, want %s", bad.req, err, bad.code)
		}
	}
	list, err := c.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range list {
		if x.Tenant != "contoso" || x.Role != "tenant" {
			t.Errorf("a tenant lists another's token: %+v", x)
		}
	}
	if len(list) != 2 {
		t.Errorf("contoso lists %v, want its 2 tokens", ids(list))
	}
	if err := c.RevokeToken(ctx, theirs.ID); apiCode(err) != api.CodeNotFound {
		t.Errorf("contoso revokes fabrikam's token: %v", err)
	}
	if _, err := c.RotateToken(ctx, bootstrapAdminID); apiCode(err) != api.CodeNotFound {
		t.Errorf("contoso rotates the admin token: %v", err)
	}
	if err := c.RevokeToken(ctx, child.ID); err != nil {
		t.Errorf("contoso revokes its own token: %v", err)
	}
	// Node and metrics tokens manage no tokens.
	nt, _ := h.admin.CreateNodeToken(ctx, "eus-a-n0000", "")
	if _, err := client.New(h.url, nt.Secret).Tokens(ctx); apiCode(err) != api.CodeForbidden {
		t.Errorf("a node token lists tokens: %v", err)
	}
}

// TestTokenCreateValidation: bad requests name their field.
func TestTokenCreateValidation(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	for _, c := range []struct {
		req   api.TokenCreate
		field string
	}{
		{api.TokenCreate{Role: "root"}, "role"},
		{api.TokenCreate{Role: "tenant"}, "tenant"},
		{api.TokenCreate{Role: "node"}, "node"},
		{api.TokenCreate{Role: "node", Node: "a/b"}, "node"},
		{api.TokenCreate{Role: "admin", Tenant: "contoso"}, "tenant"},
		{api.TokenCreate{Role: "metrics", Node: "n1"}, "node"},
		{api.TokenCreate{Role: "tenant", Tenant: "contoso", Name: "a b"}, "name"},
		{api.TokenCreate{Role: "tenant", Tenant: "contoso", ExpiresIn: api.Duration(time.Hour), ExpiresAt: time.Now().Add(time.Hour)}, "expires_at"},
		{api.TokenCreate{Role: "tenant", Tenant: "contoso", ExpiresAt: time.Now().Add(-time.Hour)}, "expires_at"},
	} {
		_, err := h.admin.CreateTokenOf(h.ctx, c.req)
		var ae *api.Error
		if !asAPI(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != c.field {
			t.Errorf("%+v: %v, want 400 on %s", c.req, err, c.field)
		}
	}
	if _, err := h.admin.CreateTokenOf(h.ctx, api.TokenCreate{Role: "tenant", Tenant: "ghost"}); apiCode(err) != api.CodeNotFound {
		t.Errorf("a token of a tenant that does not exist: %v", err)
	}
}

// TestMetricsNeedToken (issue 12, item 5): /metrics names tenants, so the
// main listener answers it to the admin and metrics tokens only; the
// metrics listener (serve --metrics-listen) serves it alone, without one.
func TestMetricsNeedToken(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	mt, err := h.admin.CreateTokenOf(h.ctx, api.TokenCreate{Role: "metrics", Name: "prom"})
	if err != nil {
		t.Fatal(err)
	}
	ten, _ := h.admin.CreateToken(h.ctx, "contoso", "")
	nt, _ := h.admin.CreateNodeToken(h.ctx, "eus-a-n0000", "")
	scrape := func(url, secret string) (int, string) {
		req, _ := http.NewRequest("GET", url, nil)
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		who, secret string
		want        int
	}{
		{"no token", "", 401},
		{"unknown token", "arb_nope-nope-nope-nope", 401},
		{"tenant", ten.Secret, 403},
		{"node", nt.Secret, 403},
		{"metrics", mt.Secret, 200},
		{"admin", testAdmin, 200},
	} {
		code, body := scrape(h.url+"/metrics", c.secret)
		if code != c.want {
			t.Errorf("/metrics as %s: %d, want %d", c.who, code, c.want)
		}
		if code != 200 && strings.Contains(body, "contoso") {
			t.Errorf("/metrics as %s names a tenant: %s", c.who, body)
		}
		if code == 200 && !strings.Contains(body, "arbiter_") {
			t.Errorf("/metrics as %s: no metrics", c.who)
		}
	}
	// A metrics token does nothing else.
	if _, err := client.New(h.url, mt.Secret).Tenants(h.ctx); apiCode(err) != api.CodeForbidden {
		t.Errorf("a metrics token lists tenants: %v", err)
	}
	// The metrics listener: /metrics without a token, nothing else.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := ln.Addr().String()
	ln.Close()
	s, err := New(h.ctx, Options{Store: h.st, AdminToken: testAdmin, MetricsListen: maddr, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.Serve(ctx, "127.0.0.1:0", "") })
	defer func() { cancel(); wg.Wait() }()
	var code int
	var body string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + maddr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			code, body = resp.StatusCode, string(b)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code != 200 || !strings.Contains(body, "arbiter_") {
		t.Fatalf("metrics listener: %d %.200s", code, body)
	}
	if code, _ := scrape("http://"+maddr+"/v1/tenants", testAdmin); code != 404 {
		t.Errorf("the metrics listener serves the API: %d", code)
	}
}

// TestSourceRateLimit (issue 12, item 16): requests with unknown tokens
// are limited per source address before authentication: a flood from one
// address gets 429 with Retry-After, and the address stays refused while
// it is out of budget. Valid tokens do not spend the address's budget.
func TestSourceRateLimit(t *testing.T) {
	var now atomic.Pointer[time.Time]
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now.Store(&t0)
	clock := func() time.Time { return *now.Load() }
	h := newHarness(t, testConfig, Options{RateLimit: -1, SourceRateLimit: 5, SourceBurst: 10, Clock: clock})
	call := func(secret string) *http.Response {
		req, _ := http.NewRequest("GET", h.url+"/v1/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i := range 200 {
		if r := call(testAdmin); r.StatusCode != 200 {
			t.Fatalf("valid request %d: %d", i, r.StatusCode)
		}
	}
	statuses := map[int]int{}
	var retry string
	for i := range 1000 {
		r := call(fmt.Sprintf("arb_guess-%d-xxxxxxxxxxxx", i))
		statuses[r.StatusCode]++
		if r.StatusCode == 429 {
			retry = r.Header.Get("Retry-After")
		}
	}
	if statuses[401] != 10 || statuses[429] != 990 || retry == "" {
		t.Fatalf("1000 unknown tokens from one address: %v (Retry-After %q), want 10 × 401 then 429", statuses, retry)
	}
	if r := call(testAdmin); r.StatusCode != 429 {
		t.Fatalf("the flooding address with a valid token: %d, want 429 before authentication", r.StatusCode)
	}
	n := t0.Add(time.Second)
	now.Store(&n)
	if r := call(testAdmin); r.StatusCode != 200 {
		t.Fatalf("after the budget refilled: %d", r.StatusCode)
	}
}

// TestLimiterBounded: a flood of distinct keys keeps the limiter's memory
// bounded; IPv6 sources count by their /64.
func TestLimiterBounded(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	l := newLimiter(1, 2, func() time.Time { return now })
	l.max = 100
	for i := range 10_000 {
		now = t0.Add(time.Duration(i) * time.Millisecond)
		l.allow(fmt.Sprintf("k%d", i))
		if len(l.b) > l.max {
			t.Fatalf("%d buckets, max %d", len(l.b), l.max)
		}
	}
	if got := sourceOf(&http.Request{RemoteAddr: "[2001:db8:1:2:3:4:5:6]:443"}); got != "2001:db8:1:2::/64" {
		t.Errorf("IPv6 source %q, want its /64", got)
	}
	if got := sourceOf(&http.Request{RemoteAddr: "[::ffff:10.1.2.3]:80"}); got != "10.1.2.3" {
		t.Errorf("mapped IPv4 source %q", got)
	}
}
