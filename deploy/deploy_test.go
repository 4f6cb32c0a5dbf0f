package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/testbin"
)

// promtool runs promtool with args in dir and fails the test on an error.
func promtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	bin, err := testbin.Build("promtool")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestRules: promtool finds prometheus/rules.yaml valid, and its unit
// tests (prometheus/rules_test.yaml) pass: each alert fires on the
// synthetic series made to fire it, once its `for` has passed, and stays
// quiet on the others.
func TestRules(t *testing.T) {
	promtool(t, "prometheus", "check", "rules", "rules.yaml")
	promtool(t, "prometheus", "test", "rules", "rules_test.yaml")
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
}

// grafanaVars stand for the dashboard's variables when its queries are
// checked as PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$job", "arbiter", "$tenant", ".*")

// TestDashboard: grafana/arbiter.json is a dashboard (a title, a uid,
// panels with distinct ids inside the 24-column grid, each panel but a
// row with queries) and every query is PromQL that promtool accepts, each
// checked as a recording rule with the variables filled in.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("grafana", "arbiter.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/arbiter.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("grafana/arbiter.json: title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	ids := map[int]bool{}
	n := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.Expr == "" {
				t.Errorf("panel %q, query %s: no expr", p.Title, q.RefID)
				continue
			}
			n++
			expr, _ := json.Marshal(grafanaVars.Replace(q.Expr)) // a JSON string is a YAML string
			fmt.Fprintf(&rules, "      - record: dashboard:panel%d:%s\n        expr: %s\n", p.ID, q.RefID, expr)
		}
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, ".", "check", "rules", file)
	t.Logf("%d panels, %d queries checked", len(d.Panels), n)
}
