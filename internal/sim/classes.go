package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// Promise is what an operator promises a class of workloads: the classes
// with a promise are the headline of the comparison.
type Promise string

const (
	// PromiseSLA: capacity under a service-level agreement (enterprise VMs).
	PromiseSLA Promise = "sla"
	// PromiseReservation: capacity the customer reserved and may claim.
	PromiseReservation Promise = "reservation"
	// PromiseSLO: a latency objective (an inference service's SLO).
	PromiseSLO Promise = "slo"
	// PromiseNone: best effort (internal training, dev/test, batch, spot).
	PromiseNone Promise = "none"
)

// Promised reports whether the operator promises the class something.
func (p Promise) Promised() bool { return p != PromiseNone && p != "" }

// ClassGroup is one class of the results, as the scenario's `classes:`
// section defines it: a name (the results.json key), a display name, the
// promise, and the workload `class` labels it groups. A workload class
// label no group matches is a class of its own, named by the label, with
// no promise.
type ClassGroup struct {
	Pos     yamlfile.Pos
	Name    string   `yaml:"name"`
	Display string   `yaml:"display"`
	Promise Promise  `yaml:"promise"`
	Match   []string `yaml:"match"`
}

// Bounds of the classes section (it is user input).
const (
	maxClassGroups = 64
	maxClassName   = 64
	maxClassLabels = 256
)

var classNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// checkClasses checks the scenario's classes section: names unique and
// short, a known promise, each label in one class at most, and no class
// named as a workload class label it does not match.
func (s *Scenario) checkClasses(errs *yamlfile.Errors, at yamlfile.Pos) {
	if len(s.Classes) > maxClassGroups {
		errs.Add(at, "classes", "%d classes: at most %d", len(s.Classes), maxClassGroups)
		return
	}
	names := map[string]bool{}
	owner := map[string]string{} // label -> class name
	for i := range s.Classes {
		c := &s.Classes[i]
		f := fmt.Sprintf("classes[%d]", i)
		switch {
		case c.Name == "":
			errs.Add(c.Pos, f+".name", "a class needs a name, such as enterprise_sla_vms")
		case len(c.Name) > maxClassName || !classNameRE.MatchString(c.Name):
			errs.Add(c.Pos, f+".name", "%q: use at most %d lower-case letters, digits, _ . or -", trunc(c.Name), maxClassName)
		case names[c.Name]:
			errs.Add(c.Pos, f+".name", "class %q is defined twice", c.Name)
		}
		names[c.Name] = true
		if len(c.Display) > 2*maxClassName || strings.IndexFunc(c.Display, unicode.IsControl) >= 0 {
			errs.Add(c.Pos, f+".display", "at most %d characters, no control characters", 2*maxClassName)
		}
		switch c.Promise {
		case "":
			c.Promise = PromiseNone
		case PromiseSLA, PromiseReservation, PromiseSLO, PromiseNone:
		default:
			errs.Add(c.Pos, f+".promise", "unknown promise %q: write sla, reservation, slo or none", trunc(string(c.Promise)))
		}
		if len(c.Match) == 0 {
			errs.Add(c.Pos, f+".match", "list the workload class labels it groups, such as [enterprise_vms]")
		}
		if len(c.Match) > maxClassLabels {
			errs.Add(c.Pos, f+".match", "%d labels: at most %d", len(c.Match), maxClassLabels)
			continue
		}
		for _, l := range c.Match {
			if o, dup := owner[l]; dup {
				errs.Add(c.Pos, f+".match", "label %q is already in class %q", trunc(l), o)
			}
			owner[l] = c.Name
		}
	}
	for _, l := range s.workloadClasses() {
		if names[l] && owner[l] == "" {
			errs.Add(at, "classes", "workload class %q matches no class but a class has its name: add it to that class's match", trunc(l))
		}
	}
}

// trunc shortens a user's value for an error message.
func trunc(s string) string {
	if len(s) > maxClassName {
		return s[:maxClassName] + "…"
	}
	return s
}

// workloadClasses returns the class labels of the scenario's generators
// and services (the default class is the name), in scenario order.
func (s *Scenario) workloadClasses() []string {
	var out []string
	seen := map[string]bool{}
	add := func(c, name string) {
		if c == "" {
			c = name
		}
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	for _, sv := range s.Services {
		add(sv.Class, sv.Name)
	}
	for _, g := range s.Generators {
		add(g.Class, g.Name)
	}
	return out
}

// ClassResult is one class's account in results.json (its key is Name).
type ClassResult struct {
	Name    string  `json:"-"`
	Display string  `json:"display"`
	Promise Promise `json:"promise"`
	// Labels are the workload class labels it covers; Kinds the kinds of
	// workload submitted in it.
	Labels   []string `json:"labels"`
	Kinds    []string `json:"kinds"`
	Requests int      `json:"requests"`
	// Patient counts the requests with a patience (only they can fail).
	Patient                  int            `json:"requests_with_patience"`
	CapacityFailures         int            `json:"capacity_failures"`
	CapacityFailureRate      float64        `json:"capacity_failure_rate"`
	CapacityFailuresByReason map[string]int `json:"capacity_failures_by_reason"`
	Placed                   int            `json:"placed"`
	TimeToCapacityP50S       float64        `json:"time_to_capacity_p50_s"`
	TimeToCapacityP95S       float64        `json:"time_to_capacity_p95_s"`
	Preemptions              int            `json:"preemptions"`
	SpotEvictions            int            `json:"spot_evictions"`
	GPUHours                 float64        `json:"gpu_hours"`
	LostGPUHours             float64        `json:"lost_to_preemption_gpu_hours"`

	waits []float64 // seconds from submission to first placement
	kinds map[string]bool
}

type classResultJSON ClassResult

// MarshalJSON writes the class with its metrics that do not apply
// (ClassMetrics' Value not ok) as null.
func (c *ClassResult) MarshalJSON() ([]byte, error) {
	var na []string
	for _, d := range ClassMetrics {
		if d.Value != nil {
			if _, ok := d.Value(c); !ok {
				na = append(na, d.Key)
			}
		}
	}
	return marshalNA((*classResultJSON)(c), na)
}

// ClassResults are the classes of a strategy's run in scenario order;
// results.json writes them as an object keyed by class name.
type ClassResults []*ClassResult

// Get returns the class named name, or nil.
func (cs ClassResults) Get(name string) *ClassResult {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// MarshalJSON writes {"name": {...}, ...} in order.
func (cs ClassResults) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range cs {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(c.Name)
		v, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the object MarshalJSON writes, keeping its order.
func (cs *ClassResults) UnmarshalJSON(data []byte) error {
	kvs, err := objectFields(data)
	if err != nil {
		return err
	}
	*cs = (*cs)[:0]
	for _, kv := range kvs {
		var c classResultJSON
		if err := json.Unmarshal(kv.v, &c); err != nil {
			return fmt.Errorf("classes.%s: %w", kv.k, err)
		}
		c.Name = kv.k
		*cs = append(*cs, (*ClassResult)(&c))
	}
	return nil
}

// classBook maps workload class labels to the results' classes.
type classBook struct {
	classes ClassResults
	byLabel map[string]*ClassResult
}

// newClassBook starts the classes of a scenario: its declared classes,
// then one class per workload class label none of them matches.
func newClassBook(sc *Scenario) *classBook {
	b := &classBook{byLabel: map[string]*ClassResult{}}
	for _, g := range sc.Classes {
		c := &ClassResult{Name: g.Name, Display: g.Display, Promise: g.Promise, Labels: append([]string{}, g.Match...)}
		if c.Display == "" {
			c.Display = g.Name
		}
		if c.Promise == "" {
			c.Promise = PromiseNone
		}
		b.classes = append(b.classes, c)
		for _, l := range g.Match {
			b.byLabel[l] = c
		}
	}
	for _, l := range sc.workloadClasses() {
		b.of(l)
	}
	return b
}

// of returns the class of a workload class label, adding an own class for
// a label no declared class matches.
func (b *classBook) of(label string) *ClassResult {
	if c := b.byLabel[label]; c != nil {
		return c
	}
	name := label
	if name == "" {
		name = "unlabelled"
	}
	for b.classes.Get(name) != nil {
		name += "_unlisted"
	}
	c := &ClassResult{Name: name, Display: name, Promise: PromiseNone, Labels: []string{label}}
	b.classes = append(b.classes, c)
	b.byLabel[label] = c
	return c
}

// finish computes the classes' summaries.
func (b *classBook) finish() ClassResults {
	for _, c := range b.classes {
		c.Kinds = c.Kinds[:0]
		for k := range c.kinds {
			c.Kinds = append(c.Kinds, k)
		}
		sort.Strings(c.Kinds)
		if c.Kinds == nil {
			c.Kinds = []string{}
		}
		if c.CapacityFailuresByReason == nil {
			c.CapacityFailuresByReason = map[string]int{}
		}
		if c.Patient > 0 {
			c.CapacityFailureRate = roundTo(float64(c.CapacityFailures)/float64(c.Patient), 4)
		}
		c.Placed = len(c.waits)
		c.TimeToCapacityP50S = roundTo(quantile(c.waits, 0.5), 1)
		c.TimeToCapacityP95S = roundTo(quantile(c.waits, 0.95), 1)
		c.GPUHours = roundTo(c.GPUHours, 1)
		c.LostGPUHours = roundTo(c.LostGPUHours, 1)
	}
	return b.classes
}

// kv is one field of a JSON object.
type kv struct {
	k string
	v json.RawMessage
}

// objectFields splits a JSON object into its fields, in order.
func objectFields(data []byte) ([]kv, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("want a JSON object, got %v", t)
	}
	var out []kv
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, kv{k, v})
	}
	return out, nil
}

// marshalNA marshals v (an object) with the fields named in na as null,
// keeping the field order.
func marshalNA(v any, na []string) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil || len(na) == 0 {
		return data, err
	}
	kvs, err := objectFields(data)
	if err != nil {
		return nil, err
	}
	isNA := map[string]bool{}
	for _, k := range na {
		isNA[k] = true
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range kvs {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.k)
		b.Write(k)
		b.WriteByte(':')
		if isNA[f.k] {
			b.WriteString("null")
		} else {
			b.Write(f.v)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
