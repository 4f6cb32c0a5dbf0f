package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// StrategySource is a strategy file's text and how to read the files it
// names (its policies), so that tuning can change both and parse again.
type StrategySource struct {
	File     string
	Data     []byte
	ReadFile func(name string) ([]byte, error)
}

// StrategySourceFS reads name.yaml from fsys (a built-in strategy).
func StrategySourceFS(fsys fs.FS, name string) (*StrategySource, error) {
	data, err := fs.ReadFile(fsys, name+".yaml")
	if err != nil {
		return nil, fmt.Errorf("sim: strategy %q: %w", name, err)
	}
	dir := path.Dir(name)
	return &StrategySource{File: name + ".yaml", Data: data, ReadFile: func(n string) ([]byte, error) { return fs.ReadFile(fsys, path.Join(dir, n)) }}, nil
}

// StrategySourceFile reads a strategy file from disk.
func StrategySourceFile(file string) (*StrategySource, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	dir := filepath.Dir(file)
	return &StrategySource{File: file, Data: data, ReadFile: func(n string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, n)) }}, nil
}

// Setting is one value per knob, in the knobs file's order.
type Setting []string

func (s Setting) key() string { return strings.Join(s, "\x00") }

// Variant is a strategy with some knobs set: the strategy file's and its
// policy file's text.
type Variant struct {
	Strategy []byte
	// Policies is the policy file's text; nil when the strategy names none.
	Policies     []byte
	PoliciesName string // the policy file as the strategy names it
}

// Apply returns the strategy with the knobs set to setting. The YAML trees
// are changed node by node, so the rest of each file stays as written.
func (kf *KnobsFile) Apply(src *StrategySource, setting Setting) (*Variant, error) {
	var st, pol yaml.Node
	if err := yaml.Unmarshal(src.Data, &st); err != nil {
		return nil, fmt.Errorf("sim: %s: %w", src.File, err)
	}
	parsed, err := ParseStrategy(src.File, src.Data)
	if err != nil {
		return nil, err
	}
	v := &Variant{PoliciesName: parsed.Policies}
	if parsed.Policies != "" {
		data, err := src.ReadFile(parsed.Policies)
		if err != nil {
			return nil, fmt.Errorf("sim: strategy %s: policies: %w", parsed.Name, err)
		}
		if err := yaml.Unmarshal(data, &pol); err != nil {
			return nil, fmt.Errorf("sim: %s: %w", parsed.Policies, err)
		}
		v.Policies = data
	}
	polChanged := false
	for i, k := range kf.Knobs {
		doc := &st
		if k.path.policies {
			if v.Policies == nil {
				return nil, fmt.Errorf("sim: knob %s: strategy %s names no policy file", k.Label(), parsed.Name)
			}
			doc, polChanged = &pol, true
		}
		n, err := k.path.lookup(doc, true)
		if err != nil {
			return nil, fmt.Errorf("sim: knob %s: %w", k.Label(), err)
		}
		setScalar(n, setting[i])
	}
	if v.Strategy, err = encodeYAML(&st); err != nil {
		return nil, err
	}
	if polChanged {
		if v.Policies, err = encodeYAML(&pol); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// Current returns the values the knobs have in the strategy as written
// ("" for a key the file leaves unset).
func (kf *KnobsFile) Current(src *StrategySource) (Setting, error) {
	var st, pol yaml.Node
	if err := yaml.Unmarshal(src.Data, &st); err != nil {
		return nil, fmt.Errorf("sim: %s: %w", src.File, err)
	}
	parsed, err := ParseStrategy(src.File, src.Data)
	if err != nil {
		return nil, err
	}
	if parsed.Policies != "" {
		data, err := src.ReadFile(parsed.Policies)
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(data, &pol); err != nil {
			return nil, err
		}
	}
	var out Setting
	for _, k := range kf.Knobs {
		doc := &st
		if k.path.policies {
			doc = &pol
		}
		n, err := k.path.lookup(doc, false)
		switch {
		case errors.Is(err, ErrKnobPath) && lastKeyMissing(k.path, doc):
			out = append(out, "")
		case err != nil:
			return nil, fmt.Errorf("sim: knob %s: %w", k.Label(), err)
		default:
			out = append(out, n.Value)
		}
	}
	return out, nil
}

// lastKeyMissing reports whether only the path's last key is absent (a
// setting the file leaves at its default).
func lastKeyMissing(p knobPath, doc *yaml.Node) bool {
	if len(p.steps) == 0 {
		return false
	}
	last := p.steps[len(p.steps)-1]
	if len(last.sels) > 0 {
		return false
	}
	var cp yaml.Node
	if err := deepCopy(doc, &cp); err != nil {
		return false
	}
	_, err := p.lookup(&cp, true)
	return err == nil
}

func deepCopy(src, dst *yaml.Node) error {
	data, err := yaml.Marshal(src)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(data, dst)
}

func encodeYAML(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Parse loads the variant as a strategy (its policies read from the
// variant, other files through src).
func (v *Variant) Parse(src *StrategySource) (*Strategy, error) {
	st, err := ParseStrategy(src.File, v.Strategy)
	if err != nil {
		return nil, err
	}
	st.readFile = func(n string) ([]byte, error) {
		if v.Policies != nil && n == v.PoliciesName {
			return v.Policies, nil
		}
		return src.ReadFile(n)
	}
	return st, nil
}

// Trial is one setting evaluated: each metric over the seeds, the score
// and whether it meets the constraints (Broken says which it breaks).
type Trial struct {
	Setting Setting
	Metrics map[string]Stat
	Score   float64
	Broken  []string
	Runs    []*StrategyResult
}

// Feasible reports whether the trial meets every constraint.
func (t *Trial) Feasible() bool { return len(t.Broken) == 0 }

// Score ranks metrics by the objective: Σ ± weight × mean (higher is
// better); a metric that does not apply counts 0.
func (kf *KnobsFile) Score(ms map[string]Stat) float64 {
	var s float64
	for _, o := range kf.Objective {
		v := ms[o.Metric].Mean
		if o.Goal == "minimize" {
			v = -v
		}
		s += *o.Weight * v
	}
	return s
}

// Check returns the constraints the metrics break, in words.
func (kf *KnobsFile) Check(ms map[string]Stat) []string {
	var out []string
	for _, c := range kf.Constraints {
		st, ok := ms[c.Metric]
		if !ok || st.N == 0 {
			continue // n/a: no promise to break
		}
		if c.Min != nil && st.Mean < *c.Min {
			out = append(out, fmt.Sprintf("%s %.6g < min %g", c.Metric, st.Mean, *c.Min))
		}
		if c.Max != nil && st.Mean > *c.Max {
			out = append(out, fmt.Sprintf("%s %.6g > max %g", c.Metric, st.Mean, *c.Max))
		}
	}
	return out
}

// Evaluator runs a strategy on seeds (RunSeeds in use; tests fake it).
type Evaluator func(st *Strategy, seeds []uint64) ([]*StrategyResult, error)

// Tuner searches a strategy's knobs on tuning seeds.
type Tuner struct {
	Knobs  *KnobsFile
	Source *StrategySource
	Eval   Evaluator
	// OnTrial, when set, is called after each new setting is evaluated.
	OnTrial func(*Trial)

	tried map[string]*Trial
	order []*Trial
}

// TuneResult is a search's outcome: every trial in the order tried, the
// file's own setting (Baseline) and the best feasible one (Best; nil when
// none meets the constraints).
type TuneResult struct {
	Trials   []*Trial
	Baseline *Trial
	Best     *Trial
}

// ErrNoFeasible: no setting tried meets the constraints.
var ErrNoFeasible = errors.New("no setting meets the constraints")

// Run searches the knobs on seeds: every combination (grid) or one knob
// at a time from the file's own setting until a pass improves nothing
// (coordinate). Ties keep the earlier setting, so the search is
// deterministic.
func (t *Tuner) Run(seeds []uint64) (*TuneResult, error) {
	t.tried = map[string]*Trial{}
	t.order = nil
	cur, err := t.Knobs.Current(t.Source)
	if err != nil {
		return nil, err
	}
	base, err := t.trial(cur, seeds)
	if err != nil {
		return nil, err
	}
	best := base
	if !base.Feasible() {
		best = nil
	}
	if t.Knobs.Search == "grid" {
		err = t.grid(seeds, func(c *Trial) {
			if better(c, best) {
				best = c
			}
		})
	} else {
		best, err = t.coordinate(seeds, cur, best)
	}
	if err != nil {
		return nil, err
	}
	return &TuneResult{Trials: t.order, Baseline: base, Best: best}, nil
}

func (t *Tuner) grid(seeds []uint64, seen func(*Trial)) error {
	cands := make([][]string, len(t.Knobs.Knobs))
	for i := range t.Knobs.Knobs {
		cands[i] = t.Knobs.Knobs[i].Candidates()
	}
	idx := make([]int, len(cands))
	for {
		s := make(Setting, len(cands))
		for i, j := range idx {
			s[i] = cands[i][j]
		}
		c, err := t.trial(s, seeds)
		if err != nil {
			return err
		}
		seen(c)
		i := len(idx) - 1
		for ; i >= 0; i-- {
			if idx[i]++; idx[i] < len(cands[i]) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return nil
		}
	}
}

// better reports whether c is feasible and scores above best (nil: none
// yet); ties keep best.
func better(c, best *Trial) bool {
	return c.Feasible() && (best == nil || c.Score > best.Score)
}

func (t *Tuner) coordinate(seeds []uint64, cur Setting, best *Trial) (*Trial, error) {
	const maxPasses = 3
	at := append(Setting(nil), cur...)
	for pass := 0; pass < maxPasses; pass++ {
		improved := false
		for i := range t.Knobs.Knobs {
			for _, v := range t.Knobs.Knobs[i].Candidates() {
				s := append(Setting(nil), at...)
				s[i] = v
				c, err := t.trial(s, seeds)
				if err != nil {
					return nil, err
				}
				if better(c, best) {
					best, improved = c, true
				}
			}
			if best != nil {
				at = append(Setting(nil), best.Setting...)
			}
		}
		if !improved {
			break
		}
	}
	return best, nil
}

// trial evaluates a setting once (later asks reuse it).
func (t *Tuner) trial(s Setting, seeds []uint64) (*Trial, error) {
	if c, ok := t.tried[s.key()]; ok {
		return c, nil
	}
	c, err := t.Evaluate(s, seeds)
	if err != nil {
		return nil, err
	}
	t.tried[s.key()] = c
	t.order = append(t.order, c)
	if t.OnTrial != nil {
		t.OnTrial(c)
	}
	return c, nil
}

// Evaluate runs the strategy with setting s on seeds and scores it. An
// empty value (a key the file leaves unset) keeps the file as written.
func (t *Tuner) Evaluate(s Setting, seeds []uint64) (*Trial, error) {
	st, err := t.Strategy(s)
	if err != nil {
		return nil, err
	}
	runs, err := t.Eval(st, seeds)
	if err != nil {
		return nil, err
	}
	agg := Aggregate(st.Name, runs, SeedMetrics)
	return &Trial{Setting: s, Metrics: agg.Metrics, Score: t.Knobs.Score(agg.Metrics), Broken: t.Knobs.Check(agg.Metrics), Runs: runs}, nil
}

// Strategy is the strategy with setting s.
func (t *Tuner) Strategy(s Setting) (*Strategy, error) {
	v, err := t.Variant(s)
	if err != nil {
		return nil, err
	}
	return v.Parse(t.Source)
}

// Variant is the strategy's text with setting s (knobs with an empty
// value are left as written).
func (t *Tuner) Variant(s Setting) (*Variant, error) {
	kf := *t.Knobs
	kf.Knobs = nil
	var set Setting
	for i, k := range t.Knobs.Knobs {
		if s[i] != "" {
			kf.Knobs = append(kf.Knobs, k)
			set = append(set, s[i])
		}
	}
	return kf.Apply(t.Source, set)
}

// DefaultEvalSeeds are the held-out seeds after the tuning seeds: the
// next five after the largest.
func DefaultEvalSeeds(tuning []uint64) []uint64 {
	var hi uint64
	for _, s := range tuning {
		hi = max(hi, s)
	}
	var out []uint64
	for i := uint64(1); i <= 5 && hi+i > hi; i++ {
		out = append(out, hi+i)
	}
	return out
}

// Overlap returns a seed in both lists, or false.
func Overlap(a, b []uint64) (uint64, bool) {
	in := map[uint64]bool{}
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if in[x] {
			return x, true
		}
	}
	return 0, false
}

// Files returns the tuned strategy's text for outFile and, when it names
// a policy file, that file's name (next to outFile) and text: the strategy
// then names it, so that the pair loads from anywhere.
func (v *Variant) Files(outFile, comment, tuned string) (strategy []byte, policyFile string, policies []byte, err error) {
	var st yaml.Node
	if err := yaml.Unmarshal(v.Strategy, &st); err != nil {
		return nil, "", nil, err
	}
	if len(st.Content) > 0 {
		st.Content[0].HeadComment = comment
	}
	// The description is what the report says of the strategy: it says
	// what tuning changed, since its own numbers are the file's before.
	if d, err := (knobPath{steps: []pathStep{{key: "description"}}}).lookup(&st, false); err == nil && d.Value != "" && tuned != "" {
		setScalar(d, d.Value+" "+tuned)
	}
	if v.Policies != nil {
		policyFile = strings.TrimSuffix(filepath.Base(outFile), filepath.Ext(outFile)) + ".policies.yaml"
		n, err := knobPath{steps: []pathStep{{key: "policies"}}}.lookup(&st, false)
		if err != nil {
			return nil, "", nil, err
		}
		setScalar(n, policyFile)
		policies = v.Policies
	}
	strategy, err = encodeYAML(&st)
	return strategy, policyFile, policies, err
}
