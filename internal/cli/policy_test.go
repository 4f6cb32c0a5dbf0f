package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/policy/effects"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/sim"
)

func runPolicyCLI(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = Main(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestPolicyExplainOperatorsExample(t *testing.T) {
	out, errOut, code := runPolicyCLI("policy", "explain", "-f", "../../examples/policies/operators.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"2 rules (operators format)",
		"ai_training_priority:\n  When GPU utilization of the whole cluster is above 85%,",
		"shrink developer_instances to 30% of its limit, evicting preemptible excess gracefully;",
		"and move batch_jobs to low_priority_pool, requeued from their last checkpoint.",
		"customer_sla_protection:\n  When p95 latency of the whole cluster is above 150ms for 5m without a break,",
		"give inference_gpus high priority.",
		"end once it has been clear for 5m; the rule changes state at most once every 5m.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q; got:\n%s", want, out)
		}
	}
}

func TestPolicyExplainNativeExample(t *testing.T) {
	out, errOut, code := runPolicyCLI("policy", "explain", "-f", "../../examples/policies/native.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"4 rules (native format)",
		"(once true, it stays true until the value is back to 80%)",
		"give pool inference_gpus, tenant acme, flavor H100-80G high priority and a temporary guarantee of 64 GPUs",
		"They end after 4h at most",
		"Dry run: firings are logged, nothing is changed.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q; got:\n%s", want, out)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`scheduling_policies:
  - name: r
    conditions:
      - metric: p95_latency
        threshold: 150
        duration: 5 minutes
    actions:
      - type: evict
        target: batch_jobs
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		out, err []string
	}{
		{"ok without targets", []string{"-f", "../../examples/policies/operators.yaml"}, 0,
			[]string{"2 rules (operators format): ok", "targets not checked"}, nil},
		{"ok with targets", []string{"-f", "../../examples/policies/operators.yaml",
			"--class", "developer_instances,batch_jobs", "--pool", "low_priority_pool,inference_gpus"}, 0,
			[]string{"2 rules (operators format): ok"}, nil},
		{"missing target", []string{"-f", "../../examples/policies/operators.yaml", "--class", "developer_instances,batch_jobs", "--pool", "low_priority_pool"}, 1,
			nil, []string{`operators.yaml:20:21: scheduling_policies[1].actions[0].resources[0]: target "inference_gpus" does not exist`}},
		{"bad file", []string{"-f", bad}, 1, nil, []string{
			`bad.yaml:5:20: scheduling_policies[0].conditions[0].threshold: threshold "150" has no unit: write 150ms`,
			`bad.yaml:6:19: scheduling_policies[0].conditions[0].duration: duration "5 minutes" is not understood: write 5m`,
			`bad.yaml:8:15: scheduling_policies[0].actions[0].type: unknown action type "evict": write one of scale_down, migrate,`,
		}},
		{"no file", nil, 1, nil, []string{"-f FILE is required"}},
		{"file not found", []string{"-f", filepath.Join(dir, "nope.yaml")}, 1, nil, []string{"no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runPolicyCLI(append([]string{"policy", "validate"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.out {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q; got:\n%s", w, out)
				}
			}
			for _, w := range tc.err {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q; got:\n%s", w, errOut)
				}
			}
		})
	}
}

// TestPolicyTest (issue 22, point 5): the summary lists every rule of the
// file with its counts first; the firings follow only with -v, as many as
// the summary counts.
func TestPolicyTest(t *testing.T) {
	// Four simulated days of the contention scenario under the dynamic
	// strategy with the operators' rules: both rules fire.
	args := []string{"policy", "test", "-f", "../../examples/policies/operators.yaml", "--days", "4"}
	out, errOut, code := runPolicyCLI(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "firings over 4 days of contention under dynamic") {
		t.Errorf("no totals line:\n%s", out)
	}
	detail := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d  (\S+) +(fired|reverted|expired) `)
	if detail.MatchString(out) {
		t.Errorf("firings listed without -v:\n%s", out)
	}
	lines := strings.Split(out, "\n")
	if len(lines) > 10 {
		t.Errorf("%d lines without -v, want the summary only:\n%s", len(lines), out)
	}
	if !strings.HasPrefix(out, "RULES (2)\nRULE ") {
		t.Errorf("the summary does not come first:\n%s", out)
	}
	row := regexp.MustCompile(`(?m)^(\S+) +(\d+) +(\d+) +(\d+) +(.*)$`)
	counts := map[string][3]int{}
	for _, m := range row.FindAllStringSubmatch(out, -1) {
		var c [3]int
		for i := range c {
			c[i], _ = strconv.Atoi(m[2+i])
		}
		counts[m[1]] = c
		if c[0] > 0 && !strings.Contains(m[5], "% of") && !strings.Contains(m[5], "%)") {
			t.Errorf("rule %s: no time in force in %q", m[1], m[0])
		}
	}
	for _, r := range []string{"ai_training_priority", "customer_sla_protection"} {
		if _, ok := counts[r]; !ok {
			t.Errorf("the summary lacks rule %s:\n%s", r, out)
		}
	}
	if counts["ai_training_priority"][0] == 0 || counts["customer_sla_protection"][0] == 0 {
		t.Errorf("in 4 days both rules fire: %v", counts)
	}
	if !strings.Contains(out, "class:developer_instances capped at") {
		t.Errorf("ai_training_priority fired without its cap in the summary:\n%s", out)
	}
	if !strings.Contains(out, "reallocate inference_gpus priority high") && !strings.Contains(out, "reallocate class:inference_gpus priority high") {
		t.Errorf("customer_sla_protection's effect missing:\n%s", out)
	}

	vout, errOut, code := runPolicyCLI(append(args, "-v")...)
	if code != 0 {
		t.Fatalf("-v: exit %d: %s", code, errOut)
	}
	if !strings.HasPrefix(vout, "RULES (2)\n") {
		t.Errorf("-v: the summary does not come first:\n%s", vout)
	}
	got := map[string][3]int{}
	for _, m := range detail.FindAllStringSubmatch(vout, -1) {
		c := got[m[1]]
		c[map[string]int{"fired": 0, "reverted": 1, "expired": 2}[m[2]]]++
		got[m[1]] = c
	}
	if len(got) == 0 {
		t.Fatalf("-v lists no firing:\n%s", vout)
	}
	for r, c := range counts {
		if got[r] != c {
			t.Errorf("rule %s: the summary counts %v (fired, reverted, expired), -v lists %v", r, c, got[r])
		}
	}
	if strings.Index(vout, "firings over 4 days") > detail.FindStringIndex(vout)[0] {
		t.Error("-v: the firings come before the summary's totals")
	}

	_, errOut, code = runPolicyCLI("policy", "test", "-f", "nope.yaml")
	if code == 0 || !strings.Contains(errOut, "nope.yaml") {
		t.Errorf("missing file: %d %s", code, errOut)
	}
}

// TestSummarizeRules: the counts, time in force, SLO outcome and effects
// of each rule, from a log.
func TestSummarizeRules(t *testing.T) {
	p, err := policy.Load("p.yaml", []byte(`policies:
  - name: cap
    when: {metric: utilization, above: 80%}
    then: [{type: scale_down, target: class:dev, min_capacity: 50%}, {type: set_priority, target: class:train, priority: high}]
  - name: quiet
    when: {metric: utilization, above: 99%}
    then: [{type: notify, channel: ops, message: full}]
  - name: off
    enabled: false
    when: {metric: utilization, above: 10%}
    then: [{type: notify, channel: ops, message: x}]
`))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	at := func(h float64) time.Time { return start.Add(time.Duration(h * float64(time.Hour))) }
	capOf := func(gpus int) effects.Cap {
		return effects.Cap{Target: policy.Target{Kind: policy.TargetClass, Name: "dev"}, Limit: resource.GPUs(gpus), Hold: sched.PolicyHold{Rule: "cap", Index: 0}}
	}
	fire := func(h float64, rec time.Duration, caps ...effects.Cap) sim.Firing {
		return sim.Firing{Firing: policy.Firing{Time: at(h), Rule: "cap", Event: policy.EventFired}, Recovered: rec, Caps: caps}
	}
	end := func(h float64, ev policy.Event) sim.Firing {
		return sim.Firing{Firing: policy.Firing{Time: at(h), Rule: "cap", Event: ev}}
	}
	log := []sim.Firing{
		fire(1, 0, capOf(40)), end(3, policy.EventReverted),
		fire(5, 10*time.Minute, capOf(24)), end(6, policy.EventExpired),
		fire(10, -1, capOf(32)), // in force at the end
		{Firing: policy.Firing{Time: at(2), Rule: "gone", Event: policy.EventFired}}, // not in the file
	}
	sums := summarizeRules(p.Rules, log, start, at(12))
	c := sums[0]
	if c.fired != 3 || c.reverted != 1 || c.expired != 1 || c.held != 5*time.Hour || !c.open || c.above != 2 {
		t.Errorf("cap: %+v", c)
	}
	var b strings.Builder
	writeRuleSummary(&b, sums, 12*time.Hour)
	want := `RULES (3)
RULE   FIRED  REVERTED  EXPIRED  IN FORCE                    TTFT P99 ABOVE SLO AT FIRING                                                EFFECTS
cap    3      1         1        5h (41.7%), at the end too  2 of 3, back under it after 10m (median), 10m (max), 1 never back under it  class:dev capped at 24-40 GPUs; set_priority class:train high
quiet  0      0         0        -                           -                                                                           -
off    0      0         0        -                           -                                                                           none: the rule is disabled
`
	if got := b.String(); got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
}
