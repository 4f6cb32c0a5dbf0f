package cli

import (
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
