package prometheus

import (
	"os/exec"
	"testing"

	"github.com/arbiterhq/arbiter/internal/testbin"
)

// TestRules: promtool finds rules.yaml valid, and its unit tests
// (rules_test.yaml) pass: each alert fires on the synthetic series made to
// fire it, at the time its `for` allows, and stays quiet on the others.
func TestRules(t *testing.T) {
	promtool, err := testbin.Build("promtool")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"check", "rules", "rules.yaml"},
		{"test", "rules", "rules_test.yaml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
