package purity

import (
	"os"
	"path/filepath"
	"testing"
)

// recorder counts the failures Check reports.
type recorder struct {
	testing.TB
	errors int
}

func (r *recorder) Errorf(string, ...any) { r.errors++ }
func (r *recorder) Helper()               {}

func TestCheckCatches(t *testing.T) {
	for src, want := range map[string]int{
		"package p\nimport \"time\"\nfunc f() time.Time { return time.Now() }\n":       1,
		"package p\nimport \"math/rand/v2\"\nfunc f() int { return rand.IntN(3) }\n":   1,
		"package p\nimport \"math/rand/v2\"\nvar r = rand.New(rand.NewPCG(1, 2))\n":    0,
		"package p\nimport \"os\"\nvar _ = os.Args\n":                                  1,
		"package p\nfunc f() { go f() }\n":                                             1,
		"package p\nimport \"example.com/t\"\nfunc f() { t.ReadFile() }\n":             1,
		"package p\nimport \"time\"\nfunc f(now time.Time) time.Time { return now }\n": 0,
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644)
		r := &recorder{TB: t}
		Check(r, dir, "t.ReadFile")
		if r.errors != want {
			t.Errorf("%q: %d failures, want %d", src, r.errors, want)
		}
	}
}
