package sim

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// Bounds of a knobs file: what one tuning run may try.
const (
	maxKnobs        = 16
	maxKnobValues   = 50
	maxGridSettings = 256
)

// KnobsFile declares, for one strategy, the knobs `arbiter sim tune`
// searches, the objective it maximizes and the constraints a setting must
// meet.
type KnobsFile struct {
	Pos      yamlfile.Pos
	Strategy string `yaml:"strategy"` // the strategy's name (checked against --strategy)
	// Search is "grid" (every combination, the default) or "coordinate"
	// (one knob at a time from the file's own setting, until no knob
	// improves).
	Search      string       `yaml:"search"`
	Objective   []Objective  `yaml:"objective"`
	Constraints []Constraint `yaml:"constraints"`
	Knobs       []Knob       `yaml:"knobs"`
}

// Objective is one term of the score a setting is ranked by: weight ×
// the metric's mean over the tuning seeds, added when the goal is to
// maximize and subtracted when it is to minimize.
type Objective struct {
	Pos    yamlfile.Pos
	Metric string   `yaml:"metric"`
	Goal   string   `yaml:"goal"`   // maximize or minimize; default: the metric's better direction
	Weight *float64 `yaml:"weight"` // default 1
}

// Constraint bounds a metric's mean over the tuning seeds; a setting that
// breaks one is not a candidate. A metric that does not apply (n/a, such
// as the honour rate without claims) meets it.
type Constraint struct {
	Pos    yamlfile.Pos
	Metric string   `yaml:"metric"`
	Min    *float64 `yaml:"min"`
	Max    *float64 `yaml:"max"`
}

// Knob is one setting in the strategy file (or, with the "policies:"
// prefix, in its policy file) and the values to try: a list, or a
// numeric range.
type Knob struct {
	Pos    yamlfile.Pos
	Name   string     `yaml:"name"` // a short label (default: the path)
	Path   string     `yaml:"path"`
	Values []string   `yaml:"values"`
	Range  *KnobRange `yaml:"range"`

	path knobPath
}

// KnobRange is from, from+step, ... up to to, each written with unit
// appended ("%", "ms").
type KnobRange struct {
	Pos  yamlfile.Pos
	From float64 `yaml:"from"`
	To   float64 `yaml:"to"`
	Step float64 `yaml:"step"`
	Unit string  `yaml:"unit"`
}

// Label is the knob's name, or its path.
func (k *Knob) Label() string {
	if k.Name != "" {
		return k.Name
	}
	return k.Path
}

// Candidates are the values the knob may take, as YAML scalars.
func (k *Knob) Candidates() []string {
	if k.Range == nil {
		return k.Values
	}
	r := k.Range
	var out []string
	n := int(math.Floor((r.To-r.From)/r.Step+1e-9)) + 1
	for i := 0; i < n; i++ {
		x := r.From + float64(i)*r.Step
		x = math.Round(x*1e9) / 1e9 // 0.1+0.2 is 0.3
		out = append(out, strconv.FormatFloat(x, 'f', -1, 64)+r.Unit)
	}
	return out
}

// ParseKnobs decodes and checks a knobs file; every problem is reported
// with its line and field.
func ParseKnobs(file string, data []byte) (*KnobsFile, error) {
	var kf KnobsFile
	decodeErr := yamlfile.Decode(file, data, &kf)
	if yamlfile.Stopped(decodeErr) {
		return nil, decodeErr
	}
	var errs yamlfile.Errors
	fail := func(p yamlfile.Pos, field, format string, args ...any) {
		if p.Line == 0 {
			p = yamlfile.Pos{File: file, Line: 1, Col: 1}
		}
		errs = append(errs, &yamlfile.Error{Pos: p, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if kf.Strategy == "" {
		fail(kf.Pos, "strategy", "name the strategy these knobs are for")
	}
	switch kf.Search {
	case "":
		kf.Search = "grid"
	case "grid", "coordinate":
	default:
		fail(kf.Pos, "search", "%q: use grid or coordinate", kf.Search)
	}
	if len(kf.Objective) == 0 {
		fail(kf.Pos, "objective", "give at least one metric to optimize")
	}
	for i := range kf.Objective {
		o := &kf.Objective[i]
		field := fmt.Sprintf("objective[%d]", i)
		m, ok := knownMetric(o.Metric)
		if !ok {
			fail(o.Pos, field+".metric", "unknown metric %q%s", o.Metric, yamlfile.DidYouMean(o.Metric, metricKeys()))
		}
		switch o.Goal {
		case "maximize", "minimize":
		case "":
			switch {
			case !ok:
			case m.Better > 0:
				o.Goal = "maximize"
			case m.Better < 0:
				o.Goal = "minimize"
			default:
				fail(o.Pos, field+".goal", "metric %s has no better direction: say maximize or minimize", o.Metric)
			}
		default:
			fail(o.Pos, field+".goal", "%q: use maximize or minimize", o.Goal)
		}
		if o.Weight == nil {
			one := 1.0
			o.Weight = &one
		} else if *o.Weight <= 0 || math.IsInf(*o.Weight, 0) || math.IsNaN(*o.Weight) {
			fail(o.Pos, field+".weight", "want a positive number, got %v", *o.Weight)
		}
	}
	for i, c := range kf.Constraints {
		field := fmt.Sprintf("constraints[%d]", i)
		if _, ok := knownMetric(c.Metric); !ok {
			fail(c.Pos, field+".metric", "unknown metric %q%s", c.Metric, yamlfile.DidYouMean(c.Metric, metricKeys()))
		}
		if c.Min == nil && c.Max == nil {
			fail(c.Pos, field, "give min, max or both")
		}
		if c.Min != nil && c.Max != nil && *c.Min > *c.Max {
			fail(c.Pos, field, "min %v is above max %v", *c.Min, *c.Max)
		}
	}
	if len(kf.Knobs) == 0 {
		fail(kf.Pos, "knobs", "declare at least one knob")
	}
	if len(kf.Knobs) > maxKnobs {
		fail(kf.Pos, "knobs", "%d knobs, at most %d", len(kf.Knobs), maxKnobs)
	}
	grid := 1
	for i := range kf.Knobs {
		k := &kf.Knobs[i]
		field := fmt.Sprintf("knobs[%d]", i)
		p, err := parseKnobPath(k.Path)
		if err != nil {
			fail(k.Pos, field+".path", "%v", err)
		}
		k.path = p
		switch {
		case k.Range != nil && len(k.Values) > 0:
			fail(k.Pos, field, "give values or range, not both")
		case k.Range == nil && len(k.Values) == 0:
			fail(k.Pos, field, "give the values to try (values: [...] or range: {from, to, step})")
		case k.Range != nil:
			r := k.Range
			bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }
			switch {
			case bad(r.From) || bad(r.To) || bad(r.Step) || r.Step <= 0:
				fail(r.Pos, field+".range.step", "want a positive step and finite from and to")
			case r.To < r.From:
				fail(r.Pos, field+".range", "to %v is below from %v", r.To, r.From)
			case (r.To-r.From)/r.Step >= maxKnobValues:
				fail(r.Pos, field+".range", "more than %d values", maxKnobValues)
			}
		case len(k.Values) > maxKnobValues:
			fail(k.Pos, field+".values", "%d values, at most %d", len(k.Values), maxKnobValues)
		}
		for j := 0; j < i; j++ {
			if kf.Knobs[j].Path == k.Path && k.Path != "" {
				fail(k.Pos, field+".path", "knob %q is declared twice", k.Path)
			}
		}
		if len(errs) == 0 && decodeErr == nil {
			grid *= len(k.Candidates())
			if kf.Search == "grid" && grid > maxGridSettings {
				fail(k.Pos, field, "the grid passes %d settings: use fewer values or search: coordinate", maxGridSettings)
			}
		}
	}
	if err := yamlfile.Merge(decodeErr, errs).Err(); err != nil {
		return nil, err
	}
	return &kf, nil
}

func knownMetric(key string) (SeedMetric, bool) { return SeedMetricByKey(key) }

func metricKeys() []string {
	var out []string
	for _, m := range SeedMetrics {
		out = append(out, m.Key)
	}
	return out
}

// knobPath is a parsed knob path: the file (strategy or its policies)
// and the steps from the document's root.
type knobPath struct {
	policies bool
	steps    []pathStep
}

// pathStep is a mapping key, then optional sequence selectors: an index
// or field=value matches.
type pathStep struct {
	key  string
	sels []selector
}

type selector struct {
	index int // >= 0: by position
	match [][2]string
}

// ErrKnobPath is the sentinel of knob path errors.
var ErrKnobPath = errors.New("bad knob path")

func pathErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrKnobPath, fmt.Sprintf(format, args...))
}

// parseKnobPath parses "a.b[2].c[name=x,region=y].d", optionally
// prefixed "policies:" for the strategy's policy file.
func parseKnobPath(s string) (knobPath, error) {
	var p knobPath
	if len(s) > 500 {
		return p, pathErr("longer than 500 characters")
	}
	if rest, ok := strings.CutPrefix(s, "policies:"); ok {
		p.policies, s = true, rest
	}
	if s == "" {
		return p, pathErr(`empty: write e.g. tenants[name=enterprise].quota[flavor=A100-80G,region=eastus].guaranteed`)
	}
	for s != "" {
		var st pathStep
		i := strings.IndexAny(s, ".[")
		if i < 0 {
			i = len(s)
		}
		st.key, s = s[:i], s[i:]
		if st.key == "" {
			return p, pathErr("an empty key")
		}
		if strings.ContainsAny(st.key, "]=,") {
			return p, pathErr("key %q: unexpected ], = or ,", st.key)
		}
		for strings.HasPrefix(s, "[") {
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return p, pathErr("unclosed [ after %q", st.key)
			}
			sel, err := parseSelector(s[1:end])
			if err != nil {
				return p, err
			}
			st.sels = append(st.sels, sel)
			s = s[end+1:]
		}
		p.steps = append(p.steps, st)
		if s == "" {
			break
		}
		if s[0] != '.' || len(s) == 1 {
			return p, pathErr("want . between steps, at %q", s)
		}
		s = s[1:]
	}
	return p, nil
}

func parseSelector(s string) (selector, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return selector{}, pathErr("index %d below 0", n)
		}
		return selector{index: n}, nil
	}
	sel := selector{index: -1}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" || strings.ContainsAny(k+v, "[]") {
			return selector{}, pathErr("selector [%s]: want an index or field=value, ...", s)
		}
		sel.match = append(sel.match, [2]string{k, v})
	}
	return sel, nil
}

// String writes the path back.
func (p knobPath) String() string {
	var b strings.Builder
	if p.policies {
		b.WriteString("policies:")
	}
	for i, st := range p.steps {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(st.key)
		for _, sel := range st.sels {
			if sel.index >= 0 {
				fmt.Fprintf(&b, "[%d]", sel.index)
				continue
			}
			var kvs []string
			for _, m := range sel.match {
				kvs = append(kvs, m[0]+"="+m[1])
			}
			b.WriteString("[" + strings.Join(kvs, ",") + "]")
		}
	}
	return b.String()
}

// lookup finds the scalar the path names in doc (a document node). With
// create, a missing last key of a mapping is added (e.g. a quota entry's
// lendable); every other step must exist.
func (p knobPath) lookup(doc *yaml.Node, create bool) (*yaml.Node, error) {
	n := doc
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil, pathErr("%s: the file is empty", p)
		}
		n = n.Content[0]
	}
	for si, st := range p.steps {
		if n.Kind != yaml.MappingNode {
			return nil, pathErr("%s: %q is not under a mapping", p, st.key)
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == st.key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			if !create || si != len(p.steps)-1 || len(st.sels) > 0 {
				return nil, pathErr("%s: no key %q", p, st.key)
			}
			next = &yaml.Node{Kind: yaml.ScalarNode}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: st.key}, next)
		}
		n = next
		for _, sel := range st.sels {
			m, err := sel.pick(n)
			if err != nil {
				return nil, pathErr("%s: %s: %v", p, st.key, err)
			}
			n = m
		}
	}
	if n.Kind != yaml.ScalarNode {
		return nil, pathErr("%s: not a single value", p)
	}
	return n, nil
}

// pick returns the one sequence item the selector names.
func (sel selector) pick(n *yaml.Node) (*yaml.Node, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, errors.New("not a list")
	}
	if sel.index >= 0 {
		if sel.index >= len(n.Content) {
			return nil, fmt.Errorf("index %d: the list has %d items", sel.index, len(n.Content))
		}
		return n.Content[sel.index], nil
	}
	var found []*yaml.Node
	for _, item := range n.Content {
		if item.Kind == yaml.MappingNode && matches(item, sel.match) {
			found = append(found, item)
		}
	}
	switch len(found) {
	case 0:
		return nil, errors.New("no item matches")
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("%d items match: add a field=value", len(found))
}

func matches(m *yaml.Node, kvs [][2]string) bool {
	for _, kv := range kvs {
		ok := false
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == kv[0] && m.Content[i+1].Kind == yaml.ScalarNode && m.Content[i+1].Value == kv[1] {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// setScalar writes value into a scalar node, as plain YAML (it resolves
// to a number, a string such as "85%", ...).
func setScalar(n *yaml.Node, value string) {
	n.Kind, n.Tag, n.Style, n.Value = yaml.ScalarNode, "", 0, value
}
