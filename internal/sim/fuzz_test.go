package sim

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/examples"
)

func FuzzParseScenario(f *testing.F) {
	f.Add(string(ContentionYAML()))
	f.Add("name: x\nduration: 1h\ngenerators: [{name: g, sizes: [{gpus: 1, replicas: 1, weight: 1}], rate_per_hour: 1, runtime_min: 1m, runtime_max: 2m, flavors: [T4], regions: [eastus]}]\n")
	f.Add("name: x\nduration: 1h\nclasses: [{name: g, promise: sla, match: [g, g]}, {name: \"\", display: 1, match: []}, {name: G!, promise: [x]}]\ngenerators: [{name: g, sizes: [{gpus: 1, replicas: 1, weight: 1}], rate_per_hour: 1, runtime_min: 1m, runtime_max: 2m, flavors: [T4], regions: [eastus]}]\n")
	f.Fuzz(func(t *testing.T, src string) {
		_, err := ParseScenario("fuzz.yaml", []byte(src))
		if err != nil && !strings.Contains(err.Error(), "fuzz.yaml") {
			t.Fatalf("error without the file name: %v", err)
		}
	})
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
	_, err := ParseScenario("s.yaml", []byte("name: x\nduration: 5 minutes\ngenerators:\n  - {name: g, sizes: [], rate_per_hour: 0, runtime_min: 1m, runtime_max: 2m, flavors: [T4], regions: [eastus]}\n"))
	for _, want := range []string{`s.yaml:2:11: duration: invalid duration "5 minutes"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	_, err = ParseScenario("s.yaml", []byte("name: x\nduration: 1h\ngenerators:\n  - {name: g, sizes: [], rate_per_hour: 0, runtime_min: 1m, runtime_max: 2m, flavors: [T4], regions: [eastus]}\n"))
	for _, want := range []string{"s.yaml:4:5: generators[0].sizes: list at least one size", "generators[0].rate_per_hour: give rate_per_hour > 0 or a count"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
