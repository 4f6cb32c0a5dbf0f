package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain keeps the tests away from the user's own client contexts: the
// configuration is a file that does not exist unless a test writes it
// (tests that use contexts set ARBITER_CONFIG themselves).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "arbiter-cli-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("ARBITER_CONFIG", filepath.Join(dir, "none", "config.yaml"))
	os.Unsetenv("ARBITER_CONTEXT")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
