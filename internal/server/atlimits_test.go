package server

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/config"
)

// largest returns a workload with every field at its limit.
func largest(name string, l config.Limits) api.WorkloadSpec {
	s := spec(name, 1, 1)
	cmd := &api.Command{Dir: strings.Repeat("d", l.DirBytes), Env: map[string]string{}}
	per := l.ArgvBytes / l.Args
	for range l.Args {
		cmd.Argv = append(cmd.Argv, strings.Repeat("a", per))
	}
	per = l.EnvBytes/l.EnvVars - 8
	for i := range l.EnvVars {
		cmd.Env[fmt.Sprintf("V%07d", i)] = strings.Repeat("e", per)
	}
	s.Command = cmd
	s.Labels = map[string]string{}
	for i := range l.Labels {
		k := fmt.Sprintf("k%d", i)
		s.Labels[k+strings.Repeat("k", l.LabelKeyBytes-len(k))] = strings.Repeat("v", l.LabelValueBytes)
	}
	return s
}

func heapMiB() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// TestTenantAtLimits (issue 12, item 14): a tenant filled to its queue
// limits with workloads whose every field is at its limit grows the
// server's heap by a bounded amount (about QueuedBytes times a small
// factor), and no answer is larger than a page's byte bound.
// ARBITER_MEASURE_LIMITS=1 runs it with the default limits and logs the
// numbers of docs/server.md.
func TestTenantAtLimits(t *testing.T) {
	l := config.Limits{QueuedBytes: 8 << 20}
	if os.Getenv("ARBITER_MEASURE_LIMITS") == "" {
		if testing.Short() {
			t.Skip("fills a tenant")
		}
	} else {
		l = config.Limits{}
	}
	eff := l.WithDefaults()
	before := heapMiB()
	h := newHarness(t, testConfig, Options{RateLimit: -1, Limits: l})
	c := h.tenant("contoso")
	one := largest("probe", eff)
	wire, _ := jsonSize(one)

	var mu sync.Mutex
	accepted, refused := 0, 0
	var wg sync.WaitGroup
	next := 0
	for range 8 {
		wg.Go(func() {
			for {
				mu.Lock()
				if refused > 0 {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				_, err := c.Submit(h.ctx, "contoso", largest(fmt.Sprint("w", i), eff))
				mu.Lock()
				switch {
				case err == nil:
					accepted++
				case apiCode(err) == api.CodeLimitExceeded:
					refused++
				default:
					t.Error(err)
					refused++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	h.s.Cycle(h.ctx) // the scheduler's cache now holds them
	// The largest answers: pages of the admin's and the tenant's lists.
	maxPage := 0
	for _, tok := range []string{testAdmin, tokenFor(t, h, "contoso")} {
		for _, path := range []string{"/v1/workloads", "/v1/tenants/contoso/workloads"} {
			cont := ""
			for {
				p := path + "?limit=1000"
				if cont != "" {
					p += "&continue=" + url.QueryEscape(cont)
				}
				body, next := rawGet(t, h, tok, p)
				maxPage = max(maxPage, len(body))
				if next == "" {
					break
				}
				cont = next
			}
		}
	}
	after := heapMiB()
	grew := after - before
	t.Logf("limits: queued_bytes %d MiB; one workload at every field limit: %d KiB on the wire; accepted %d; heap %.1f -> %.1f MiB (+%.1f MiB); largest answer %d KiB (page_bytes %d KiB)",
		eff.QueuedBytes>>20, wire>>10, accepted, before, after, grew, maxPage>>10, eff.PageBytes>>10)
	if accepted == 0 {
		t.Fatal("nothing was accepted")
	}
	if limit := 8 * float64(eff.QueuedBytes) / (1 << 20); grew > limit+64 {
		t.Errorf("the heap grew %.1f MiB for a tenant at queued_bytes %d MiB", grew, eff.QueuedBytes>>20)
	}
	if maxPage > eff.PageBytes+wire+1024 {
		t.Errorf("an answer of %d bytes, more than page_bytes %d and one item", maxPage, eff.PageBytes)
	}
	runtime.KeepAlive(h)
}

func jsonSize(v any) (int, error) {
	b, err := jsonMarshal(v)
	return len(b), err
}

func tokenFor(t *testing.T, h *harness, tenant string) string {
	tok, err := h.admin.CreateToken(h.ctx, tenant, "measure")
	if err != nil {
		t.Fatal(err)
	}
	return tok.Secret
}

// rawGet returns an answer's body and its continue token.
func rawGet(t *testing.T, h *harness, tok, path string) ([]byte, string) {
	req, _ := http.NewRequest("GET", h.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
	}
	var pg api.List[struct{}]
	if err := jsonUnmarshal(body, &pg); err != nil {
		t.Fatal(err)
	}
	return body, pg.Continue
}
