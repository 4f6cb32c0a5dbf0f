package alert

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/policy"
)

// sampleTarget is a target of kind k as a rule writes it.
func sampleTarget(k policy.TargetKind) string {
	switch k {
	case policy.TargetCluster:
		return "cluster"
	case policy.TargetSelector:
		return "selector:team=ml"
	}
	return k.String() + ":x"
}

// TestAlertPairsAreTheTable (issue 13): a rule on a policy metric is
// accepted on exactly the metric × target pairs of the one table
// (policy.MetricSources), "kind:*" included; every other pair is refused
// with the rule's file:line:col and the field of:. Before, alerts knew
// their own metric names (gpu_allocation_ratio, ...) and no policy metric.
func TestAlertPairsAreTheTable(t *testing.T) {
	rule := func(metric, of string) string {
		return fmt.Sprintf("rules:\n  - name: r\n    metric: %s\n    of: %q\n    aggregation: max\n    window: 5m\n    frequency: 1m\n    operator: \">\"\n    threshold: 1\n", metric, of)
	}
	accepted := 0
	for _, m := range policy.AllMetrics() {
		for k := policy.TargetCluster; k <= policy.TargetSelector; k++ {
			_, inTable := policy.MetricSources[m][k]
			ofs := []string{sampleTarget(k)}
			if k != policy.TargetCluster && k != policy.TargetSelector {
				ofs = append(ofs, k.String()+":*")
			}
			for _, of := range ofs {
				f, err := Load("alerts.yaml", []byte(rule(m.String(), of)))
				switch {
				case inTable && err != nil:
					t.Errorf("%s of %s: refused, but the table has it: %v", m, of, err)
				case inTable:
					accepted++
					gm, gt, ok := f.Rules[0].Policy()
					if !ok || gm != m || gt.Kind != k {
						t.Errorf("%s of %s: rule reads %v of %v (%v)", m, of, gm, gt, ok)
					}
				case err == nil:
					t.Errorf("%s of %s: accepted, but the table lacks the pair", m, of)
				case !strings.Contains(err.Error(), "alerts.yaml:2:5: rules[0].of: "+m.String()+" is not measured on "+k.String()+" targets"):
					t.Errorf("%s of %s: %v, want a positioned error naming rules[0].of", m, of, err)
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("nothing accepted")
	}
	for _, tc := range []struct{ src, want string }{
		{rule("utilization", "contoso"), `alerts.yaml:2:5: rules[0].of: write the target's kind, e.g. tenant:contoso`},
		{rule("utilization", "selector:*"), `rules[0].of: a selector names its labels`},
		{rule("utilization", "planet:x"), `rules[0].of: invalid target kind "planet"`},
		{rule("gpu_allocation_ratio", "cluster"), `rules[0].metric: unknown metric "gpu_allocation_ratio": write a policy metric (utilization,`},
		{rule("preemptions", "tenant:x"), `rules[0].of: preemptions is a server metric`},
	} {
		if _, err := Load("alerts.yaml", []byte(tc.src)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load:\n%s= %v\nwant %q", tc.src, err, tc.want)
		}
	}
}

// TestExampleLoads: examples/alerts.yaml, which docs/server.md shows,
// loads: a policy metric of a target, a split one, a server metric.
func TestExampleLoads(t *testing.T) {
	data, err := os.ReadFile("../../examples/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Load("alerts.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rules) != 3 {
		t.Fatalf("%d rules", len(f.Rules))
	}
	if _, tg, ok := f.Rules[1].Policy(); !ok || tg.String() != "tenant:*" || !f.Rules[1].Split {
		t.Errorf("rule 1 reads %v (%v)", tg, ok)
	}
	if _, _, ok := f.Rules[2].Policy(); ok || f.Rules[2].Dims()["tenant"] != "*" {
		t.Errorf("rule 2 is not the server metric by labels")
	}
}
