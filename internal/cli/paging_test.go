package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/server"
	"github.com/arbiterhq/arbiter/internal/store"
)

// TestListFollowsPages (issue 12, item 14): with pages of 2 items the
// CLI still lists every workload and tenant.
func TestListFollowsPages(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "a.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const admin = "admin-secret-for-cli-tests-0123"
	s, err := server.New(ctx, server.Options{Store: st, AdminToken: admin, RateLimit: -1, Logger: slog.New(slog.DiscardHandler),
		Limits: config.Limits{PageSize: 2}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	c := client.New(hs.URL, admin)
	for i := range 5 {
		if _, err := c.CreateTenant(ctx, api.Tenant{Name: fmt.Sprint("t", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"tenant", "list", "--server", hs.URL, "--token", admin, "-o", "json"}, &out, &errb); code != 0 {
		t.Fatalf("tenant list: %d %s", code, errb.String())
	}
	var ts []api.Tenant
	if err := json.Unmarshal(out.Bytes(), &ts); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(ts) != 5 {
		t.Fatalf("the CLI listed %d tenants, want 5 (pages of 2)", len(ts))
	}
	page, err := client.Page[api.Tenant](c, ctx, "/v1/tenants", 0, "")
	if err != nil || len(page.Items) != 2 || page.Continue == "" {
		t.Fatalf("one page: %d items, continue %q, %v", len(page.Items), page.Continue, err)
	}
}
