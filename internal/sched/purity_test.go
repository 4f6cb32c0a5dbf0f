package sched

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

// TestPurity fails if the scheduling core (this package and its
// subpackages) reaches for the clock, the global random source, the network,
// the disk or goroutines. Schedule must be a pure function of its Input.
func TestPurity(t *testing.T) {
	forbiddenImports := map[string]bool{
		"os": true, "os/exec": true, "net": true, "net/http": true, "io/ioutil": true,
		"syscall": true, "unsafe": true, "log": true, "log/slog": true, "sync": true,
		"sync/atomic": true, "runtime": true, "crypto/rand": true, "embed": true,
	}
	forbiddenCalls := map[string]bool{
		"time.Now": true, "time.Since": true, "time.Until": true, "time.Sleep": true,
		"time.After": true, "time.Tick": true, "time.NewTimer": true, "time.NewTicker": true,
		"time.AfterFunc": true,
	}
	// Package-level functions of math/rand and math/rand/v2 use the global
	// source; only constructors are allowed.
	randOK := map[string]bool{"New": true, "NewSource": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true}
	checked := 0
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
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
				t.Errorf("%s imports %q: the core must not do I/O, use the clock or run goroutines", path, p)
			}
			if p == "math/rand" || p == "math/rand/v2" {
				name := filepath.Base(strings.TrimSuffix(p, "/v2"))
				if imp.Name != nil {
					name = imp.Name.Name
				}
				randNames[name] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: go statement at %s: the core runs no goroutines", path, fset.Position(x.Pos()))
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok {
					full := id.Name + "." + x.Sel.Name
					if forbiddenCalls[full] {
						t.Errorf("%s: %s at %s: Now is an input", path, full, fset.Position(x.Pos()))
					}
					if randNames[id.Name] && !randOK[x.Sel.Name] && ast.IsExported(x.Sel.Name) && x.Sel.Name != "Rand" && x.Sel.Name != "Source" {
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
		t.Fatal("no files checked")
	}
}
