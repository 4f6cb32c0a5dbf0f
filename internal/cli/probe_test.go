package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/server"
)

// TestProbeCommands: `arbiter probe apply -f` installs a probes file (a
// bad one is refused naming its line and field) and `arbiter probe list`
// shows each probe with what it measured.
func TestProbeCommands(t *testing.T) {
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer ep.Close()
	s, _, url := seededServerWith(t, "fleet: {regions: []}\n", server.Options{})
	dir := t.TempDir()
	good := filepath.Join(dir, "probes.yaml")
	os.WriteFile(good, []byte(fmt.Sprintf("probes:\n  - name: assist\n    url: %s/healthz\n    interval: 1s\n    timeout: 500ms\n", ep.URL)), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("probes:\n  - name: assist\n    url: gopher://x\n"), 0o644)
	cli := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(append(args, "--server", url, "--token", testAdmin), &out, &errb)
		return out.String(), errb.String(), code
	}
	if _, errOut, code := cli("probe", "apply", "-f", bad); code == 0 || !strings.Contains(errOut, "probes[0].url") || !strings.Contains(errOut, "bad.yaml:2:5") {
		t.Errorf("bad file: exit %d, %s", code, errOut)
	}
	if out, errOut, code := cli("probe", "apply", "-f", good); code != 0 || !strings.Contains(out, "assist") {
		t.Fatalf("apply: exit %d: %s %s", code, out, errOut)
	}
	if n := s.ProbeNow(context.Background()); n != 1 {
		t.Fatalf("ran %d probes", n)
	}
	out, errOut, code := cli("probe", "list")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], "service:assist") || !strings.Contains(lines[1], "100.0%") ||
		!strings.Contains(lines[1], " ok") {
		t.Errorf("list:\n%s", out)
	}
	if out, _, _ := cli("probe", "list", "-o", "json"); !strings.Contains(out, `"success_ratio": 1`) {
		t.Errorf("json:\n%s", out)
	}
}

// TestAlertApplyCommand: `arbiter alert apply -f` (the same apply command
// as probes') sends the file and lists the rules; without -f it says so.
func TestAlertApplyCommand(t *testing.T) {
	_, _, url := seededServerWith(t, "fleet: {regions: []}\n", server.Options{})
	rules := filepath.Join(t.TempDir(), "alerts.yaml")
	os.WriteFile(rules, []byte("rules:\n  - name: full\n    metric: utilization\n    aggregation: avg\n    window: 5m\n    frequency: 1m\n    operator: \">\"\n    threshold: 0.9\n"), 0o644)
	cli := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(append(args, "--server", url, "--token", testAdmin), &out, &errb)
		return out.String(), errb.String(), code
	}
	if _, errOut, code := cli("alert", "apply"); code == 0 || !strings.Contains(errOut, "alert apply: -f FILE is required") {
		t.Errorf("without -f: exit %d, %s", code, errOut)
	}
	if out, errOut, code := cli("alert", "apply", "-f", rules); code != 0 || !strings.Contains(out, "full") {
		t.Fatalf("apply: exit %d: %s %s", code, out, errOut)
	}
	if out, _, code := cli("alert", "list", "-o", "json"); code != 0 || !strings.Contains(out, `"file": "alerts.yaml"`) {
		t.Errorf("list:\n%s", out)
	}
}
