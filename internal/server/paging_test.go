package server

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/config"
)

// getPage fetches one raw page.
func getPage(t *testing.T, h *harness, token, path string) (api.List[json.RawMessage], *api.Error) {
	t.Helper()
	var out api.List[json.RawMessage]
	err := client.New(h.url, token).Do(h.ctx, "GET", path, nil, &out)
	if err != nil {
		ae, ok := err.(*api.Error)
		if !ok {
			t.Fatal(err)
		}
		return out, ae
	}
	return out, nil
}

// walk follows a list's pages of size limit and returns every item.
func walk(t *testing.T, h *harness, token, path string, limit int) []string {
	t.Helper()
	var items []string
	cont := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("%s: more than 1000 pages", path)
		}
		p := path + sepFor(path) + fmt.Sprintf("limit=%d", limit)
		if cont != "" {
			p += "&continue=" + url.QueryEscape(cont)
		}
		pg, ae := getPage(t, h, token, p)
		if ae != nil {
			t.Fatalf("%s: %v", p, ae)
		}
		if len(pg.Items) > limit {
			t.Fatalf("%s: %d items on a page of %d", p, len(pg.Items), limit)
		}
		for _, it := range pg.Items {
			items = append(items, string(it))
		}
		if pg.Continue == "" {
			return items
		}
		cont = pg.Continue
	}
}

func sepFor(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}

// TestEveryListPages (issue 12, item 14): each list endpoint answers
// pages of ?limit items with a continue token, and its pages together
// are the whole list, each item once.
func TestEveryListPages(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c := h.tenant("contoso")
	for i := range 5 {
		if _, err := c.Submit(h.ctx, "contoso", spec(fmt.Sprint("w", i), 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 { // 16 GPUs: contoso's eastus limit, reserved capacity counts against it
		if _, err := c.CreateReservation(h.ctx, "contoso", api.ReservationRequest{Name: fmt.Sprint("r", i), SKU: "Standard_ND96amsr_A100_v4", Capacity: 1, Region: "eastus"}); err != nil {
			t.Fatal(err)
		}
	}
	rules := "policies:\n  - name: p\n    when: {metric: utilization, of: cluster, above: 99%}\n    then:\n      - {type: notify, channel: ops, message: hot}\n"
	for _, n := range []string{"p1", "p2"} {
		if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: n, Source: rules}); err != nil {
			t.Fatal(err)
		}
	}
	for n, block := range map[string]string{"pa": "wus-a", "pb": "eus-h"} {
		if _, err := h.admin.SetPartition(h.ctx, n, api.PartitionRequest{Tenant: "fabrikam", Blocks: []string{block}}); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{"/v1/regions", "/v1/skus", "/v1/nodes", "/v1/nodes?region=eastus", "/v1/tenants", "/v1/usage", "/v1/tenants/contoso/usage",
		"/v1/tenants/contoso/reservations", "/v1/workloads", "/v1/workloads?state=Pending", "/v1/tenants/contoso/workloads",
		"/v1/policies", "/v1/policies/p1/firings", "/v1/partitions", "/v1/tokens"}
	for _, p := range paths {
		all := walk(t, h, testAdmin, p, 1000)
		one := walk(t, h, testAdmin, p, 1)
		if p == "/v1/tokens" { // reading the list uses the admin token
			all, one = withoutLastUse(all), withoutLastUse(one)
		}
		if strings.Join(all, "\n") != strings.Join(one, "\n") {
			t.Errorf("%s: pages of 1 give %d items, one page %d", p, len(one), len(all))
		}
		if p != "/v1/policies/p1/firings" && p != "/v1/tenants/contoso/usage" {
			if len(all) < 2 {
				t.Errorf("%s: only %d items; the test needs more than a page", p, len(all))
			}
		}
	}
}

// TestPagingTokensAndBounds: the default and largest page sizes, the
// byte bound, and tokens that were altered or belong to another list.
func TestPagingTokensAndBounds(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1, Limits: config.Limits{PageSize: 3, MaxPageSize: 4}})
	c := h.tenant("contoso")
	for i := range 8 {
		if _, err := c.Submit(h.ctx, "contoso", spec(fmt.Sprint("w", i), 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	pg, ae := getPage(t, h, testAdmin, "/v1/workloads")
	if ae != nil || len(pg.Items) != 3 || pg.Continue == "" {
		t.Fatalf("default page: %d items, continue %q, %v", len(pg.Items), pg.Continue, ae)
	}
	if _, ae := getPage(t, h, testAdmin, "/v1/workloads?limit=5"); ae == nil || ae.Field != "limit" {
		t.Errorf("limit above max_page_size: %v, want 400 naming limit", ae)
	}
	for _, bad := range []string{pg.Continue + "x", "x" + pg.Continue, "abc", strings.Replace(pg.Continue, ".", "", 1), "."} {
		if _, ae := getPage(t, h, testAdmin, "/v1/workloads?continue="+url.QueryEscape(bad)); ae == nil || ae.Status != 400 || ae.Field != "continue" {
			t.Errorf("continue=%q: %v, want 400 naming continue", bad, ae)
		}
	}
	// A token of one list is refused by another (other filter, other path).
	for _, other := range []string{"/v1/workloads?state=Pending", "/v1/tenants/contoso/workloads", "/v1/tenants"} {
		if _, ae := getPage(t, h, testAdmin, other+sepFor(other)+"continue="+url.QueryEscape(pg.Continue)); ae == nil || ae.Field != "continue" {
			t.Errorf("%s with another list's token: %v, want 400 naming continue", other, ae)
		}
	}
	// Another caller's token is refused too (same path, other reader).
	ctok := tokenFor(t, h, "contoso")
	mine, ae := getPage(t, h, ctok, "/v1/workloads")
	if ae != nil || mine.Continue == "" {
		t.Fatalf("contoso's page: %v", ae)
	}
	ftok := tokenFor(t, h, "fabrikam")
	if _, ae := getPage(t, h, ftok, "/v1/workloads?continue="+url.QueryEscape(mine.Continue)); ae == nil || ae.Field != "continue" {
		t.Errorf("fabrikam with contoso's token: %v, want 400 naming continue", ae)
	}
	// The client follows pages: a tenant sees all 8 of its workloads.
	ws, err := c.Workloads(h.ctx, "contoso", "")
	if err != nil || len(ws) != 8 {
		t.Fatalf("client list: %d workloads, %v", len(ws), err)
	}

	// The byte bound: pages of one item each.
	h2 := newHarness(t, testConfig, Options{RateLimit: -1, Limits: config.Limits{PageBytes: 1}})
	c2 := h2.tenant("contoso")
	for i := range 3 {
		if _, err := c2.Submit(h2.ctx, "contoso", spec(fmt.Sprint("w", i), 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	pg, ae = getPage(t, h2, testAdmin, "/v1/workloads")
	if ae != nil || len(pg.Items) != 1 || pg.Continue == "" {
		t.Fatalf("page_bytes 1: %d items, continue %q, %v", len(pg.Items), pg.Continue, ae)
	}
	if got := walk(t, h2, testAdmin, "/v1/workloads", 1000); len(got) != 3 {
		t.Fatalf("page_bytes 1: %d workloads in all, want 3", len(got))
	}
}

var lastUseField = regexp.MustCompile(`"last_used_at":"[^"]*",?`)

// withoutLastUse drops the tokens' last-use times, which the listing
// itself moves.
func withoutLastUse(items []string) []string {
	out := make([]string, len(items))
	for i, x := range items {
		out[i] = lastUseField.ReplaceAllString(x, "")
	}
	return out
}
