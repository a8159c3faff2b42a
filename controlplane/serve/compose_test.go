package serve

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// TestRunFitsOnAScreen keeps Run a composition root: it assembles subsystems that their own constructors
// build, each in the file named for it, rather than building them inline.
func TestRunFitsOnAScreen(t *testing.T) {
	const most = 120
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "serve.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Name.Name != "Run" {
			continue
		}
		lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
		if lines > most {
			t.Errorf("serve.Run is %d lines, more than %d: build the new part in its subsystem's constructor", lines, most)
		}
		return
	}
	t.Fatal("serve.go has no func Run")
}
