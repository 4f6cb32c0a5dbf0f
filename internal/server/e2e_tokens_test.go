package server_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// TestTokenCLI: `arbiter token list|create|revoke|rotate` against a real
// server process; `serve --metrics-listen` serves /metrics without a
// token on its own address while the main one asks for one; tokens
// survive a restart of the process.
func TestTokenCLI(t *testing.T) {
	data := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := ln.Addr().String()
	ln.Close()
	cfg := writeFile(t, t.TempDir(), "fleet.yaml", e2eFleet+"tenants:\n  - name: contoso\n  - name: fabrikam\n")
	p := startServer(t, data, "--config", cfg, "--metrics-listen", maddr)

	var mt api.Token
	cliJSON(t, p, adminToken, &mt, "token", "create", "--role", "metrics", "--name", "prom")
	if mt.Role != "metrics" || mt.Secret == "" || !strings.HasPrefix(mt.ID, "tok_") {
		t.Fatalf("metrics token: %+v", mt)
	}
	if code, _ := getAs(t, p.addr+"/metrics", mt.Secret); code != http.StatusOK {
		t.Errorf("/metrics with a metrics token: %d", code)
	}
	if code, body := getAs(t, "http://"+maddr+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, "arbiter_") {
		t.Errorf("--metrics-listen without a token: %d", code)
	}
	var tt api.Token
	cliJSON(t, p, adminToken, &tt, "token", "create", "--tenant", "contoso", "--name", "ci", "--expires-in", "30d")
	if tt.Tenant != "contoso" || tt.ExpiresAt.IsZero() {
		t.Fatalf("tenant token: %+v", tt)
	}
	// A tenant creates its own tokens, not another tenant's.
	var own api.Token
	cliJSON(t, p, tt.Secret, &own, "token", "create", "--name", "mine")
	if own.Tenant != "contoso" {
		t.Fatalf("a tenant's own token: %+v", own)
	}
	if out, err := cli(t, p, tt.Secret, "token", "create", "--tenant", "fabrikam"); err == nil {
		t.Fatalf("contoso created a fabrikam token:\n%s", out)
	}
	list := mustCLI(t, p, adminToken, "token", "list")
	for _, want := range []string{"ID", "LAST USED", mt.ID, tt.ID, own.ID, "admin", "tenant contoso"} {
		if !strings.Contains(list, want) {
			t.Errorf("token list lacks %q:\n%s", want, list)
		}
	}
	if strings.Contains(list, "arb_") {
		t.Errorf("token list shows a secret:\n%s", list)
	}
	if out := mustCLI(t, p, tt.Secret, "token", "list"); strings.Contains(out, mt.ID) || !strings.Contains(out, own.ID) {
		t.Errorf("contoso's token list:\n%s", out)
	}
	var rot api.Token
	cliJSON(t, p, adminToken, &rot, "token", "rotate", tt.ID)
	if rot.ID != tt.ID || rot.Secret == tt.Secret {
		t.Fatalf("rotate: %+v", rot)
	}
	if _, err := client.New(p.addr, tt.Secret).WhoAmI(t.Context()); errCode(err) != api.CodeUnauthenticated {
		t.Errorf("the rotated-away secret: %v", err)
	}
	mustCLI(t, p, adminToken, "token", "revoke", own.ID)
	if _, err := client.New(p.addr, own.Secret).WhoAmI(t.Context()); errCode(err) != api.CodeUnauthenticated {
		t.Errorf("a revoked token: %v", err)
	}
	// Restart the process: the tokens are still there and still work.
	p.kill()
	p = startServer(t, data, "--metrics-listen", maddr)
	for _, secret := range []string{mt.Secret, rot.Secret} {
		if _, err := client.New(p.addr, secret).WhoAmI(t.Context()); err != nil {
			t.Errorf("a token after a restart: %v", err)
		}
	}
}

func errCode(err error) string {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return fmt.Sprint(err)
}
