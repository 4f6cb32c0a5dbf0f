package sim

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/examples"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/resource"

	"go.yaml.in/yaml/v3"
)

func TestParseKnobsErrors(t *testing.T) {
	const head = "strategy: hybrid\nobjective:\n  - {metric: gpu_utilization}\nknobs:\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"no strategy", "objective: [{metric: gpu_utilization}]\nknobs: [{path: a, values: [1]}]\n", "k.yaml:1:1: strategy: name the strategy"},
		{"unknown metric", "strategy: s\nobjective:\n  - {metric: gpu_utilisation}\nknobs: [{path: a, values: [1]}]\n", `k.yaml:3:5: objective[0].metric: unknown metric "gpu_utilisation" (did you mean "gpu_utilization"?)`},
		{"no direction", "strategy: s\nobjective:\n  - {metric: cost_usd}\nknobs: [{path: a, values: [1]}]\n", "objective[0].goal: metric cost_usd has no better direction"},
		{"bad goal", "strategy: s\nobjective:\n  - {metric: cost_usd, goal: up}\nknobs: [{path: a, values: [1]}]\n", `objective[0].goal: "up": use maximize or minimize`},
		{"bad weight", "strategy: s\nobjective:\n  - {metric: cost_usd, goal: minimize, weight: -1}\nknobs: [{path: a, values: [1]}]\n", "objective[0].weight: want a positive number"},
		{"no knobs", "strategy: s\nobjective: [{metric: gpu_utilization}]\n", "knobs: declare at least one knob"},
		{"values and range", head + "  - {path: a, values: [1], range: {from: 1, to: 2, step: 1}}\n", "k.yaml:5:5: knobs[0]: give values or range, not both"},
		{"no values", head + "  - {path: a}\n", "knobs[0]: give the values to try"},
		{"bad step", head + "  - {path: a, range: {from: 1, to: 2, step: 0}}\n", "knobs[0].range.step: want a positive step"},
		{"range backwards", head + "  - {path: a, range: {from: 3, to: 2, step: 1}}\n", "knobs[0].range: to 2 is below from 3"},
		{"range too long", head + "  - {path: a, range: {from: 0, to: 1000, step: 1}}\n", "more than 50 values"},
		{"bad path", head + "  - {path: \"a[\", values: [1]}\n", "knobs[0].path: bad knob path: unclosed ["},
		{"empty path", head + "  - {values: [1]}\n", "knobs[0].path: bad knob path: empty"},
		{"bad selector", head + "  - {path: \"a[x]\", values: [1]}\n", "want an index or field=value"},
		{"twice", head + "  - {path: a, values: [1]}\n  - {path: a, values: [2]}\n", `knob "a" is declared twice`},
		{"grid too big", head + strings.Repeat("  - {path: a, range: {from: 0, to: 9, step: 1}}\n", 1) +
			"  - {path: b, range: {from: 0, to: 9, step: 1}}\n  - {path: c, range: {from: 0, to: 9, step: 1}}\n", "the grid passes 256 settings"},
		{"bad search", "strategy: s\nsearch: random\nobjective: [{metric: gpu_utilization}]\nknobs: [{path: a, values: [1]}]\n", `search: "random": use grid or coordinate`},
		{"constraint", "strategy: s\nobjective: [{metric: gpu_utilization}]\nconstraints:\n  - {metric: preemptions}\nknobs: [{path: a, values: [1]}]\n", "k.yaml:4:5: constraints[0]: give min, max or both"},
		{"unknown field", head + "  - {path: a, valeus: [1]}\n", "valeus"},
		{"after a decode error", "strategy: s\nobjective:\n  - {metric: cost_usd, goal: minimize, weight: heavy}\nknobs: [{path: a, values: [1]}, {path: a, values: [2]}]\n",
			"k.yaml:3:48: objective[0].weight: want a number, got \"heavy\"\nk.yaml:4:33: knobs[1].path: knob \"a\" is declared twice"},
	} {
		_, err := ParseKnobs("k.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func FuzzParseKnobs(f *testing.F) {
	for _, name := range []string{"static", "dynamic", "hybrid"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", "knobs", name+".yaml"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("strategy: s\nobjective: [{metric: gpu_utilization}]\nknobs: [{path: \"a[1].b[x=y,z=w]\", range: {from: 0.1, to: 0.3, step: 0.1}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		kf, err := ParseKnobs("k.yaml", data)
		if err != nil {
			return
		}
		grid := 1
		for _, k := range kf.Knobs {
			n := len(k.Candidates())
			if n == 0 || n > maxKnobValues {
				t.Fatalf("knob %s: %d candidates", k.Path, n)
			}
			grid *= n
			if p, err := parseKnobPath(k.path.String()); err != nil || !reflect.DeepEqual(p, k.path) {
				t.Fatalf("path %q does not round-trip: %v", k.Path, err)
			}
		}
		if kf.Search == "grid" && grid > maxGridSettings {
			t.Fatalf("grid of %d settings accepted", grid)
		}
	})
}

func TestKnobRangeCandidates(t *testing.T) {
	k := Knob{Range: &KnobRange{From: 0.1, To: 0.3, Step: 0.1, Unit: "%"}}
	if got, want := k.Candidates(), []string{"0.1%", "0.2%", "0.3%"}; !reflect.DeepEqual(got, want) {
		t.Errorf("candidates %v, want %v", got, want)
	}
}

func loadKnobs(t *testing.T, name string) (*KnobsFile, *StrategySource) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "knobs", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kf, err := ParseKnobs(name+".yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	src, err := StrategySourceFS(examples.FS, "strategies/"+kf.Strategy)
	if err != nil {
		t.Fatal(err)
	}
	return kf, src
}

// TestKnobsApply: every example knobs file names real settings of its
// strategy; setting them changes those settings and nothing else.
func TestKnobsApply(t *testing.T) {
	for _, name := range []string{"static", "dynamic", "hybrid"} {
		kf, src := loadKnobs(t, name)
		cur, err := kf.Current(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tn := &Tuner{Knobs: kf, Source: src}
		same, err := tn.Strategy(cur)
		if err != nil {
			t.Fatal(err)
		}
		orig, err := LoadStrategy(examples.FS, "strategies/"+name)
		if err != nil {
			t.Fatal(err)
		}
		same.readFile, orig.readFile = nil, nil
		if !reflect.DeepEqual(stripPos(same), stripPos(orig)) {
			t.Errorf("%s: the file's own setting %v does not give the file back", name, cur)
		}
		for i, k := range kf.Knobs {
			last := k.Candidates()[len(k.Candidates())-1]
			s := append(Setting(nil), cur...)
			s[i] = last
			v, err := tn.Variant(s)
			if err != nil {
				t.Fatalf("%s: knob %s: %v", name, k.Label(), err)
			}
			got, err := kf.Current(&StrategySource{File: src.File, Data: v.Strategy, ReadFile: func(n string) ([]byte, error) {
				if n == v.PoliciesName {
					return v.Policies, nil
				}
				return src.ReadFile(n)
			}})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, s) {
				t.Errorf("%s: set knob %s to %s: settings read back %v, want %v", name, k.Label(), last, got, s)
			}
			if _, err := v.Parse(src); err != nil {
				t.Errorf("%s: knob %s = %s: %v", name, k.Label(), last, err)
			}
		}
	}
}

func stripPos(st *Strategy) *Strategy {
	c := *st
	c.Classes = append([]ClassOverride(nil), st.Classes...)
	for i := range c.Classes {
		c.Classes[i].Pos = c.Classes[0].Pos
	}
	return &c
}

// TestDynamicRulesVerbatim: the dynamic strategy's rules carry the
// mission's names (MISSION.md, "Dynamic priority scheduling"), and a tuned
// policy keeps them: tuning changes numbers, not rules.
func TestDynamicRulesVerbatim(t *testing.T) {
	want := []string{"ai_training_priority", "customer_sla_protection"}
	kf, src := loadKnobs(t, "dynamic")
	tn := &Tuner{Knobs: kf, Source: src}
	s := Setting{"90%", "50%", "200ms", "10m"}
	v, err := tn.Variant(s)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := src.ReadFile("../policies/operators.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{orig, v.Policies} {
		p, err := policy.Load("operators.yaml", data)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range p.Rules {
			names = append(names, r.Name)
		}
		if !reflect.DeepEqual(names, want) {
			t.Errorf("dynamic's rules are %v, want the mission's %v", names, want)
		}
	}
	for _, x := range []string{"utilization_threshold: 90%", "min_capacity: 50%", "threshold: 200ms", "duration: 10m"} {
		if !strings.Contains(string(v.Policies), x) {
			t.Errorf("tuned policies lack %q:\n%s", x, v.Policies)
		}
	}
}

// fakeEval scores a hybrid variant by its enterprise A100 eastus and
// training guarantees: failures are least at 1200, training best at 512,
// and 1400 breaks the reservation promise.
func fakeEval(calls *int) Evaluator {
	return func(st *Strategy, seeds []uint64) ([]*StrategyResult, error) {
		*calls++
		var ent, tr float64
		for _, tn := range st.Tenants {
			for _, q := range tn.Quota {
				g := float64(q.Guaranteed) / resource.PerGPU
				switch {
				case tn.Name == "enterprise" && q.Flavor == "A100-80G" && q.Region == "eastus":
					ent = g
				case tn.Name == "training":
					tr = g
				}
			}
		}
		var out []*StrategyResult
		for _, seed := range seeds {
			r := &StrategyResult{CustomerCapacityFailureRate: math.Abs(ent-1200)/1000 + float64(seed%2)*0.001,
				GPUUtilization: tr / 1000, CapacityGPUHours: 100, CustomerRequests: 100, ReservationHonourRate: 1, Reservations: ReservationClaims{Claims: 10, Honoured: 10}}
			if ent >= 1400 {
				r.ReservationHonourRate, r.Reservations.Honoured = 0.9, 9
			}
			out = append(out, r)
		}
		return out, nil
	}
}

const fakeKnobs = `strategy: hybrid
search: %s
objective:
  - {metric: customer_capacity_failure_rate}
  - {metric: gpu_utilization, weight: 0.1}
constraints:
  - {metric: reservation_honour_rate, min: 1}
knobs:
  - path: tenants[name=enterprise].quota[flavor=A100-80G,region=eastus].guaranteed
    values: [1000, 1400, 1200]
  - path: tenants[name=training].quota[flavor=A100-80G,region=eastus].guaranteed
    range: {from: 128, to: 512, step: 128}
`

// TestTunerSearch: grid and coordinate search find the best feasible
// setting, never one that breaks a constraint, and coordinate search
// tries fewer settings.
func TestTunerSearch(t *testing.T) {
	src, err := StrategySourceFS(examples.FS, "strategies/hybrid")
	if err != nil {
		t.Fatal(err)
	}
	want := Setting{"1200", "512"}
	var tried [2]int
	for i, search := range []string{"grid", "coordinate"} {
		kf, err := ParseKnobs("k.yaml", []byte(strings.Replace(fakeKnobs, "%s", search, 1)))
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		tn := &Tuner{Knobs: kf, Source: src, Eval: fakeEval(&calls)}
		res, err := tn.Run([]uint64{1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		if res.Best == nil || !reflect.DeepEqual(res.Best.Setting, want) {
			t.Fatalf("%s: best %+v, want %v", search, res.Best, want)
		}
		if !reflect.DeepEqual(res.Baseline.Setting, Setting{"1200", "256"}) {
			t.Errorf("%s: baseline %v, want the file's own 1200, 256", search, res.Baseline.Setting)
		}
		for _, tr := range res.Trials {
			if tr.Setting[0] == "1400" && tr.Feasible() {
				t.Errorf("%s: %v meets the honour constraint", search, tr.Setting)
			}
		}
		if calls != len(res.Trials) {
			t.Errorf("%s: %d evaluations for %d distinct settings", search, calls, len(res.Trials))
		}
		tried[i] = len(res.Trials)
	}
	if tried[0] != 12 || tried[1] >= tried[0] {
		t.Errorf("settings tried: grid %d (want 3 × 4 = 12; the baseline is one of them), coordinate %d (want fewer)", tried[0], tried[1])
	}
}

// TestCoordinateKeepsTheBest: when two values of a knob both beat the
// setting it started from, the search keeps the better one, not the one
// tried last (it compared each with the starting setting: a static tune
// moved on from 717 at 2.164 to 820 at 2.133).
func TestCoordinateKeepsTheBest(t *testing.T) {
	src, _ := StrategySourceFS(examples.FS, "strategies/hybrid")
	knobs := strings.Replace(strings.Replace(fakeKnobs, "%s", "coordinate", 1), "range: {from: 128, to: 512, step: 128}", "values: [512, 384, 128]", 1)
	kf, err := ParseKnobs("k.yaml", []byte(knobs))
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	res, err := (&Tuner{Knobs: kf, Source: src, Eval: fakeEval(&calls)}).Run([]uint64{1})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Setting{"1200", "512"}); res.Best == nil || !reflect.DeepEqual(res.Best.Setting, want) {
		t.Fatalf("best %+v, want %v (training 512 scores highest)", res.Best, want)
	}
	for _, tr := range res.Trials {
		if tr.Score > res.Best.Score && tr.Feasible() {
			t.Errorf("trial %v scores %v, above the best's %v", tr.Setting, tr.Score, res.Best.Score)
		}
	}
}

func TestTunerNoFeasible(t *testing.T) {
	src, _ := StrategySourceFS(examples.FS, "strategies/hybrid")
	kf, err := ParseKnobs("k.yaml", []byte(strings.Replace(strings.Replace(fakeKnobs, "%s", "grid", 1), "[1000, 1400, 1200]", "[1400, 1500]", 1)))
	if err != nil {
		t.Fatal(err)
	}
	// The file's own 1200 is feasible: it stays the best.
	calls := 0
	res, err := (&Tuner{Knobs: kf, Source: src, Eval: fakeEval(&calls)}).Run([]uint64{1})
	if err != nil || res.Best != res.Baseline {
		t.Fatalf("best %+v, err %v; want the baseline", res.Best, err)
	}
}

func TestDefaultEvalSeeds(t *testing.T) {
	if got := DefaultEvalSeeds([]uint64{1, 2, 3, 4, 5}); !reflect.DeepEqual(got, []uint64{6, 7, 8, 9, 10}) {
		t.Errorf("eval seeds %v", got)
	}
	if got := DefaultEvalSeeds([]uint64{math.MaxUint64 - 1}); !reflect.DeepEqual(got, []uint64{math.MaxUint64}) {
		t.Errorf("eval seeds near the top %v", got)
	}
	if _, ok := Overlap([]uint64{1, 2}, []uint64{3, 2}); !ok {
		t.Error("overlap not found")
	}
	if errors.Is(ErrNoFeasible, ErrSeeds) {
		t.Error("sentinels alike")
	}
}

// TestTunedFileKeepsBlockScalars: a tuned strategy is written back through
// the YAML tree; a folded or literal description keeps its text (the
// writer may wrap it differently, which moves later lines of the new
// file, not any value).
func TestTunedFileKeepsBlockScalars(t *testing.T) {
	kf, src := loadKnobs(t, "hybrid")
	orig, err := LoadStrategy(examples.FS, "strategies/hybrid")
	if err != nil {
		t.Fatal(err)
	}
	folded := strings.Replace(string(src.Data), "description: \""+orig.Description+"\"",
		"description: >-\n  Three layers, folded\n  over lines.\n\n  A second paragraph.\n", 1)
	if folded == string(src.Data) {
		t.Fatal("the hybrid strategy's description is no longer one quoted line")
	}
	src.Data = []byte(folded)
	tn := &Tuner{Knobs: kf, Source: src}
	cur, err := kf.Current(src)
	if err != nil {
		t.Fatal(err)
	}
	cur[0] = kf.Knobs[0].Candidates()[0]
	v, err := tn.Variant(cur)
	if err != nil {
		t.Fatal(err)
	}
	var before, after map[string]any
	if err := yaml.Unmarshal(src.Data, &before); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(v.Strategy, &after); err != nil {
		t.Fatal(err)
	}
	if before["description"] != "Three layers, folded over lines.\nA second paragraph." || after["description"] != before["description"] {
		t.Errorf("description %q written back as %q", before["description"], after["description"])
	}
	if _, err := v.Parse(src); err != nil {
		t.Fatal(err)
	}
}
