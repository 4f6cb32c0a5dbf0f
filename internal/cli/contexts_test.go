package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// contextsWorld: two tenants that may each run on two H100 machines.
const contextsWorld = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: h1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 4}]
tenants:
  - name: contoso
    quota: [{flavor: H100-80G, region: eastus, limit: 16}]
  - name: fabrikam
    quota: [{flavor: H100-80G, region: eastus, limit: 16}]
`

// cleanEnv empties every variable that would override a context and
// points ARBITER_CONFIG at a fresh file; it returns that file's path.
func cleanEnv(t *testing.T) string {
	t.Helper()
	for _, k := range []string{"ARBITER_SERVER", "ARBITER_TOKEN", "ARBITER_TOKEN_FILE", "ARBITER_TENANT", "ARBITER_CONTEXT"} {
		t.Setenv(k, "")
	}
	path := filepath.Join(t.TempDir(), "home", "arbiter", "config.yaml")
	t.Setenv("ARBITER_CONFIG", path)
	return path
}

// secretFile writes a token to a 0600 file.
func secretFile(t *testing.T, name, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mustRun runs the CLI and fails the test on a non-zero exit.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := run(t, args...)
	if code != 0 {
		t.Fatalf("arbiter %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// mustFail runs the CLI, wants a failure and returns its stderr.
func mustFail(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := run(t, args...)
	if code == 0 {
		t.Fatalf("arbiter %s succeeded, want an error:\n%s", strings.Join(args, " "), out)
	}
	return errOut
}

func wantIn(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

func wantNotIn(t *testing.T, what, got string, nots ...string) {
	t.Helper()
	for _, n := range nots {
		if strings.Contains(got, n) {
			t.Errorf("%s holds %q, which it must not:\n%s", what, n, got)
		}
	}
}

// TestLoginContexts (issue 22, point 1): `arbiter login` stores a
// context 0600 in a 0700 directory, atomically, holding the token file's
// path and never the token; later commands need no --server or token;
// get-contexts, use-context, current-context and delete-context work;
// flags and the environment override the context; the context's token
// goes only to its own servers; errors say what to do.
func TestLoginContexts(t *testing.T) {
	cfgPath := cleanEnv(t)
	_, url := seededServer(t, contextsWorld)
	ctx := context.Background()
	admin := client.New(url, testAdmin)
	adminFile := secretFile(t, "admin.token", testAdmin)

	// Before any login: the error says how to get a token.
	errOut := mustFail(t, "workload", "list")
	wantIn(t, "no token, no context", errOut, "workload list: no token", "arbiter login", "--token-file")

	// A token is never taken from the command line.
	errOut = mustFail(t, "login", "--server", url, "--token", testAdmin)
	wantIn(t, "login --token", errOut, "unknown flag: --token")
	errOut = mustFail(t, "login", "--server", url)
	wantIn(t, "login without a file", errOut, "--token-file FILE is required")
	// Nor from a file other users may read.
	loose := secretFile(t, "loose.token", testAdmin)
	os.Chmod(loose, 0o644)
	errOut = mustFail(t, "login", "--server", url, "--token-file", loose)
	wantIn(t, "login with a 0644 token file", errOut, "accessible by other users", "chmod 600")
	// A refused token is not stored.
	bad := secretFile(t, "bad.token", "not-a-token-of-this-server")
	errOut = mustFail(t, "login", "--server", url, "--token-file", bad)
	wantIn(t, "login with a bad token", errOut, "login: the token was refused")
	if _, err := os.Stat(cfgPath); !os.IsNotExist(err) {
		t.Fatalf("failed logins wrote the configuration: %v", err)
	}

	out := mustRun(t, "login", "--server", url, "--token-file", adminFile)
	host := strings.TrimPrefix(url, "http://")
	adminCtx := "admin@" + host
	wantIn(t, "login", out, "as admin", `"`+adminCtx+`"`)

	// The file: 0600 in a 0700 directory, no temporary file left, no token.
	fi, err := os.Stat(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("config file mode %04o, want 0600", fi.Mode().Perm())
	}
	di, _ := os.Stat(filepath.Dir(cfgPath))
	if di.Mode().Perm() != 0o700 {
		t.Errorf("config directory mode %04o, want 0700", di.Mode().Perm())
	}
	if ents, _ := os.ReadDir(filepath.Dir(cfgPath)); len(ents) != 1 {
		t.Errorf("the config directory holds %d entries, want config.yaml alone (temporary files left?)", len(ents))
	}
	raw, _ := os.ReadFile(cfgPath)
	wantNotIn(t, "config.yaml", string(raw), testAdmin)
	wantIn(t, "config.yaml", string(raw), adminFile)

	// The admin sees the fleet without --server, token or --tenant.
	for _, tn := range []string{"contoso", "fabrikam"} {
		for _, name := range []string{"train", tn + "-only"} {
			if _, err := admin.Submit(ctx, tn, api.WorkloadSpec{Name: name, GPUs: 1000, Replicas: 1, Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := admin.CreateReservation(ctx, tn, api.ReservationRequest{Name: tn + "-res", SKU: "Standard_ND96isr_H100_v5", Capacity: 1, Region: "eastus"}); err != nil {
			t.Fatal(err)
		}
	}
	out = mustRun(t, "workload", "list")
	wantIn(t, "admin workload list", out, "TENANT", "contoso-only", "fabrikam-only", "contoso", "fabrikam")
	out = mustRun(t, "reservation", "list")
	wantIn(t, "admin reservation list", out, "TENANT", "contoso-res", "fabrikam-res")

	// get-contexts shows the context and never the token.
	for _, o := range []string{"table", "json", "yaml"} {
		out = mustRun(t, "config", "get-contexts", "-o", o)
		wantIn(t, "get-contexts -o "+o, out, adminCtx, adminFile)
		wantNotIn(t, "get-contexts -o "+o, out, testAdmin)
	}
	if got := strings.TrimSpace(mustRun(t, "config", "current-context")); got != adminCtx {
		t.Errorf("current-context %q, want %q", got, adminCtx)
	}

	// The environment overrides the context's default (no) tenant.
	t.Setenv("ARBITER_TENANT", "fabrikam")
	out = mustRun(t, "workload", "list")
	wantIn(t, "workload list with ARBITER_TENANT", out, "fabrikam-only")
	wantNotIn(t, "workload list with ARBITER_TENANT", out, "contoso")
	t.Setenv("ARBITER_TENANT", "")

	// A tenant's context, with a name of its own: it sees its own only.
	ct, err := admin.CreateToken(ctx, "contoso", "cli")
	if err != nil {
		t.Fatal(err)
	}
	contosoFile := secretFile(t, "contoso.token", ct.Secret)
	out = mustRun(t, "login", "--server", url, "--token-file", contosoFile, "--name", "c")
	wantIn(t, "tenant login", out, "as tenant contoso", `"c"`)
	out = mustRun(t, "workload", "list")
	wantIn(t, "tenant workload list", out, "contoso-only")
	wantNotIn(t, "tenant workload list", out, "fabrikam")
	out = mustRun(t, "reservation", "list")
	wantIn(t, "tenant reservation list", out, "contoso-res")
	wantNotIn(t, "tenant reservation list", out, "fabrikam")
	out = mustRun(t, "config", "get-contexts")
	wantNotIn(t, "get-contexts", out, testAdmin, ct.Secret)
	wantIn(t, "get-contexts", out, "*        c ")

	// --context picks another context for one command.
	out = mustRun(t, "workload", "list", "--context", adminCtx)
	wantIn(t, "workload list --context admin", out, "fabrikam-only")
	errOut = mustFail(t, "workload", "list", "--context", "nope")
	wantIn(t, "--context nope", errOut, `--context "nope": no such context`, `"c"`, `"`+adminCtx+`"`)

	mustRun(t, "config", "use-context", adminCtx)
	errOut = mustFail(t, "config", "use-context", "nope")
	wantIn(t, "use-context nope", errOut, `no context "nope"`)
	out = mustRun(t, "config", "delete-context", "c")
	wantIn(t, "delete-context", out, `context "c" deleted`, contosoFile)
	out = mustRun(t, "config", "get-contexts")
	wantNotIn(t, "get-contexts after delete", out, contosoFile)
	if _, err := os.Stat(contosoFile); err != nil {
		t.Errorf("delete-context removed the token file: %v", err)
	}

	// The context's token goes to its own servers only: another --server
	// gets no token, and no request is sent there.
	var mu sync.Mutex
	var sent []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Write([]byte(`{"items":[]}`))
	}))
	defer other.Close()
	errOut = mustFail(t, "workload", "list", "--server", other.URL)
	wantIn(t, "--server elsewhere", errOut, "no token for "+other.URL, adminCtx)
	t.Setenv("ARBITER_SERVER", other.URL)
	mustFail(t, "tenant", "list")
	t.Setenv("ARBITER_SERVER", "")
	mu.Lock()
	if len(sent) != 0 {
		t.Errorf("requests went to a server the context is not for: %q", sent)
	}
	mu.Unlock()
	// The same server named as the context names it (case, trailing
	// slash, default port spelled out) is the context's.
	mustRun(t, "tenant", "list", "--server", strings.ToUpper(url)+"/")

	// A configuration others may write is refused: it says where the token goes.
	os.Chmod(cfgPath, 0o666)
	errOut = mustFail(t, "workload", "list")
	wantIn(t, "config 0666", errOut, "writable by other users", "chmod 600")
	os.Chmod(cfgPath, 0o600)
	// A token file that became readable by others is refused.
	os.Chmod(adminFile, 0o640)
	errOut = mustFail(t, "workload", "list")
	wantIn(t, "token file 0640", errOut, "accessible by other users", "chmod 600 "+adminFile)
	os.Chmod(adminFile, 0o600)

	// A revoked token: the error says so, names where the token came from
	// and what to do, not the REST call.
	mustRun(t, "login", "--server", url, "--token-file", contosoFile, "--name", "c")
	if err := admin.RevokeToken(ctx, ct.ID); err != nil {
		t.Fatal(err)
	}
	errOut = mustFail(t, "workload", "list")
	wantIn(t, "revoked token", errOut, "workload list: the token was refused", `context "c"`, "arbiter login")
	wantNotIn(t, "revoked token", errOut, "/v1/", "GET")
}

// TestUnreachableServer: a server that is not there gets the error that
// says what to do, naming the command and the server, not the REST call.
func TestUnreachableServer(t *testing.T) {
	cleanEnv(t)
	hs := httptest.NewServer(http.NotFoundHandler())
	url := hs.URL
	hs.Close() // nothing listens there now
	file := secretFile(t, "t.token", "some-token")
	errOut := mustFail(t, "workload", "list", "--server", url, "--token-file", file)
	wantIn(t, "unreachable", errOut, "arbiter: workload list: cannot reach "+url+": is `arbiter serve` running? Set --server or run `arbiter login`")
	wantNotIn(t, "unreachable", errOut, "/v1/", "Get ")
	// The same through a context: the message names it.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	t.Setenv("ARBITER_CONFIG", cfg)
	if err := saveConfig(cfg, false, &clientConfig{CurrentContext: "gone", Contexts: []cliContext{{Name: "gone", Server: url, TokenFile: file}}}); err != nil {
		t.Fatal(err)
	}
	errOut = mustFail(t, "events")
	wantIn(t, "unreachable context", errOut, "events: cannot reach "+url+` (the server of context "gone")`)
	errOut = mustFail(t, "workload", "show", "x", "--tenant", "a")
	wantIn(t, "unreachable show", errOut, "workload show: cannot reach")
}

// TestAdminFleetByName (issue 22, point 2): the admin's show, why,
// cancel and logs find a workload by name when one tenant has it, fail
// listing the tenants when several do, and take --tenant; events
// --tenant is honoured; a tenant token is never affected and cannot
// reach another tenant's objects through the new paths.
func TestAdminFleetByName(t *testing.T) {
	cleanEnv(t)
	_, url := seededServer(t, contextsWorld)
	ctx := context.Background()
	admin := client.New(url, testAdmin)
	for _, tn := range []string{"contoso", "fabrikam"} {
		for _, name := range []string{"train", tn + "-only"} {
			if _, err := admin.Submit(ctx, tn, api.WorkloadSpec{Name: name, GPUs: 1000, Replicas: 1, Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := admin.CreateReservation(ctx, tn, api.ReservationRequest{Name: "res", SKU: "Standard_ND96isr_H100_v5", Capacity: 1, Region: "eastus"}); err != nil {
			t.Fatal(err)
		}
	}
	as := []string{"--server", url, "--token-file", secretFile(t, "admin.token", testAdmin)}
	ct, err := admin.CreateToken(ctx, "contoso", "cli")
	if err != nil {
		t.Fatal(err)
	}
	asContoso := []string{"--server", url, "--token-file", secretFile(t, "contoso.token", ct.Secret)}
	cmd := func(conn []string, args ...string) []string { return append(args, conn...) }

	// One tenant has it: found there.
	var w api.Workload
	out := mustRun(t, cmd(as, "workload", "show", "fabrikam-only", "-o", "json")...)
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.Tenant != "fabrikam" {
		t.Fatalf("show fabrikam-only: %+v %v\n%s", w, err, out)
	}
	out = mustRun(t, cmd(as, "workload", "why", "contoso-only")...)
	wantIn(t, "why contoso-only", out, "WORKLOAD", "contoso-only")
	out = mustRun(t, cmd(as, "workload", "cancel", "contoso-only", "-o", "json")...)
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.Tenant != "contoso" || w.State != "Cancelled" {
		t.Fatalf("cancel contoso-only: %+v %v", w, err)
	}
	// logs finds the tenant too: the error is the server's (no replica
	// runs), not a missing --tenant.
	errOut := mustFail(t, cmd(as, "workload", "logs", "fabrikam-only")...)
	wantIn(t, "logs fabrikam-only", errOut, "workload logs: ")
	wantNotIn(t, "logs fabrikam-only", errOut, "acts for no tenant", "pass --tenant", "no tenant has")

	// Several have it: the error lists them and asks for --tenant.
	for _, verb := range []string{"show", "why", "cancel", "logs"} {
		errOut := mustFail(t, cmd(as, "workload", verb, "train")...)
		wantIn(t, verb+" train", errOut, "workload "+verb+`: 2 tenants have a workload named "train": contoso, fabrikam; pass --tenant`)
	}
	out = mustRun(t, cmd(as, "workload", "show", "train", "--tenant", "fabrikam", "-o", "json")...)
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.Tenant != "fabrikam" {
		t.Fatalf("show train --tenant fabrikam: %+v %v", w, err)
	}
	// Nobody has it.
	errOut = mustFail(t, cmd(as, "workload", "show", "ghost")...)
	wantIn(t, "show ghost", errOut, `no tenant has a workload named "ghost"`)
	// Reservations: listed across tenants, shown by name when unambiguous.
	out = mustRun(t, cmd(as, "reservation", "list")...)
	if strings.Count(out, "res ") != 2 || !strings.Contains(out, "contoso") || !strings.Contains(out, "fabrikam") {
		t.Errorf("admin reservation list:\n%s", out)
	}
	errOut = mustFail(t, cmd(as, "reservation", "show", "res")...)
	wantIn(t, "reservation show res", errOut, `2 tenants have a reservation named "res": contoso, fabrikam`)

	// events --tenant for the admin: that tenant's only.
	out = mustRun(t, cmd(as, "events", "--tenant", "fabrikam", "-o", "json")...)
	var evs []api.Event
	if err := json.Unmarshal([]byte(out), &evs); err != nil || len(evs) == 0 {
		t.Fatalf("events --tenant fabrikam -o json: one array of events: %v\n%s", err, out)
	}
	for _, e := range evs {
		if e.Tenant != "fabrikam" {
			t.Fatalf("events --tenant fabrikam: %+v", e)
		}
	}
	out = mustRun(t, cmd(as, "events")...)
	wantIn(t, "admin events", out, "SEQ ", " contoso ", " fabrikam ")

	// A tenant token: its own workload of the shared name, never the
	// other's; no path reaches fabrikam's objects.
	out = mustRun(t, cmd(asContoso, "workload", "show", "train", "-o", "json")...)
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.Tenant != "contoso" {
		t.Fatalf("contoso's show train: %+v %v", w, err)
	}
	for _, args := range [][]string{
		{"workload", "show", "fabrikam-only"},
		{"workload", "why", "fabrikam-only"},
		{"workload", "cancel", "fabrikam-only"},
		{"workload", "list", "--tenant", "fabrikam"},
		{"reservation", "list", "--tenant", "fabrikam"},
		{"events", "--tenant", "fabrikam"},
	} {
		errOut := mustFail(t, cmd(asContoso, args...)...)
		wantIn(t, "contoso: "+strings.Join(args, " "), errOut, "NotFound")
	}
	for _, args := range [][]string{{"workload", "list"}, {"reservation", "list"}, {"events"}} {
		out := mustRun(t, cmd(asContoso, args...)...)
		wantNotIn(t, "contoso: "+strings.Join(args, " "), out, "fabrikam")
	}
	if got, err := admin.Workload(ctx, "fabrikam", "fabrikam-only"); err != nil || got.State == "Cancelled" {
		t.Fatalf("fabrikam's workload after contoso's attempts: %+v %v", got, err)
	}
}
