package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRejectsBadFlags: serve refuses a bad flag value before it
// opens any state, naming the flag (and never echoing a webhook URL, which
// may hold a secret).
func TestServeRejectsBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--notify-webhook", "ftp://hooks.example/secret-123"}, "--notify-webhook: want an http:// or https:// URL"},
		{[]string{"--notify-webhook", "hooks.example/secret-123"}, "--notify-webhook"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--max-grace", "0s"}, "--max-grace must be positive"},
		{[]string{"--max-grace-class", "spot"}, "--max-grace-class"},
		{[]string{"--max-grace-class", "urgent=1m"}, "--max-grace-class"},
		{[]string{"--max-grace-class", "spot=-5s"}, "--max-grace-class"},
	} {
		dir := t.TempDir()
		_, errOut, code := run(t, append([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0"}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "secret-123") {
			t.Errorf("serve %v: exit %d, %q; want an error naming %s without the URL", c.args, code, errOut, c.want)
		}
	}
}

// TestServeRefusesUnknownScorer: serve --config refuses a scorer the
// scheduler does not know with the file's position, before it opens any
// state (it used to be dropped silently: live placement was best fit).
func TestServeRefusesUnknownScorer(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fleet.yaml")
	src := "options:\n  scorer: tetris\nfleet:\n  regions: [{name: eastus, zones: [{name: \"1\", blocks: [{name: b, nodes: [{sku: Standard_ND96amsr_A100_v4, count: 1}]}]}]}]\n"
	if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, "serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", cfg)
	if code == 0 || !strings.Contains(errOut, `unknown scorer "tetris"`) || !strings.Contains(errOut, "fleet.yaml:2") {
		t.Fatalf("serve --config with scorer tetris: exit %d, %q; want a positioned error", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Error("serve created its data directory before refusing the config")
	}
}

// TestServeEtcdFlagsChecked: bad HA flags are refused before anything
// starts, naming the flag.
func TestServeEtcdFlagsChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--etcd-endpoints", "10.0.0.1:2379"}, "--etcd-endpoints"},
		{[]string{"--etcd-endpoints", "http://u:p@10.0.0.1:2379"}, "--etcd-endpoints"},
		{[]string{"--etcd-endpoints", "http://127.0.0.1:1", "--etcd-prefix", "arbiter/"}, "--etcd-prefix"},
		{[]string{"--etcd-endpoints", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"}, "--advertise"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"serve", "--data", t.TempDir()}, c.args...)
		if code := Main(args, &out, &errb); code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want an error naming %s", c.args, code, errb.String(), c.want)
		}
	}
}
