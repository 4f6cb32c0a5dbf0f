// Package yamlfile decodes YAML documents strictly into Go structs and reports
// every problem with its file, line, column and field path, so that a user
// can go straight to the mistake.
//
// Decoding rules:
//   - struct fields are matched by their `yaml:"name"` tag (or the lower-cased
//     field name); an unknown key is an error that lists the known ones;
//   - a duplicate key is an error;
//   - a field of type Pos is filled with the position of the mapping that
//     holds it, so later validation can point at the right line;
//   - a field tagged `yaml:"name,or=Other"` takes a mapping under its key
//     into sibling field Other instead (a value written as a number or as a
//     mapping: replicas: 4 or replicas: {min: 4, max: 32});
//   - a type that implements Unmarshaler parses its own scalar; its error is
//     reported at the scalar's position with the field path;
//   - time.Duration accepts Go durations ("150ms", "5m", "1h30m") and days ("7d");
//   - time.Time accepts RFC 3339 ("2026-01-02T15:04:05Z").
//
// Decoding never stops at the first problem: all problems are returned as an
// Errors value (sorted by position), and the value holds everything that
// did decode. A parser that checks the decoded value further goes on after
// a decode error unless Stopped says nothing was decoded, and reports both
// lists with Merge, so that one run shows every problem of a file:
//
//	err := yamlfile.Decode(file, data, &f)
//	if yamlfile.Stopped(err) {
//		return nil, err
//	}
//	errs := check(&f) // a yamlfile.Errors
//	if err := yamlfile.Merge(err, errs).Err(); err != nil {
//		return nil, err
//	}
package yamlfile

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Pos is a position in a YAML file. A struct field of type Pos is filled by
// Decode with the position of the struct's mapping.
type Pos struct {
	File string
	Line int
	Col  int
}

// String formats the position as file:line:col.
func (p Pos) String() string {
	if p.File == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Error is one problem in a YAML file.
type Error struct {
	Pos   Pos
	Field string // dotted field path, e.g. "tenants[2].quota.A100-80G.limit"
	Msg   string

	// meant is, for an unknown key close to a known one, the field path
	// of the known one (see Merge).
	meant string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", e.Pos, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.Pos, e.Field, e.Msg)
}

// Errors is a list of problems; it is itself an error.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Sort orders the problems by position, then field.
func (es Errors) Sort() {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.Pos.File != b.Pos.File {
			return a.Pos.File < b.Pos.File
		}
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		if a.Pos.Col != b.Pos.Col {
			return a.Pos.Col < b.Pos.Col
		}
		return a.Field < b.Field
	})
}

// Add appends a problem.
func (es *Errors) Add(pos Pos, field, format string, args ...any) {
	*es = append(*es, &Error{Pos: pos, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Err returns nil when there are no problems, else the sorted list.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	es.Sort()
	return es
}

// Stopped reports whether err, returned by Decode, left nothing worth
// checking: a YAML syntax error, a document that is not a mapping, or an
// error that is not a list of problems. After any other decode error (nil
// included) the value holds everything that decoded, and checks may go on.
func Stopped(err error) bool {
	if err == nil {
		return false
	}
	var es Errors
	if !errors.As(err, &es) {
		return true
	}
	for _, e := range es {
		if e.Field == "" {
			return true
		}
	}
	return false
}

// Merge returns the problems of decodeErr (from Decode) followed by those
// of checks, less every check at or under a field that Decode already
// reported, or that an unknown key reported there was probably meant to be
// (its "did you mean"): a value that did not decode, or was written under
// a misspelt key, is not reported again as missing or out of range. With a
// nil decodeErr it returns checks. Call Err on the result.
func Merge(decodeErr error, checks Errors) Errors {
	var decoded Errors
	if decodeErr != nil && !errors.As(decodeErr, &decoded) {
		decoded = Errors{{Msg: decodeErr.Error()}}
	}
	if len(decoded) == 0 {
		return checks
	}
	out := append(Errors(nil), decoded...)
	for _, c := range checks {
		if !covered(decoded, c.Field) {
			out = append(out, c)
		}
	}
	return out
}

// covered reports whether field is at or under a field of es, or of what
// an unknown key in es was meant to be.
func covered(es Errors, field string) bool {
	if field == "" {
		return false
	}
	for _, e := range es {
		if under(field, e.Field) || under(field, e.meant) {
			return true
		}
	}
	return false
}

// under reports whether field is parent or inside it.
func under(field, parent string) bool {
	if parent == "" {
		return false
	}
	rest, ok := strings.CutPrefix(field, parent)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

// Unmarshaler is implemented by types that parse their own YAML scalar (units
// such as "85%" or "150ms"). The error message should say what to write.
type Unmarshaler interface {
	UnmarshalYAMLScalar(value string) error
}

var (
	posType         = reflect.TypeFor[Pos]()
	durationType    = reflect.TypeFor[time.Duration]()
	timeType        = reflect.TypeFor[time.Time]()
	unmarshalerType = reflect.TypeFor[Unmarshaler]()
	nodeType        = reflect.TypeFor[yaml.Node]()
)

// Decode parses data (named file in messages) into v, a non-nil pointer.
// An empty document leaves v untouched.
func Decode(file string, data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.New("yamlfile: Decode needs a non-nil pointer")
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Errors{syntaxError(file, err)}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil
	}
	d := decoder{file: file}
	d.decode(doc.Content[0], rv.Elem(), "")
	return d.errs.Err()
}

// syntaxError turns a yaml.v3 parse error ("yaml: line 3: ...") into an Error.
func syntaxError(file string, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ":"); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line = n
				msg = strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return &Error{Pos: Pos{File: file, Line: line, Col: 1}, Msg: "invalid YAML: " + msg}
}

type decoder struct {
	file string
	errs Errors
}

func (d *decoder) pos(n *yaml.Node) Pos { return Pos{File: d.file, Line: n.Line, Col: n.Column} }

func (d *decoder) fail(n *yaml.Node, field, format string, args ...any) {
	d.errs.Add(d.pos(n), field, format, args...)
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			d.fail(n, path, "unresolved alias")
			return
		}
		n = n.Alias
	}
	if v.Type() == nodeType {
		v.Set(reflect.ValueOf(*n))
		return
	}
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a single value, got %s", kindName(n))
			return
		}
		if err := v.Addr().Interface().(Unmarshaler).UnmarshalYAMLScalar(n.Value); err != nil {
			d.fail(n, path, "%v", err)
		}
		return
	}
	if v.Type() == durationType {
		d.duration(n, v, path)
		return
	}
	if v.Type() == timeType {
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a time such as 2026-01-02T15:04:05Z, got %s", kindName(n))
			return
		}
		t, err := time.Parse(time.RFC3339, n.Value)
		if err != nil {
			d.fail(n, path, "invalid time %q: write RFC 3339, such as 2026-01-02T15:04:05Z", n.Value)
			return
		}
		v.Set(reflect.ValueOf(t))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "want a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			d.fail(n, path, "want a string, got %s", kindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		b, ok := scalarBool(n)
		if !ok {
			d.fail(n, path, "want true or false, got %s", kindName(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a whole number, got %s", kindName(n))
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 10, 64)
		if err != nil || v.OverflowInt(i) {
			d.fail(n, path, "want a whole number, got %s", kindName(n))
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a whole number ≥ 0, got %s", kindName(n))
			return
		}
		u, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 10, 64)
		if err != nil || v.OverflowUint(u) {
			d.fail(n, path, "want a whole number ≥ 0, got %s", kindName(n))
			return
		}
		v.SetUint(u)
	case reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a number, got %s", kindName(n))
			return
		}
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail(n, path, "want a number, got %s", kindName(n))
			return
		}
		v.SetFloat(f)
	default:
		d.fail(n, path, "yamlfile: unsupported Go type %s", v.Type())
	}
}

func scalarBool(n *yaml.Node) (bool, bool) {
	if n.Kind != yaml.ScalarNode {
		return false, false
	}
	switch n.Value {
	case "true", "True", "TRUE":
		return true, true
	case "false", "False", "FALSE":
		return false, true
	}
	return false, false
}

func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "want a duration such as 30s, 5m or 2h, got %s", kindName(n))
		return
	}
	dur, err := ParseDuration(n.Value)
	if err != nil {
		d.fail(n, path, "%v", err)
		return
	}
	v.SetInt(int64(dur))
}

// ParseDuration parses a duration as people write it in configs: Go syntax
// ("150ms", "5m", "1h30m") plus days ("7d"). A bare number is rejected with a
// hint, because its unit is ambiguous.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseFloat(days, 64); err == nil && n >= 0 && n < 1e5 {
			return time.Duration(n * 24 * float64(time.Hour)), nil
		}
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		if _, numErr := strconv.ParseFloat(s, 64); numErr == nil {
			return 0, fmt.Errorf("duration %q has no unit: write it as %ss, %sms or %sm", s, s, s, s)
		}
		return 0, fmt.Errorf("invalid duration %q: write a number with a unit, such as 30s, 5m, 2h or 7d", s)
	}
	if dur < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return dur, nil
}

// Keys returns the keys a mapping decoded into v, a struct or a pointer
// to one, may hold, in field order (inline structs' included). Tools that
// tell files apart by their top-level keys use it.
func Keys(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	fields, _ := structFields(t)
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.name
	}
	return out
}

type fieldInfo struct {
	index []int
	name  string
	// or is the index of the field a mapping under this key decodes into
	// instead (tag option or=Field: a value written either as a number or
	// as a mapping, such as replicas: 4 and replicas: {min: 4, max: 32}).
	or []int
}

func structFields(t reflect.Type) (fields []fieldInfo, posIndex []int) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Type == posType {
			posIndex = f.Index
			continue
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			inner, _ := structFields(f.Type)
			for _, in := range inner {
				fi := fieldInfo{index: append([]int{i}, in.index...), name: in.name}
				if in.or != nil {
					fi.or = append([]int{i}, in.or...)
				}
				fields = append(fields, fi)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fi := fieldInfo{index: f.Index, name: name}
		if alt, ok := strings.CutPrefix(opts, "or="); ok {
			if af, ok := t.FieldByName(alt); ok && len(af.Index) == 1 {
				fi.or = af.Index
			}
		}
		fields = append(fields, fi)
	}
	return fields, posIndex
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	fields, posIndex := structFields(v.Type())
	if posIndex != nil {
		v.FieldByIndex(posIndex).Set(reflect.ValueOf(d.pos(n)))
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be plain names")
			continue
		}
		if seen[k.Value] {
			d.fail(k, join(path, k.Value), "duplicate key")
			continue
		}
		seen[k.Value] = true
		var f *fieldInfo
		for j := range fields {
			if fields[j].name == k.Value {
				f = &fields[j]
				break
			}
		}
		if f == nil {
			names := make([]string, len(fields))
			for j, fi := range fields {
				names[j] = fi.name
			}
			d.fail(k, join(path, k.Value), "unknown field%s (known: %s)", suggest(k.Value, names), strings.Join(names, ", "))
			if c := closest(k.Value, names); c != "" && !present(n, c) {
				d.errs[len(d.errs)-1].meant = join(path, c)
			}
			continue
		}
		if f.or != nil && val.Kind == yaml.MappingNode {
			d.decode(val, v.FieldByIndex(f.or), join(path, k.Value))
			continue
		}
		d.decode(val, v.FieldByIndex(f.index), join(path, k.Value))
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.fail(n, path, "yamlfile: unsupported map key type %s", v.Type().Key())
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(v.Type(), len(n.Content)/2))
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be plain names")
			continue
		}
		if seen[k.Value] {
			d.fail(k, join(path, k.Value), "duplicate key")
			continue
		}
		seen[k.Value] = true
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, elem, join(path, k.Value))
		key := reflect.New(v.Type().Key()).Elem()
		key.SetString(k.Value)
		v.SetMapIndex(key, elem)
	}
}

// suggest returns ` (did you mean "x"?)` when a known name is close to s.
func suggest(s string, known []string) string { return DidYouMean(s, known) }

// DidYouMean returns ` (did you mean "x"?)` when one of the known names is
// within two edits of s (ignoring case), else "". Messages that reject a
// name use it to say what to write instead.
func DidYouMean(s string, known []string) string {
	best := closest(s, known)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// present reports whether mapping n has the key name.
func present(n *yaml.Node, name string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return true
		}
	}
	return false
}

// closest returns the known name within two edits of s (ignoring case),
// or "".
func closest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if k == "" {
			continue
		}
		if d := editDistance(strings.ToLower(s), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
