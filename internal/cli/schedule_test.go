package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// TestScheduleExample runs the README's first command on the bundled
// example and checks the plan shows what the example promises.
func TestScheduleExample(t *testing.T) {
	out, errOut, code := run(t, "schedule", "--config", "../../examples/schedule.yaml", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plan struct {
		Placements []struct {
			Workload      string `json:"workload"`
			Node          string `json:"node"`
			GPUs          []int  `json:"gpus"`
			Milli         int    `json:"milli"`
			Region        string `json:"region"`
			OnReservation bool   `json:"on_reservation"`
		} `json:"placements"`
		Preemptions []struct{ Workload, By, Reason string } `json:"preemptions"`
		Pending     []struct{ Workload, Reason string }     `json:"pending"`
		Overflow    []struct{ Workload, From, To string }   `json:"overflow"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]map[string]bool{}
	for _, p := range plan.Placements {
		if nodes[p.Workload] == nil {
			nodes[p.Workload] = map[string]bool{}
		}
		nodes[p.Workload][p.Node] = true
	}
	if n := len(nodes["train-7b"]); n != 32 {
		t.Errorf("train-7b on %d nodes, want 32", n)
	}
	for n := range nodes["train-7b"] {
		if !strings.HasPrefix(n, "eus-ib1-") {
			t.Errorf("train-7b replica outside block eus-ib1: %s", n)
		}
	}
	preempted := map[string]string{}
	for _, p := range plan.Preemptions {
		preempted[p.Workload] = p.By
	}
	want := map[string]string{"research-exp": "train-7b", "batch-low": "train-7b", "spot-render": "fabrikam-vm"}
	for w, by := range want {
		if preempted[w] != by {
			t.Errorf("%s preempted by %q, want %q", w, preempted[w], by)
		}
	}
	if _, ok := preempted["research-base"]; ok {
		t.Error("research-base, inside its guarantee, was preempted")
	}
	if len(plan.Overflow) != 1 || plan.Overflow[0].Workload != "contoso-vm2" || plan.Overflow[0].To != "A100-80G/westus2" {
		t.Errorf("overflow = %+v", plan.Overflow)
	}
	reasons := map[string]string{}
	for _, p := range plan.Pending {
		reasons[p.Workload] = p.Reason
	}
	if !strings.Contains(reasons["research-big"], "tenant research at limit 40/64 A100-80G in eastus") {
		t.Errorf("research-big reason = %q", reasons["research-big"])
	}
	if len(nodes["research-sweep"]) != 1 || len(nodes["fabrikam-extra"]) != 1 {
		t.Errorf("borrowing / beyond-reservation placements missing: %v", nodes)
	}
	// Same input, byte-identical output.
	again, _, _ := run(t, "schedule", "--config", "../../examples/schedule.yaml", "-o", "json")
	if again != out {
		t.Error("two runs of the same config differ")
	}
	table, _, code := run(t, "schedule", "-c", "../../examples/schedule.yaml")
	if code != 0 || !strings.Contains(table, "PENDING (2)") {
		t.Errorf("table output:\n%s", table)
	}
}

func TestValidate(t *testing.T) {
	out, _, code := run(t, "validate", "../../examples/schedule.yaml")
	if code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("validate example: %d %s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("tenants:\n  - name: a\n    qouta: []\n"), 0o644)
	_, errOut, code := run(t, "validate", bad)
	if code == 0 || !strings.Contains(errOut, "bad.yaml:3:5: tenants[0].qouta: unknown field (did you mean \"quota\"?)") {
		t.Errorf("validate bad: %d %s", code, errOut)
	}
}

// TestScheduleScorers runs the example with each named scorer from the
// config, and rejects an unknown one with the list of known ones.
func TestScheduleScorers(t *testing.T) {
	data, err := os.ReadFile("../../examples/schedule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fgd", "bestfit", "gpupacking", "random", "arbiter"} {
		f := filepath.Join(t.TempDir(), "s.yaml")
		os.WriteFile(f, []byte(strings.Replace(string(data), "seed: 1\n", "seed: 1\noptions: {scorer: "+name+"}\n", 1)), 0o644)
		out, errOut, code := run(t, "schedule", "-c", f)
		if code != 0 || !strings.Contains(out, "train-7b") {
			t.Errorf("scorer %s: exit %d %s", name, code, errOut)
		}
	}
	f := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(f, []byte(strings.Replace(string(data), "seed: 1\n", "seed: 1\noptions: {scorer: tetris}\n", 1)), 0o644)
	if _, errOut, code := run(t, "validate", f); code == 0 || !strings.Contains(errOut, `unknown scorer "tetris"`) || !strings.Contains(errOut, "fgd") {
		t.Errorf("unknown scorer: %d %s", code, errOut)
	}
}
