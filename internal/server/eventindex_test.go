package server

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/store"
)

// countingStore counts the event-log entries its readers visit (scanned
// events and index entries, and events read by key).
type countingStore struct {
	store.Store
	visited atomic.Int64
}

func (c *countingStore) View(ctx context.Context, fn func(store.ReadTx) error) error {
	return c.Store.View(ctx, func(tx store.ReadTx) error { return fn(&countingTx{tx, c}) })
}

type countingTx struct {
	store.ReadTx
	c *countingStore
}

func eventKind(k store.Kind) bool { return k == store.KindEvent || k == store.KindEventIndex }

func (t *countingTx) ScanRaw(k store.Kind, prefix, after string, fn func(string, []byte) bool) {
	t.ReadTx.ScanRaw(k, prefix, after, func(key string, data []byte) bool {
		if eventKind(k) {
			t.c.visited.Add(1)
		}
		return fn(key, data)
	})
}

func (t *countingTx) GetRaw(k store.Kind, key string) ([]byte, bool) {
	if eventKind(k) {
		t.c.visited.Add(1)
	}
	return t.ReadTx.GetRaw(k, key)
}

// eventsServer is a server over a counting store holding `others` events
// of fabrikam and then, with own, one of contoso. It returns contoso's
// token.
func eventsServer(t testing.TB, others int, own bool) (*countingStore, string, string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "arbiter.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := config.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Seed(ctx, st, c, time.Now()); err != nil {
		t.Fatal(err)
	}
	for done := 0; done < others; {
		err := st.Update(ctx, func(tx store.WriteTx) error {
			for i := 0; i < 10_000 && done < others; i, done = i+1, done+1 {
				if err := store.AppendEvent(tx, &store.Event{Time: time.Now(), Type: "WorkloadSubmitted", Object: "workloads/fabrikam/x", Tenant: "fabrikam"}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err = st.Update(ctx, func(tx store.WriteTx) error {
		if !own {
			return nil
		}
		return store.AppendEvent(tx, &store.Event{Time: time.Now(), Type: "QuotasChanged", Object: "tenants/contoso", Tenant: "contoso"})
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: st}
	s, err := New(ctx, Options{Store: cs, AdminToken: testAdmin, RateLimit: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	tok, err := client.New(hs.URL, testAdmin).CreateToken(ctx, "contoso", "test")
	if err != nil {
		t.Fatal(err)
	}
	return cs, hs.URL, tok.Secret
}

// TestTenantEventsReadOnlyItsIndex (issue 12, item 15): among 100k events
// of another tenant, a tenant's long poll and its event stream visit its
// own entries only, not the log.
func TestTenantEventsReadOnlyItsIndex(t *testing.T) {
	const others = 100_000
	cs, url, secret := eventsServer(t, others, true)
	contoso := client.New(url, secret)
	ctx := context.Background()

	cs.visited.Store(0)
	page, err := contoso.Events(ctx, 0, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].Tenant != "contoso" {
		t.Fatalf("contoso's events: %+v", page.Items)
	}
	if n := cs.visited.Load(); n > 10 {
		t.Errorf("contoso's long poll visited %d event-log entries, want only its own (the log holds %d)", n, others+1)
	}
	// Nothing new: the answer's Next lets it follow without falling behind.
	cs.visited.Store(0)
	again, err := contoso.Events(ctx, page.Next, 0, 100)
	if err != nil || len(again.Items) != 0 || again.Next < page.Next {
		t.Fatalf("second poll: %+v %v", again, err)
	}
	if n := cs.visited.Load(); n > 10 {
		t.Errorf("an empty poll visited %d entries", n)
	}

	// The event stream: read until contoso's event arrives.
	cs.visited.Store(0)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	got := false
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "event: QuotasChanged") {
			got = true
			break
		}
	}
	if !got {
		t.Fatal("the stream ended without contoso's event")
	}
	if n := cs.visited.Load(); n > 10 {
		t.Errorf("contoso's stream visited %d event-log entries, want only its own", n)
	}

	// The admin still reads the whole log.
	cs.visited.Store(0)
	all, err := client.New(url, testAdmin).Events(ctx, 0, 0, 1000)
	if err != nil || len(all.Items) != 1000 {
		t.Fatalf("admin: %d events, %v", len(all.Items), err)
	}
}

// BenchmarkTenantEvents: a tenant with no events polls the log while
// another tenant has 100k events in it.
func BenchmarkTenantEvents(b *testing.B) {
	_, url, secret := eventsServer(b, 100_000, false)
	contoso := client.New(url, secret)
	ctx := context.Background()
	for b.Loop() {
		if _, err := contoso.Events(ctx, 0, 0, 100); err != nil {
			b.Fatal(err)
		}
	}
}
