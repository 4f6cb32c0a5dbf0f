// Package purity checks, from a package's tests, that its code stays a pure
// function of its inputs: no I/O, no clock, no global random source, no
// goroutines. The scheduling core, the policy engine and the serving model
// each call Check from a TestPurity.
//
//	func TestPurity(t *testing.T) { purity.Check(t, ".") }
package purity

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var forbiddenImports = map[string]bool{
	"os": true, "os/exec": true, "net": true, "net/http": true, "io/ioutil": true,
	"syscall": true, "unsafe": true, "log": true, "log/slog": true, "sync": true,
	"sync/atomic": true, "runtime": true, "crypto/rand": true, "embed": true,
}

var forbiddenCalls = map[string]bool{
	"time.Now": true, "time.Since": true, "time.Until": true, "time.Sleep": true,
	"time.After": true, "time.Tick": true, "time.NewTimer": true, "time.NewTicker": true,
	"time.AfterFunc": true,
}

// Package-level functions of math/rand and math/rand/v2 other than these
// use the global source.
var randConstructors = map[string]bool{"New": true, "NewSource": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true}

// Check walks the non-test Go files under dir (subpackages included) and
// fails t for every forbidden import, clock or global-random call, go
// statement, and call named in alsoBanned ("pkg.Func", by the name the file
// imports the package under).
func Check(t testing.TB, dir string, alsoBanned ...string) {
	t.Helper()
	banned := map[string]bool{}
	for k := range forbiddenCalls {
		banned[k] = true
	}
	for _, c := range alsoBanned {
		banned[c] = true
	}
	checked := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		randNames := map[string]bool{}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if forbiddenImports[p] {
				t.Errorf("%s imports %q: pure code does no I/O, reads no clock and runs no goroutines", path, p)
			}
			if p == "math/rand" || p == "math/rand/v2" {
				name := "rand"
				if imp.Name != nil {
					name = imp.Name.Name
				}
				randNames[name] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: go statement at %s: pure code runs no goroutines", path, fset.Position(x.Pos()))
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok {
					full := id.Name + "." + x.Sel.Name
					if banned[full] {
						t.Errorf("%s: %s at %s: take it as an input instead", path, full, fset.Position(x.Pos()))
					}
					if randNames[id.Name] && ast.IsExported(x.Sel.Name) && !randConstructors[x.Sel.Name] && x.Sel.Name != "Rand" && x.Sel.Name != "Source" {
						t.Errorf("%s: %s at %s uses the global random source; take a seeded *rand.Rand", path, full, fset.Position(x.Pos()))
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("purity: no files checked")
	}
}
