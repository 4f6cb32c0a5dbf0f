package server

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// metricToken is a metric name of Arbiter's in a file.
var metricToken = regexp.MustCompile(`\barbiter_[a-z0-9_]*[a-z0-9]`)

// renamedRow is a row of docs/server.md's table of renamed metrics:
// | `OLD` | `NEW` |.
var renamedRow = regexp.MustCompile("(?m)^\\| `(arbiter_[a-z0-9_]+)[^`]*` \\| `(arbiter_[a-z0-9_]+)")

// TestDeployMetricNames: every metric name the shipped alerting rules,
// their unit tests, the Grafana dashboard, the docs and the alert sampler
// use is one the server exports, so a rename cannot silently break them;
// the docs' table of renamed metrics names old metrics the server no
// longer exports and new ones it does; and the dashboard shows what
// operators look at first.
func TestDeployMetricNames(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	exported := exportedNames(t, h.s.metrics)
	root := filepath.Join("..", "..")
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	old := map[string]bool{}
	for _, m := range renamedRow.FindAllStringSubmatch(read("docs/server.md"), -1) {
		old[m[1]] = true
		if m[1] != m[2] && exported[m[1]] { // the same name: its labels changed
			t.Errorf("docs/server.md lists %s as renamed, but the server still exports it", m[1])
		}
		if !exported[m[2]] {
			t.Errorf("docs/server.md renames %s to %s, which the server does not export", m[1], m[2])
		}
	}
	if len(old) < 5 {
		t.Errorf("docs/server.md: %d renamed metrics in its table, want the table", len(old))
	}
	for _, rel := range []string{
		"deploy/prometheus/rules.yaml", "deploy/prometheus/rules_test.yaml", "deploy/grafana/arbiter.json",
		"docs/server.md", "docs/operations.md", "internal/server/alerts.go",
	} {
		for _, name := range metricToken.FindAllString(read(rel), -1) {
			if !exported[name] && !(rel == "docs/server.md" && old[name]) {
				t.Errorf("%s uses %s, which the server does not export", rel, name)
			}
		}
	}
	dash := read("deploy/grafana/arbiter.json")
	for _, name := range []string{
		"arbiter_allocated_gpus", "arbiter_capacity_gpus", "arbiter_pending_gpus", "arbiter_placement_wait_seconds_bucket",
		"arbiter_tenant_used_gpus", "arbiter_tenant_guaranteed_gpus", "arbiter_tenant_borrowed_gpus", "arbiter_nodes",
		"arbiter_schedule_cycle_duration_seconds_bucket",
	} {
		if !strings.Contains(dash, name+"{") {
			t.Errorf("the dashboard does not query %s", name)
		}
	}
}
