package sched_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*.txt")

// TestScenarios runs the scripts in testdata. Each step is a command, an
// optional YAML body, a line "----", and the expected output up to a blank
// line. Commands:
//
//	config            the YAML body is a config without workloads
//	submit            the YAML body is a list of workloads, submitted now
//	schedule          run one cycle, print the plan, apply it instantly
//	finish NAME...    the workloads end
//	fail-node ID      the node goes down; recover-node ID brings it back
//	regions NAME R... the workload now accepts only these regions (as a
//	                  policy's migrate narrows them); pools NAME P... the
//	                  same for node pools
//	evict NAME WHY... the next schedule evicts the workload (Input.Evict)
//	tick DURATION     advance the clock
//	fair-share        print the decayed usage the last schedule left
//	                  (options.fair_share)
//
// Regenerate the expected output with: go test ./internal/sched -run TestScenarios -rewrite
func TestScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scenarios in testdata")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScenario(t, file) })
	}
}

type step struct {
	cmd, body, want string
}

func parseScript(t *testing.T, file string) []step {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var steps []step
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); {
		if strings.TrimSpace(lines[i]) == "" || strings.HasPrefix(lines[i], "#") {
			i++
			continue
		}
		st := step{cmd: lines[i]}
		i++
		var body []string
		for i < len(lines) && lines[i] != "----" {
			body = append(body, lines[i])
			i++
		}
		if i >= len(lines) {
			t.Fatalf("%s: command %q has no ---- line", file, st.cmd)
		}
		i++
		var want []string
		for i < len(lines) && lines[i] != "" {
			want = append(want, lines[i])
			i++
		}
		st.body, st.want = strings.Join(body, "\n"), strings.Join(want, "\n")
		steps = append(steps, st)
	}
	return steps
}

type harness struct {
	cfg   *config.Config
	ws    []*workload.Workload
	now   time.Time
	down  []fleet.NodeID
	evict map[workload.ID]string
	hist  *tenancy.History // fair share: the last plan's decayed usage
}

func (h *harness) run(t *testing.T, st step) string {
	fields := strings.Fields(st.cmd)
	switch fields[0] {
	case "config":
		c, err := config.Parse("config", []byte(st.body))
		if err != nil {
			return "error: " + err.Error()
		}
		h.cfg, h.now, h.ws, h.hist = c, c.File.Now, c.Workloads, nil
		return "ok"
	case "submit":
		var ws []config.Workload
		if err := yamlfile.Decode("submit", []byte(st.body), &ws); err != nil {
			return "error: " + err.Error()
		}
		for _, w := range ws {
			spec := w.WorkloadSpec()
			if errs := spec.Validate(); len(errs) > 0 {
				return fmt.Sprintf("error: %s: %s", errs[0].Field, errs[0].Msg)
			}
			h.ws = append(h.ws, &workload.Workload{Spec: spec, SubmittedAt: h.now})
		}
		return "ok"
	case "schedule":
		in := h.cfg.Input()
		in.Now, in.Workloads, in.Down, in.Evict, in.History = h.now, h.ws, h.down, h.evict, h.hist
		h.evict = nil
		plan := sched.Schedule(in)
		h.ws, h.hist = sched.Apply(h.ws, plan, h.now), plan.History
		return formatPlan(plan)
	case "fair-share":
		// The decayed usage the last cycle left, per quota entry.
		var b strings.Builder
		if h.hist != nil {
			for _, e := range h.hist.Entries {
				fmt.Fprintf(&b, "%s %s/%s %.2f GPU-h\n", e.Tenant, e.Flavor, e.Region, e.GPUHours)
			}
		}
		return strings.TrimSuffix(b.String(), "\n")
	case "finish":
		keep := h.ws[:0]
		for _, w := range h.ws {
			if !contains(fields[1:], string(w.Name)) {
				keep = append(keep, w)
			}
		}
		h.ws = keep
		return "ok"
	case "regions", "pools":
		for i, w := range h.ws {
			if string(w.Name) == fields[1] {
				c := *w
				if fields[0] == "regions" {
					c.Regions = fields[2:]
				} else {
					c.Pools = fields[2:]
				}
				h.ws[i] = &c
				return "ok"
			}
		}
		return "error: no workload " + fields[1]
	case "evict":
		if h.evict == nil {
			h.evict = map[workload.ID]string{}
		}
		h.evict[workload.ID(fields[1])] = strings.Join(fields[2:], " ")
		return "ok"
	case "fail-node":
		h.down = append(h.down, fleet.NodeID(fields[1]))
		return "ok"
	case "recover-node":
		var keep []fleet.NodeID
		for _, d := range h.down {
			if string(d) != fields[1] {
				keep = append(keep, d)
			}
		}
		h.down = keep
		return "ok"
	case "tick":
		d, err := time.ParseDuration(fields[1])
		if err != nil {
			return "error: " + err.Error()
		}
		h.now = h.now.Add(d)
		return "now " + h.now.Format(time.RFC3339)
	}
	t.Fatalf("unknown command %q", st.cmd)
	return ""
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// formatPlan prints a plan compactly, one decision per line; replicas of
// one workload are folded into one line per node range.
func formatPlan(p sched.Plan) string {
	var out []string
	type key struct {
		w     workload.ID
		where string
		note  string
	}
	var order []key
	nodes := map[key][]string{}
	for _, x := range p.Placements {
		note := ""
		if x.OnReservation {
			note += " reservation"
		}
		if x.AfterPreemption {
			note += " after-preemption"
		}
		k := key{x.Workload, fmt.Sprintf("%s/%s", x.Flavor, x.Region), note}
		if _, ok := nodes[k]; !ok {
			order = append(order, k)
		}
		g := fmt.Sprint(x.GPUs)
		switch {
		case x.MIG.Instance() != nil:
			g = fmt.Sprintf("[%d:%s@%d]", x.GPUs[0], x.MIG.Instance().Profile, x.MIG.Instance().Start)
		case x.Milli < 1000:
			g += fmt.Sprintf("x%dm", x.Milli)
		}
		nodes[k] = append(nodes[k], string(x.Node)+g)
	}
	for _, k := range order {
		ns := nodes[k]
		shown := ns
		if len(ns) > 3 {
			shown = []string{ns[0], "...", ns[len(ns)-1]}
		}
		out = append(out, fmt.Sprintf("place %s on %s (%d replicas): %s%s", k.w, k.where, len(ns), strings.Join(shown, " "), k.note))
	}
	for _, x := range p.Preemptions {
		by := string(x.By)
		if by == "" {
			by = "-"
		}
		out = append(out, fmt.Sprintf("preempt %s by %s: %s (lost %.1f GPU-h)", x.Workload, by, x.Reason, x.WorkLost/3600))
	}
	for _, x := range p.Resizes {
		line := fmt.Sprintf("resize %s %d -> %d", x.Workload, x.From, x.To)
		if x.By != "" {
			line += " by " + string(x.By)
		}
		line += ": " + x.Reason
		if len(x.Add) > 0 {
			var at []string
			for _, a := range x.Add {
				at = append(at, fmt.Sprintf("%s%v", a.Node, a.GPUs))
			}
			if len(at) > 3 {
				at = []string{at[0], "...", at[len(at)-1]}
			}
			line += " at " + strings.Join(at, " ")
		}
		out = append(out, line)
	}
	for _, x := range p.Capped {
		out = append(out, fmt.Sprintf("capped %s at %d (%d-%d): %s", x.Workload, x.Replicas, x.Min, x.Max, x.Reason))
	}
	for _, x := range p.Overflow {
		out = append(out, fmt.Sprintf("overflow %s: %s -> %s", x.Workload, x.From, x.To))
	}
	pend := append([]sched.Pending(nil), p.Pending...)
	sort.SliceStable(pend, func(i, j int) bool { return pend[i].Workload < pend[j].Workload })
	for _, x := range pend {
		out = append(out, fmt.Sprintf("pending %s [%s]: %s", x.Workload, x.Code, x.Reason))
	}
	if len(out) == 0 {
		return "nothing to do"
	}
	return strings.Join(out, "\n")
}

func runScenario(t *testing.T, file string) {
	steps := parseScript(t, file)
	h := &harness{}
	var b strings.Builder
	failed := false
	for _, st := range steps {
		got := h.run(t, st)
		if got != st.want && !*rewrite {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", file, st.cmd, got, st.want)
			failed = true
		}
		b.WriteString(st.cmd + "\n")
		if st.body != "" {
			b.WriteString(st.body + "\n")
		}
		b.WriteString("----\n" + got + "\n\n")
	}
	if *rewrite {
		// Keep the leading comment block.
		data, _ := os.ReadFile(file)
		var head []string
		for _, l := range strings.Split(string(data), "\n") {
			if !strings.HasPrefix(l, "#") {
				break
			}
			head = append(head, l)
		}
		text := strings.Join(head, "\n")
		if text != "" {
			text += "\n\n"
		}
		if err := os.WriteFile(file, []byte(text+strings.TrimRight(b.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_ = failed
}
