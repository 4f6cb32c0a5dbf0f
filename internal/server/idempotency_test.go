package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
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

// submitRaw posts a submission with the given Idempotency-Key values and
// returns the status, the replay header and the body.
func submitRaw(t *testing.T, url, tok, tenant string, sp api.WorkloadSpec, keys ...string) (int, string, []byte) {
	t.Helper()
	b, _ := json.Marshal(sp)
	req, err := http.NewRequest("POST", url+"/v1/tenants/"+tenant+"/workloads", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	for _, k := range keys {
		req.Header.Add(api.HeaderIdempotencyKey, k)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(api.HeaderIdempotentReplayed), data
}

func (h *harness) secret(tenant string) string {
	h.t.Helper()
	tok, err := h.admin.CreateToken(h.ctx, tenant, "idem")
	if err != nil {
		h.t.Fatal(err)
	}
	return tok.Secret
}

func countWorkloads(t *testing.T, h *harness, tenant string) int {
	t.Helper()
	ws, err := h.admin.Workloads(h.ctx, tenant, "")
	if err != nil {
		t.Fatal(err)
	}
	return len(ws)
}

// TestIdempotentSubmitReplays: the same key and body answers the first
// workload (201, same shape, Idempotent-Replayed) and creates nothing;
// the same key with another body is a 422 naming Idempotency-Key.
func TestIdempotentSubmitReplays(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	tok := h.secret("contoso")
	const key = "0123456789abcdef0123456789abcdef"
	code, replayed, first := submitRaw(t, h.url, tok, "contoso", spec("a", 8, 1), key)
	if code != http.StatusCreated || replayed != "" {
		t.Fatalf("first submit: %d %q %s", code, replayed, first)
	}
	code, replayed, again := submitRaw(t, h.url, tok, "contoso", spec("a", 8, 1), key)
	if code != http.StatusCreated || replayed != "true" {
		t.Fatalf("retried submit: %d replayed=%q %s", code, replayed, again)
	}
	var w1, w2 api.Workload
	if json.Unmarshal(first, &w1) != nil || json.Unmarshal(again, &w2) != nil || w1.Name != "a" || w2.Name != w1.Name || w2.Revision != w1.Revision || w2.Tenant != "contoso" {
		t.Fatalf("the replay differs from the first answer:\n%s\n%s", first, again)
	}
	// The same key with another body (another name, or the same name with
	// more GPUs) is refused, naming the header.
	for _, sp := range []api.WorkloadSpec{spec("b", 8, 1), spec("a", 16, 1)} {
		code, _, body := submitRaw(t, h.url, tok, "contoso", sp, key)
		var ae api.Error
		json.Unmarshal(body, &ae)
		if code != http.StatusUnprocessableEntity || ae.Field != api.HeaderIdempotencyKey || ae.Code != api.CodeIdempotencyMismatch {
			t.Fatalf("same key, other body %+v: %d %s", sp, code, body)
		}
	}
	if n := countWorkloads(t, h, "contoso"); n != 1 {
		t.Fatalf("%d workloads, want 1", n)
	}
	// One submission event.
	ev, err := h.admin.Events(h.ctx, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ev.Items {
		if e.Type == store.EventWorkloadSubmitted.String() {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d WorkloadSubmitted events, want 1", n)
	}
	// Without a key a repeat is the old 409.
	if code, _, _ := submitRaw(t, h.url, tok, "contoso", spec("a", 8, 1)); code != http.StatusConflict {
		t.Fatalf("a repeat without a key: %d, want 409", code)
	}
}

// TestIdempotencyKeyTenantScoped (hostile): tenant B sending tenant A's
// key gets its own workload, with the same body or another, and learns
// nothing of A's.
func TestIdempotencyKeyTenantScoped(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	a, b := h.secret("contoso"), h.secret("fabrikam")
	// With A's key and another body (A's scope would answer 422), and with
	// A's key and A's body (A's scope would replay A's workload).
	for i, sp := range []api.WorkloadSpec{spec("other", 8, 1), spec("secret-job", 8, 1)} {
		key := []string{"shared-key-0001", "shared-key-0002"}[i]
		if code, _, body := submitRaw(t, h.url, a, "contoso", spec([]string{"secret-first", "secret-job"}[i], 8, 1), key); code != http.StatusCreated {
			t.Fatalf("A: %d %s", code, body)
		}
		code, replayed, body := submitRaw(t, h.url, b, "fabrikam", sp, key)
		var w api.Workload
		json.Unmarshal(body, &w)
		if code != http.StatusCreated || replayed != "" || w.Tenant != "fabrikam" || strings.Contains(string(body), "contoso") {
			t.Fatalf("B with A's key %s: %d replayed=%q %s", sp.Name, code, replayed, body)
		}
	}
	const key = "shared-key-0001"
	// B may not aim at A's path either (404, as for any other tenant's).
	if code, _, _ := submitRaw(t, h.url, b, "contoso", spec("secret-job", 8, 1), key); code != http.StatusNotFound {
		t.Fatalf("B on A's path: %d, want 404", code)
	}
	if na, nb := countWorkloads(t, h, "contoso"), countWorkloads(t, h, "fabrikam"); na != 2 || nb != 2 {
		t.Fatalf("contoso %d, fabrikam %d workloads; want 2 and 2", na, nb)
	}
}

// TestIdempotencyKeyMalformed: a repeated, empty, oversized or
// ill-charactered key is a 400 naming Idempotency-Key, and nothing is
// created.
func TestIdempotencyKeyMalformed(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	tok := h.secret("contoso")
	cases := map[string][]string{
		"two headers": {"k1", "k2"},
		"empty":       {""},
		"quotes only": {`""`},
		"oversized":   {strings.Repeat("a", api.MaxIdempotencyKey+1)},
		"slash":       {"tenant/key"},
		"space":       {"a b"},
		"comma":       {"a,b"},
		"non-ascii":   {"clé"},
	}
	for name, keys := range cases {
		code, _, body := submitRaw(t, h.url, tok, "contoso", spec("a", 8, 1), keys...)
		var ae api.Error
		json.Unmarshal(body, &ae)
		if code != http.StatusBadRequest || ae.Field != api.HeaderIdempotencyKey {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
	if n := countWorkloads(t, h, "contoso"); n != 0 {
		t.Fatalf("%d workloads created by refused submissions", n)
	}
	// The longest key, and a quoted one, are fine.
	if code, _, body := submitRaw(t, h.url, tok, "contoso", spec("a", 8, 1), strings.Repeat("k", api.MaxIdempotencyKey)); code != http.StatusCreated {
		t.Fatalf("a %d-byte key: %d %s", api.MaxIdempotencyKey, code, body)
	}
	if code, _, body := submitRaw(t, h.url, tok, "contoso", spec("b", 8, 1), `"quoted-key"`); code != http.StatusCreated {
		t.Fatalf("a quoted key: %d %s", code, body)
	}
	if code, replayed, _ := submitRaw(t, h.url, tok, "contoso", spec("b", 8, 1), "quoted-key"); code != http.StatusCreated || replayed != "true" {
		t.Fatalf("the quoted key sent bare: %d %q, want a replay", code, replayed)
	}
}

// FuzzParseIdempotencyKey: any header value either parses to a bounded
// key of the allowed characters, which parses to itself again, or is a
// 400 naming the header.
func FuzzParseIdempotencyKey(f *testing.F) {
	for _, s := range []string{"", "k", "0123456789abcdef0123456789abcdef", `"q"`, `"`, `""`, "a/b", "a b", " x ", strings.Repeat("z", 200), "é", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{}
		h.Set(api.HeaderIdempotencyKey, v)
		k, err := parseIdempotencyKey(h)
		if err != nil {
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != api.HeaderIdempotencyKey {
				t.Fatalf("%q: %v", v, err)
			}
			return
		}
		if k == "" || len(k) > api.MaxIdempotencyKey {
			t.Fatalf("%q parsed to %q", v, k)
		}
		for i := 0; i < len(k); i++ {
			if !keyChar(k[i]) {
				t.Fatalf("%q parsed to %q with %q", v, k, k[i])
			}
		}
		h.Set(api.HeaderIdempotencyKey, k)
		if k2, err := parseIdempotencyKey(h); err != nil || k2 != k {
			t.Fatalf("%q does not parse to itself: %q %v", k, k2, err)
		}
	})
}

// TestIdempotencyKeysPrunedAndBounded: keys are kept 24 h then pruned
// (and the key is free again); a tenant holds at most
// maxIdempotencyKeys, the oldest forgotten first.
func TestIdempotencyKeysPrunedAndBounded(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	tok := h.secret("contoso")
	if code, _, body := submitRaw(t, h.url, tok, "contoso", spec("a", 8, 1), "key-a"); code != http.StatusCreated {
		t.Fatalf("%d %s", code, body)
	}
	keys := func() int64 {
		var n int64
		h.st.View(h.ctx, func(tx store.ReadTx) error { n = store.IdempotencyKeys(tx, "contoso"); return nil })
		return n
	}
	if n, err := h.s.PruneIdempotencyKeys(h.ctx, time.Now().Add(time.Hour)); err != nil || n != 0 || keys() != 1 {
		t.Fatalf("an hour on: pruned %d (%v), %d kept; want 0 and 1", n, err, keys())
	}
	if n, err := h.s.PruneIdempotencyKeys(h.ctx, time.Now().Add(idempotencyTTL+time.Minute)); err != nil || n != 1 || keys() != 0 {
		t.Fatalf("a day on: pruned %d (%v), %d kept; want 1 and 0", n, err, keys())
	}
	// The key is free again: another body is a new submission, not a 422.
	if code, replayed, body := submitRaw(t, h.url, tok, "contoso", spec("b", 8, 1), "key-a"); code != http.StatusCreated || replayed != "" {
		t.Fatalf("the pruned key again: %d %q %s", code, replayed, body)
	}

	defer func(n int) { maxIdempotencyKeys = n }(maxIdempotencyKeys)
	maxIdempotencyKeys = 2
	// key-a (on b) and key-c are held; key-d makes three: key-a, the
	// oldest, is forgotten, and the submission goes through.
	for _, sp := range []struct{ name, key string }{{"c", "key-c"}, {"d", "key-d"}} {
		if code, _, body := submitRaw(t, h.url, tok, "contoso", spec(sp.name, 8, 1), sp.key); code != http.StatusCreated {
			t.Fatalf("%s: %d %s", sp.name, code, body)
		}
	}
	if keys() != 2 {
		t.Fatalf("%d keys held, want the bound, 2", keys())
	}
	replays := func(name, key string) bool {
		_, rp, _ := submitRaw(t, h.url, tok, "contoso", spec(name, 8, 1), key)
		return rp == "true"
	}
	if replays("b", "key-a") || !replays("c", "key-c") || !replays("d", "key-d") {
		t.Fatal("past the bound the oldest key should be forgotten, the newer ones kept")
	}
	// Another tenant has its own bound.
	if code, _, body := submitRaw(t, h.url, h.secret("fabrikam"), "fabrikam", spec("d", 8, 1), "key-d"); code != http.StatusCreated {
		t.Fatalf("fabrikam: %d %s", code, body)
	}
}

// TestIdempotentSubmitConcurrent: the same submission sent many times at
// once creates one workload; every answer is that workload.
func TestIdempotentSubmitConcurrent(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	tok := h.secret("contoso")
	var wg sync.WaitGroup
	var created, replayed atomic.Int32
	for range 8 {
		wg.Go(func() {
			code, rp, body := submitRaw(t, h.url, tok, "contoso", spec("a", 8, 1), "same-key")
			switch {
			case code == http.StatusCreated && rp == "true":
				replayed.Add(1)
			case code == http.StatusCreated:
				created.Add(1)
			default:
				t.Errorf("%d %s", code, body)
			}
		})
	}
	wg.Wait()
	if created.Load() != 1 || replayed.Load() != 7 || countWorkloads(t, h, "contoso") != 1 {
		t.Fatalf("created %d, replayed %d, %d workloads; want 1, 7, 1", created.Load(), replayed.Load(), countWorkloads(t, h, "contoso"))
	}
}

// TestSubmitRetriedAfterDroppedConnection: a client of two servers whose
// first drops the connection after the submission committed retries it
// on the second with the same key; the server sees two requests with
// that key and creates one workload.
func TestSubmitRetriedAfterDroppedConnection(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	tok := h.secret("contoso")
	var mu sync.Mutex
	var keys []string    // the key of every submission that reached the server
	var replays []string // the replay header of the answers the second server sent
	handler := h.s.Handler()
	record := func(r *http.Request) {
		if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/workloads") {
			mu.Lock()
			keys = append(keys, r.Header.Get(api.HeaderIdempotencyKey))
			mu.Unlock()
		}
	}
	// The first server commits every submission, then drops the
	// connection instead of answering.
	dropper := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		if r.Method != "POST" {
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0) // a reset, as when the process dies
		conn.Close()
	}))
	defer dropper.Close()
	direct := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		if r.Method == "POST" {
			mu.Lock()
			replays = append(replays, rec.Header().Get(api.HeaderIdempotentReplayed))
			mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	defer direct.Close()

	c := client.New(dropper.URL+","+direct.URL, tok)
	w, err := c.Submit(h.ctx, "contoso", spec("a", 8, 1))
	if err != nil || w.Name != "a" || w.State != "Pending" {
		t.Fatalf("submit through a dropping server: %+v %v", w, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) < 2 || keys[0] == "" || len(keys[0]) != 32 {
		t.Fatalf("the server saw keys %q; want at least two, the client's 32-hex key", keys)
	}
	for _, k := range keys {
		if k != keys[0] {
			t.Fatalf("the retries carried different keys: %q", keys)
		}
	}
	if len(replays) != 1 || replays[0] != "true" {
		t.Fatalf("the second server's answers: replayed %q; want one replay", replays)
	}
	if n := countWorkloads(t, h, "contoso"); n != 1 {
		t.Fatalf("%d workloads, want 1", n)
	}
	if c.Current() != direct.URL {
		t.Fatalf("the client's current server is %s, want %s", c.Current(), direct.URL)
	}
}

// TestPruneLoopPrunesIdempotencyKeys: the server's prune loop (which runs
// at start, then every minute) deletes keys past 24 h, with no event
// retention configured.
func TestPruneLoopPrunesIdempotencyKeys(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	h := newHarness(t, testConfig, Options{Clock: func() time.Time { return time.Unix(0, clock.Load()) }})
	tok := h.secret("contoso")
	if code, _, body := submitRaw(t, h.url, tok, "contoso", spec("a", 8, 1), "key-a"); code != http.StatusCreated {
		t.Fatalf("%d %s", code, body)
	}
	clock.Add(int64(idempotencyTTL + time.Minute))
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { h.s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int64
		h.st.View(h.ctx, func(tx store.ReadTx) error { n = store.IdempotencyKeys(tx, "contoso"); return nil })
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the prune loop left %d keys past 24 h", n)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not timing it
	}
}
