package policy

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

// TestPurity fails if the package's code does I/O, reads the clock, uses
// the global random source or starts goroutines: the engine must give the
// same steps for the same inputs, in the simulator and in the server.
func TestPurity(t *testing.T) {
	banned := map[string]bool{"os": true, "net": true, "net/http": true, "math/rand": true, "math/rand/v2": true,
		"io/ioutil": true, "os/exec": true, "syscall": true, "sync": true, "unsafe": true}
	bannedCalls := map[string]bool{"time.Now": true, "time.Since": true, "time.Until": true, "time.Sleep": true,
		"time.After": true, "time.Tick": true, "time.NewTimer": true, "time.NewTicker": true}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	checked := 0
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
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if banned[path] {
				t.Errorf("%s imports %s", fset.Position(imp.Pos()), path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s starts a goroutine", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && bannedCalls[id.Name+"."+n.Sel.Name] {
					t.Errorf("%s uses %s.%s", fset.Position(n.Pos()), id.Name, n.Sel.Name)
				}
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked only %d files", checked)
	}
}
