package yamlfile

import (
	"strings"
	"testing"
	"time"
)

type inner struct {
	Pos   Pos
	Name  string        `yaml:"name"`
	Count int           `yaml:"count"`
	Wait  time.Duration `yaml:"wait"`
}

type outer struct {
	Items []inner          `yaml:"items"`
	Tags  map[string]int   `yaml:"tags"`
	Flag  bool             `yaml:"flag"`
	Ptr   *inner           `yaml:"ptr"`
	Ratio float64          `yaml:"ratio"`
	Extra map[string]inner `yaml:"extra"`
}

func TestDecodeOK(t *testing.T) {
	src := "items:\n  - name: a\n    count: 3\n    wait: 5m\nflag: true\nratio: 0.5\ntags: {x: 1}\nptr: {name: p}\n"
	var o outer
	if err := Decode("f.yaml", []byte(src), &o); err != nil {
		t.Fatal(err)
	}
	if len(o.Items) != 1 || o.Items[0].Name != "a" || o.Items[0].Count != 3 || o.Items[0].Wait != 5*time.Minute {
		t.Fatalf("items = %+v", o.Items)
	}
	if o.Items[0].Pos != (Pos{File: "f.yaml", Line: 2, Col: 5}) {
		t.Fatalf("pos = %v", o.Items[0].Pos)
	}
	if !o.Flag || o.Ratio != 0.5 || o.Tags["x"] != 1 || o.Ptr == nil || o.Ptr.Name != "p" {
		t.Fatalf("decoded %+v", o)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		src, want string
	}{
		{"items:\n  - nme: a\n", `f.yaml:2:5: items[0].nme: unknown field (did you mean "name"?)`},
		{"items:\n  - count: lots\n", `f.yaml:2:12: items[0].count: want a whole number, got "lots"`},
		{"items:\n  - wait: 5 minutes\n", `f.yaml:2:11: items[0].wait: invalid duration "5 minutes"`},
		{"items:\n  - wait: 150\n", `items[0].wait: duration "150" has no unit`},
		{"flag: 1\n", `f.yaml:1:7: flag: want true or false`},
		{"flag: true\nflag: false\n", `f.yaml:2:1: flag: duplicate key`},
		{"items: 3\n", `items: want a list`},
		{"items: [\n", `invalid YAML`},
		{"ratio: .nan\n", `ratio: want a number`},
	} {
		var o outer
		err := Decode("f.yaml", []byte(tc.src), &o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%q) = %v, want it to contain %q", tc.src, err, tc.want)
		}
	}
}

func TestDecodeReportsAllProblems(t *testing.T) {
	var o outer
	err := Decode("f.yaml", []byte("items:\n  - nme: a\n  - count: x\nbogus: 1\n"), &o)
	es, ok := err.(Errors)
	if !ok || len(es) != 3 {
		t.Fatalf("want 3 errors, got %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add("items:\n  - name: a\n    count: 3\n    wait: 5m\nflag: true\n")
	f.Add("tags: {a: 1, b: 2}\nextra: {k: {name: z}}\n")
	f.Add("a: &x [1]\nitems: *x\n")
	f.Fuzz(func(t *testing.T, src string) {
		var o outer
		err := Decode("fuzz.yaml", []byte(src), &o)
		if err != nil && !strings.Contains(err.Error(), "fuzz.yaml") {
			t.Fatalf("error without file name: %v", err)
		}
	})
}

func TestKeys(t *testing.T) {
	type withInline struct {
		Pos   Pos
		A     int   `yaml:"a"`
		Inner inner `yaml:",inline"`
		Skip  int   `yaml:"-"`
		Plain int
	}
	got := strings.Join(Keys(&withInline{}), ",")
	if want := "a,name,count,wait,plain"; got != want {
		t.Errorf("Keys = %s, want %s", got, want)
	}
	if Keys(3) != nil {
		t.Error("Keys of an int")
	}
}

func TestStopped(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"items: [\n", true},              // syntax
		{"- a\n- b\n", true},              // not a mapping
		{"items:\n  - nme: a\n", false},   // a field problem: the rest decoded
		{"items:\n  - count: x\n", false}, // idem
		{"flag: true\n", false},           // no problem
	} {
		var o outer
		err := Decode("f.yaml", []byte(tc.src), &o)
		if got := Stopped(err); got != tc.want {
			t.Errorf("Stopped(Decode(%q) = %v) = %v, want %v", tc.src, err, got, tc.want)
		}
	}
}

func TestMerge(t *testing.T) {
	var o outer
	err := Decode("f.yaml", []byte("items:\n  - nme: a\n  - count: x\n  - name: b\n    cuont: 2\n    count: 3\nratio: [1]\n"), &o)
	at := Pos{File: "f.yaml", Line: 1, Col: 1}
	checks := Errors{
		{Pos: at, Field: "items[0].name", Msg: "a name is required"},        // meant by nme: dropped
		{Pos: at, Field: "items[1].count", Msg: "count must be at least 1"}, // did not decode: dropped
		{Pos: at, Field: "items[1]", Msg: "the item as a whole"},            // above, not under: kept
		{Pos: at, Field: "items[2].count", Msg: "count is odd"},             // cuont, but count is there too: kept
		{Pos: at, Field: "ratio", Msg: "ratio is required"},                 // did not decode: dropped
		{Pos: at, Field: "ratios", Msg: "a field of another name"},          // kept
		{Pos: at, Field: "", Msg: "the file"},                               // kept
	}
	got := Merge(err, checks)
	var msgs []string
	for _, e := range got {
		msgs = append(msgs, e.Field+": "+e.Msg)
	}
	want := []string{
		`items[0].nme: unknown field (did you mean "name"?) (known: name, count, wait)`,
		`items[1].count: want a whole number, got "x"`,
		`items[2].cuont: unknown field (did you mean "count"?) (known: name, count, wait)`,
		`ratio: want a number, got a list`,
		"items[1]: the item as a whole",
		"items[2].count: count is odd",
		"ratios: a field of another name",
		": the file",
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("Merge:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	if got := Merge(nil, checks); len(got) != len(checks) {
		t.Errorf("Merge(nil, checks) has %d problems, want %d", len(got), len(checks))
	}
}

func TestDecodeOr(t *testing.T) {
	type bounds struct {
		Min int `yaml:"min"`
		Max int `yaml:"max"`
	}
	type Spec struct {
		N      int     `yaml:"n,or=Bounds"`
		Bounds *bounds `yaml:"-"`
	}
	type file struct {
		Spec `yaml:",inline"`
	}
	var a file
	if err := Decode("f.yaml", []byte("n: 3\n"), &a); err != nil || a.N != 3 || a.Bounds != nil {
		t.Fatalf("number form: %+v %v", a, err)
	}
	var b file
	if err := Decode("f.yaml", []byte("n: {min: 2, max: 5}\n"), &b); err != nil || b.N != 0 || b.Bounds == nil || *b.Bounds != (bounds{2, 5}) {
		t.Fatalf("mapping form: %+v %v", b, err)
	}
	var c file
	err := Decode("f.yaml", []byte("n: {min: 2, mx: 5}\n"), &c)
	if err == nil || !strings.Contains(err.Error(), "n.mx") {
		t.Fatalf("unknown key in the mapping form: %v", err)
	}
	if ks := Keys(&c); len(ks) != 1 || ks[0] != "n" {
		t.Errorf("Keys = %v, want [n]", ks)
	}
}
