package serving

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

// TestPurity fails if the package's non-test code imports anything that
// does I/O, reads the clock, uses the global random source or starts
// goroutines.
func TestPurity(t *testing.T) {
	allowed := map[string]bool{
		"errors": true, "fmt": true, "math": true, "math/rand/v2": true, "slices": true, "sort": true, "time": true,
		"github.com/arbiterhq/arbiter/internal/trace": true, // types and TokenDist only; see below
	}
	// Package-level functions that reach outside the process or its inputs.
	banned := map[string]bool{
		"time.Now": true, "time.Since": true, "time.Until": true, "time.Sleep": true, "time.After": true, "time.Tick": true, "time.NewTimer": true,
		"rand.IntN": true, "rand.Int": true, "rand.Float64": true, "rand.ExpFloat64": true, "rand.NormFloat64": true, "rand.Perm": true, "rand.Shuffle": true, "rand.N": true,
		"trace.ReadAzureFile": true, "trace.ReadOpenBNodesFile": true, "trace.ReadOpenBPodsFile": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !allowed[p] {
				t.Errorf("%s imports %q", fset.Position(imp.Pos()), p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s starts a goroutine", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && banned[id.Name+"."+n.Sel.Name] {
					t.Errorf("%s uses %s.%s", fset.Position(n.Pos()), id.Name, n.Sel.Name)
				}
			}
			return true
		})
	}
}
