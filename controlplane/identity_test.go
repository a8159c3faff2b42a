package controlplane

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// slashJoinsAndCuts returns, for one file, each expression that joins two strings with a "/" literal between
// them (a + "/" + b; a prefix ending in "/" is not one) and each strings.Split, SplitN, SplitAfter or Cut on "/".
func slashJoinsAndCuts(fset *token.FileSet, f *ast.File) []string {
	isSlash := func(e ast.Expr) bool {
		l, ok := e.(*ast.BasicLit)
		if !ok || l.Kind != token.STRING {
			return false
		}
		v, err := strconv.Unquote(l.Value)
		return err == nil && v == "/"
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			// a + "/" + b parses as (a + "/") + b: a slash between two strings, not one ending a prefix.
			if x, ok := n.X.(*ast.BinaryExpr); ok && n.Op == token.ADD && x.Op == token.ADD && isSlash(x.Y) {
				out = append(out, fset.Position(n.Pos()).String()+": joins with \"/\"")
				return false
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || len(n.Args) < 2 {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "strings" && isSlash(n.Args[1]) {
				switch sel.Sel.Name {
				case "Split", "SplitN", "SplitAfter", "Cut":
					out = append(out, fset.Position(n.Pos()).String()+": strings."+sel.Sel.Name+" on \"/\"")
				}
			}
		}
		return true
	})
	return out
}

// TestIdentityIsNeverBuiltOrCutByHand: outside package objkey, no non-test file of controlplane joins strings
// with "/" or cuts one on "/". A policy's key is objkey.Key; its string form comes from Key.String, is read
// back by objkey.Parse, and names derived from it (clusters, routes, route tables) by objkey.Name and Join.
func TestIdentityIsNeverBuiltOrCutByHand(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "objkey" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		for _, line := range slashJoinsAndCuts(fset, f) {
			t.Errorf("%s: use objkey (Key.String, Parse, Name, Join) for a key or a name derived from one", line)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files: the walk did not find controlplane's sources", checked)
	}
}

// The check finds what it is there to find.
func TestSlashJoinsAndCutsFindsThem(t *testing.T) {
	src := `package p
import "strings"
func f(ns, name string) (string, string) {
	k := ns + "/" + name
	a, _, _ := strings.Cut(k, "/")
	_ = strings.Split(k, "/")
	_ = strings.Join([]string{ns, name}, ",")
	_ = strings.HasPrefix(k, ns+"/")
	return k + ".x", a
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := slashJoinsAndCuts(fset, f); len(got) != 3 {
		t.Fatalf("found %d, want 3: %q", len(got), got)
	}
}
