package sim

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/examples"
)

func FuzzParseScenario(f *testing.F) {
	f.Add(string(ContentionYAML()))
	f.Add("name: x\nduration: 1h\ngenerators: [{name: g, sizes: [{mig: 3g.40gb, replicas: 1, weight: 1}, {mig: 9g.99gb, gpus: 1, replicas: 1, weight: 1}], rate_per_hour: 1, runtime_min: 1m, runtime_max: 2m, flavors: [H100-80G, A10], regions: [eastus]}]\n")
	f.Add("name: x\nduration: 1h\ngenerators: [{name: g, sizes: [{gpus: 1, replicas: 1, weight: 1}], rate_per_hour: 1, runtime_min: 1m, runtime_max: 2m, flavors: [T4], regions: [eastus]}]\n")
	f.Add("name: x\nduration: 1h\nclasses: [{name: g, promise: sla, match: [g, g]}, {name: \"\", display: 1, match: []}, {name: G!, promise: [x]}]\ngenerators: [{name: g, sizes: [{gpus: 1, replicas: 1, weight: 1}], rate_per_hour: 1, runtime_min: 1m, runtime_max: 2m, flavors: [T4], regions: [eastus]}]\n")
	f.Fuzz(func(t *testing.T, src string) {
		_, err := ParseScenario("fuzz.yaml", []byte(src))
		if err != nil && !strings.Contains(err.Error(), "fuzz.yaml") {
			t.Fatalf("error without the file name: %v", err)
		}
		cerr := CheckScenario("fuzz.yaml", []byte(src))
		if cerr != nil && !strings.Contains(cerr.Error(), "fuzz.yaml") {
			t.Fatalf("check error without the file name: %v", cerr)
		}
		if err != nil && cerr == nil {
			t.Fatalf("ParseScenario refuses what CheckScenario accepts: %v", err)
		}
	})
}

// TestCheckScenario: the world a scenario's runs start from is checked
// with the rest, every problem once.
func TestCheckScenario(t *testing.T) {
	if err := CheckScenario("contention.yaml", ContentionYAML()); err != nil {
		t.Fatalf("contention: %v", err)
	}
	src := "name: x\nduration: 1h\nfleet:\n  regions:\n    - name: eastus\n      zones:\n        - name: \"1\"\n          blocks:\n            - name: b1\n              nodes: [{sku: Standard_Nope, count: 1}]\n" +
		"tenants:\n  - name: a\n    quota: [{flavor: T4, guaranteed: lots}]\n" +
		"generators:\n  - {name: g, tenant: a, sizes: [], rate_per_hour: 1, runtime_min: 1m, runtime_max: 2m, flavors: [T4], regions: [eastus]}\n"
	if _, err := ParseScenario("s.yaml", []byte(src)); err == nil || strings.Contains(err.Error(), "Standard_Nope") {
		t.Errorf("ParseScenario: %v", err)
	}
	err := CheckScenario("s.yaml", []byte(src))
	want := []string{
		`s.yaml:10:23: fleet.regions[0].zones[0].blocks[0].nodes[0].sku: unknown SKU "Standard_Nope"`,
		`s.yaml:13:38: tenants[0].quota[0].guaranteed: invalid GPU amount "lots"`,
		`s.yaml:15:5: generators[0].sizes: list at least one size`,
	}
	if err == nil || strings.Count(err.Error(), "\n") != len(want)-1 {
		t.Fatalf("CheckScenario = %v, want %d problems", err, len(want))
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
}

func FuzzParseStrategy(f *testing.F) {
	for _, n := range []string{"static", "dynamic", "hybrid"} {
		data, _ := examples.FS.ReadFile("strategies/" + n + ".yaml")
		f.Add(string(data))
	}
	f.Fuzz(func(t *testing.T, src string) {
		_, err := ParseStrategy("fuzz.yaml", []byte(src))
		if err != nil && !strings.Contains(err.Error(), "fuzz.yaml") {
			t.Fatalf("error without the file name: %v", err)
		}
	})
}

func TestScenarioErrors(t *testing.T) {
	// A value that does not decode hides nothing else, and is not
	// reported again as missing.
	_, err := ParseScenario("s.yaml", []byte("name: x\nduration: 5 minutes\ngenerators:\n  - {name: g, sizes: [], rate_per_hour: 0, runtime_min: 1m, runtime_max: 2m, flavors: [T4], regions: [eastus]}\n"))
	for _, want := range []string{`s.yaml:2:11: duration: invalid duration "5 minutes"`, "s.yaml:4:5: generators[0].sizes: list at least one size", "generators[0].rate_per_hour: give rate_per_hour > 0 or a count"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "a scenario needs a duration") {
		t.Errorf("the duration that did not decode is reported twice: %v", err)
	}
	_, err = ParseScenario("s.yaml", []byte("name: x\nduration: 1h\ngenerators:\n  - {name: g, sizes: [], rate_per_hour: 0, runtime_min: 1m, runtime_max: 2m, flavors: [T4], regions: [eastus]}\n"))
	for _, want := range []string{"s.yaml:4:5: generators[0].sizes: list at least one size", "generators[0].rate_per_hour: give rate_per_hour > 0 or a count"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// TestStrategyErrors: every problem of a strategy file in one error.
func TestStrategyErrors(t *testing.T) {
	_, err := ParseStrategy("st.yaml", []byte("description: no name\noptions:\n  reservation_honour_window: 1h\n  scorer: [x]\n  fair_share: {half_life: -1h}\n"))
	want := []string{
		"st.yaml:1:1: name: a strategy needs a name",
		"st.yaml:3:3: options.reservation_honour_window: the honour window is the scenario's promise",
		"st.yaml:4:11: options.scorer: want a string, got a list",
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
}
