package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/arbiterhq/arbiter/internal/alert"
	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/names"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/probe"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/sim"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// fileKind is a kind of file Arbiter reads, as `arbiter validate` tells
// it from its top-level keys and checks it.
type fileKind struct {
	name string // the --kind value
	what string // what it is, for messages
	// keys are the top-level keys the kind reads; need are those a file
	// of the kind hardly goes without (they break ties).
	keys, need []string
	// check reports the file's problems; more are further files it
	// reads (a strategy's policy file), checked with it.
	check func(file string, data []byte) (problems error, more []string)
}

// fileKinds in the order ties are broken: config first, as `arbiter
// validate` checked only configs before it knew the others, except a
// file of probes: alone (a config may hold probes too, but such a file is
// what probe apply reads).
var fileKinds = []*fileKind{
	{name: "probes", what: "endpoints to probe for latency (probe apply)",
		keys: yamlfile.Keys(probe.File{}), need: []string{"probes"},
		check: func(file string, data []byte) (error, []string) {
			_, err := probe.Load(file, data)
			return err, nil
		}},
	{name: "config", what: "fleet, tenants, reservations and workloads (schedule --config, serve --config)",
		keys: yamlfile.Keys(config.File{}),
		check: func(file string, data []byte) (error, []string) {
			_, err := config.Parse(file, data)
			return err, nil
		}},
	{name: "scenario", what: "a simulation: fleet, tenants, generators, services (sim --scenario)",
		keys: yamlfile.Keys(sim.Scenario{}), need: []string{"duration"},
		check: func(file string, data []byte) (error, []string) {
			return sim.CheckScenario(file, data), nil
		}},
	{name: "strategy", what: "a way of dividing the fleet: quotas, partitions, options, policies (sim --strategies)",
		keys: yamlfile.Keys(sim.Strategy{}), need: []string{"name"},
		check: checkStrategy},
	{name: "policy", what: "policy rules, either format (policy apply, policy test -f)",
		keys: []string{"scheduling_policies", "policies"},
		check: func(file string, data []byte) (error, []string) {
			_, err := policy.Load(file, data)
			return err, nil
		}},
	{name: "alert", what: "alert rules (alert apply)",
		keys: yamlfile.Keys(alert.File{}), need: []string{"rules"},
		check: func(file string, data []byte) (error, []string) {
			_, err := alert.Load(file, data)
			return err, nil
		}},
	{name: "workload", what: "one workload (workload submit -f)",
		keys: yamlfile.Keys(api.WorkloadSpec{}), need: []string{"name", "gpus"},
		check: func(file string, data []byte) (error, []string) {
			return checkWorkloadSpec(file, data), nil
		}},
	{name: "knobs", what: "what sim tune searches (sim tune --knobs)",
		keys: yamlfile.Keys(sim.KnobsFile{}), need: []string{"strategy", "knobs"},
		check: func(file string, data []byte) (error, []string) {
			_, err := sim.ParseKnobs(file, data)
			return err, nil
		}},
}

func kindNames() []string {
	out := make([]string, len(fileKinds))
	for i, k := range fileKinds {
		out[i] = k.name
	}
	return out
}

func kindByName(name string) *fileKind {
	for _, k := range fileKinds {
		if k.name == name {
			return k
		}
	}
	return nil
}

// kindList names the kinds for messages: "a, b or c".
func kindList() string {
	ns := kindNames()
	return strings.Join(ns[:len(ns)-1], ", ") + " or " + ns[len(ns)-1]
}

func newValidateCmd() *cobra.Command {
	var kind string
	cmd := &cobra.Command{
		Use:   "validate [--kind KIND] FILE...",
		Short: "Check any file Arbiter reads and list every problem of every file",
		Long: `Checks each FILE without running anything and lists every problem of every
file in one run, each as file:line:col: field: message, then a count; the
exit status is 1 when there is any. The kind of each file is told from its
top-level keys, or set for all with --kind:

  ` + strings.Join(kindLines(), "\n  ") + `

A strategy's policy file (policies:) is checked with it. What needs the
server (that tenants and GPU models exist there, limits) or the trace
files is not checked. FILE - reads standard input.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if kind != "" && kindByName(kind) == nil {
				return fmt.Errorf("validate: unknown kind %q: use one of %s", kind, strings.Join(kindNames(), ", "))
			}
			r := validateRun{out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), checked: map[string]bool{}, bad: map[string]bool{}}
			for _, f := range args {
				if !r.once(f) {
					continue
				}
				name, data, err := readValidateFile(f, cmd.InOrStdin())
				if err != nil {
					r.report(f, "", []*yamlfile.Error{{Pos: yamlfile.Pos{File: f}, Msg: fmt.Sprintf("cannot read: %v", unwrapPath(err))}})
					continue
				}
				r.file(name, data, kind)
			}
			if r.problems > 0 {
				return fmt.Errorf("%d %s in %d %s", r.problems, pluralWord(r.problems, "problem"), len(r.bad), pluralWord(len(r.bad), "file"))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "", "check every FILE as this kind: "+strings.Join(kindNames(), ", ")+" (default: told from each file's keys)")
	return cmd
}

func kindLines() []string {
	out := make([]string, len(fileKinds))
	for i, k := range fileKinds {
		out[i] = fmt.Sprintf("%-9s %s", k.name, k.what)
	}
	return out
}

// validateRun prints what `arbiter validate` finds: one status line per
// file on out, the problems on errOut, and counts them.
type validateRun struct {
	out, errOut io.Writer
	checked     map[string]bool // files checked (each once: a policy file two strategies share)
	bad         map[string]bool // files with problems
	problems    int
}

// once reports whether the file is to be checked now, the first time.
func (r *validateRun) once(name string) bool {
	c := filepath.Clean(name)
	if r.checked[c] {
		return false
	}
	r.checked[c] = true
	return true
}

func (r *validateRun) file(name string, data []byte, kind string) {
	k, probs, more := validateData(name, data, kind)
	kn := ""
	if k != nil {
		kn = k.name
	}
	r.report(name, kn, probs)
	for _, m := range more {
		if !r.once(m) {
			continue
		}
		data, err := os.ReadFile(m)
		if err != nil {
			r.report(m, "policy", []*yamlfile.Error{{Pos: yamlfile.Pos{File: m}, Msg: fmt.Sprintf("cannot read: %v", unwrapPath(err))}})
			continue
		}
		_, probs, _ := validateData(m, data, "policy")
		r.report(m, "policy", probs)
	}
}

func (r *validateRun) report(name, kind string, probs []*yamlfile.Error) {
	for _, p := range probs {
		fmt.Fprintln(r.errOut, problemString(p))
	}
	status := "ok"
	if n := len(probs); n > 0 {
		r.problems += n
		r.bad[name] = true
		status = fmt.Sprintf("%d %s", n, pluralWord(n, "problem"))
	}
	if kind == "" {
		kind = "unknown kind"
	}
	fmt.Fprintf(r.out, "%s: %s: %s\n", name, kind, status)
}

func readValidateFile(f string, stdin io.Reader) (string, []byte, error) {
	if f == "-" {
		data, err := io.ReadAll(stdin)
		return "<stdin>", data, err
	}
	data, err := os.ReadFile(f)
	return f, data, err
}

// unwrapPath drops the operation and path os errors repeat.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// problemString formats a problem as file:line:col: field: message
// (file: message when it has no position).
func problemString(e *yamlfile.Error) string {
	loc := e.Pos.File
	if e.Pos.Line > 0 {
		loc = e.Pos.String()
	}
	if e.Field == "" {
		return loc + ": " + e.Msg
	}
	return loc + ": " + e.Field + ": " + e.Msg
}

// validateData checks one file's data as the kind named (its kind told
// from its keys when ""), and returns the kind it was checked as (nil when
// it could not tell), its problems sorted by position, and further files
// to check with it. It never panics, whatever the data.
func validateData(file string, data []byte, kind string) (*fileKind, []*yamlfile.Error, []string) {
	k := kindByName(kind)
	if k == nil {
		var probs []*yamlfile.Error
		k, probs = detectKind(file, data)
		if k == nil {
			return nil, probs, nil
		}
	}
	err, more := k.check(file, data)
	return k, problemsOf(file, err), more
}

// detectKind tells the kind of a file from its top-level keys: the kind
// that reads the most of them, the fewest unknown first, then the one
// missing the fewest of the keys it needs. A YAML syntax error is the
// file's problem whatever its kind.
func detectKind(file string, data []byte) (*fileKind, []*yamlfile.Error) {
	at := yamlfile.Pos{File: file, Line: 1, Col: 1}
	fail := func(pos yamlfile.Pos, format string, args ...any) []*yamlfile.Error {
		return []*yamlfile.Error{{Pos: pos, Msg: fmt.Sprintf(format, args...) + "; pass --kind " + strings.Join(kindNames(), "|") + " to check it as one (arbiter validate --help)"}}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// Any kind's decoder reports the syntax error as well as another.
		return nil, problemsOf(file, yamlfile.Decode(file, data, &struct{}{}))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fail(at, "empty file: nothing to tell its kind by")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		pos := yamlfile.Pos{File: file, Line: root.Line, Col: root.Column}
		return nil, fail(pos, "not a mapping of keys, as every file Arbiter reads is (%s)", kindList())
	}
	var keys []string
	var values []*yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Kind == yaml.ScalarNode {
			keys = append(keys, root.Content[i].Value)
			values = append(values, root.Content[i+1])
		}
	}
	if len(keys) == 0 {
		return nil, fail(at, "no keys: nothing to tell its kind by")
	}
	type score struct {
		k                  *fileKind
		hits, misses, need int
	}
	var best []score
	for _, k := range fileKinds {
		s := score{k: k}
		for i, key := range keys {
			if reads(k, key, values[i]) {
				s.hits++
			} else {
				s.misses++
			}
		}
		for _, n := range k.need {
			if !slices.Contains(keys, n) {
				s.need++
			}
		}
		switch {
		case len(best) == 0 || s.misses < best[0].misses ||
			s.misses == best[0].misses && (s.need < best[0].need || s.need == best[0].need && s.hits > best[0].hits):
			best = []score{s}
		case s.misses == best[0].misses && s.need == best[0].need && s.hits == best[0].hits:
			best = append(best, s)
		}
	}
	b := best[0]
	shown := strings.Join(keys, ", ")
	if len(shown) > 200 {
		shown = shown[:200] + "..."
	}
	if b.hits == 0 || b.misses > b.hits {
		return nil, fail(at, "cannot tell what kind of file this is: its keys (%s) are not those of a %s file", shown, kindList())
	}
	if len(best) > 1 && b.k != fileKinds[0] {
		var ns []string
		for _, s := range best {
			ns = append(ns, s.k.name)
		}
		return nil, fail(at, "cannot tell what kind of file this is: its keys (%s) fit a %s file equally", shown, strings.Join(ns, " or "))
	}
	return b.k, nil
}

// reads reports whether kind k reads the top-level key with value v. A
// policy file's policies: is a list of rules, a strategy's the name of
// its policy file.
func reads(k *fileKind, key string, v *yaml.Node) bool {
	if key == "policies" {
		switch k.name {
		case "policy":
			return v.Kind != yaml.ScalarNode || v.Tag == "!!null"
		case "strategy":
			return v.Kind == yaml.ScalarNode
		}
	}
	return slices.Contains(k.keys, key)
}

// problemsOf lists the problems an error holds: its yamlfile problems
// (wherever they are wrapped), else the error itself.
func problemsOf(file string, err error) []*yamlfile.Error {
	if err == nil {
		return nil
	}
	var out yamlfile.Errors
	var walk func(error)
	walk = func(e error) {
		switch v := e.(type) {
		case yamlfile.Errors:
			out = append(out, v...)
		case *yamlfile.Error:
			out = append(out, v)
		case interface{ Unwrap() []error }:
			for _, c := range v.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			if c := v.Unwrap(); c != nil {
				walk(c)
			}
		}
	}
	walk(err)
	if len(out) == 0 {
		msg := strings.TrimPrefix(err.Error(), file+": ")
		return []*yamlfile.Error{{Pos: yamlfile.Pos{File: file}, Msg: msg}}
	}
	for _, e := range out {
		if e.Pos.File == "" {
			e.Pos.File = file
		}
	}
	out.Sort()
	return out
}

// checkStrategy checks a strategy file, and its scorer as a run would,
// and names the policy file it reads, relative to it.
func checkStrategy(file string, data []byte) (error, []string) {
	st, err := sim.ParseStrategy(file, data)
	var decoded sim.Strategy
	decodeErr := yamlfile.Decode(file, data, &decoded)
	if yamlfile.Stopped(decodeErr) {
		return err, nil
	}
	if st == nil {
		st = &decoded
	}
	var more yamlfile.Errors
	if sc := decoded.Options.Scorer; !slices.Contains(sched.ScorerNames(), sc) {
		more.Add(fieldPos(file, data, "options.scorer"), "options.scorer", "unknown scorer %q (known: %v)", sc, sched.ScorerNames()[1:])
	}
	var next []string
	if st.Policies != "" && file != "<stdin>" {
		p := filepath.Join(filepath.Dir(file), st.Policies)
		if _, serr := os.Stat(p); serr != nil {
			more.Add(fieldPos(file, data, "policies"), "policies", "cannot read the policy file %s: %v", p, unwrapPath(serr))
		} else {
			next = append(next, p)
		}
	}
	var errs yamlfile.Errors
	if err != nil && !errors.As(err, &errs) {
		return errors.Join(err, more.Err()), next
	}
	return yamlfile.Merge(errs, more).Err(), next
}

// checkWorkloadSpec checks a workload spec as `arbiter workload submit
// -f` reads it and the server checks it on its own (not against the
// fleet, the tenant's quota or the server's limits).
func checkWorkloadSpec(file string, data []byte) error {
	var s api.WorkloadSpec
	decodeErr := yamlfile.Decode(file, data, &s)
	if yamlfile.Stopped(decodeErr) {
		return decodeErr
	}
	var errs yamlfile.Errors
	at := func(field string) yamlfile.Pos { return fieldPos(file, data, field) }
	_, ferrs := s.ToWorkload()
	for _, fe := range ferrs {
		errs.Add(at(fe.Field), fe.Field, "%s", fe.Msg)
	}
	if s.Name != "" && !names.Valid(s.Name) {
		errs.Add(at("name"), "name", "invalid name %q: %s", s.Name, names.Rule)
	}
	if s.Tenant != "" && !names.Valid(s.Tenant) {
		errs.Add(at("tenant"), "tenant", "invalid name %q: %s", s.Tenant, names.Rule)
	}
	if f, msg := s.Command.Validate(); f != "" {
		errs.Add(at(f), f, "%s", msg)
	}
	return yamlfile.Merge(decodeErr, errs).Err()
}

// fieldPos is the position of the value at a field path ("a.b[2].c") in
// data, or of the nearest mapping or list above it that is there.
func fieldPos(file string, data []byte, field string) yamlfile.Pos {
	pos := yamlfile.Pos{File: file, Line: 1, Col: 1}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return pos
	}
	n := doc.Content[0]
	pos.Line, pos.Col = n.Line, n.Column
	for _, step := range splitField(field) {
		var next *yaml.Node
		if i, err := strconv.Atoi(step); err == nil && n.Kind == yaml.SequenceNode {
			if i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		} else if n.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == step {
					next = n.Content[j+1]
					break
				}
			}
		}
		if next == nil {
			break
		}
		n = next
		pos.Line, pos.Col = n.Line, n.Column
	}
	return pos
}

// splitField splits "a.b[2].c" into a, b, 2, c.
func splitField(field string) []string {
	var out []string
	for _, part := range strings.Split(field, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, name)
		}
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			if !ok {
				break
			}
			out = append(out, idx)
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return out
}
