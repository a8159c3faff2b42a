package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1alpha1 "github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/tools"
)

// fieldPaths lists every JSON field under t by reflection (independently of the generator's AST walk), as
// section path -> field names.
func fieldPaths(t reflect.Type, path string, out map[string][]string, seen map[reflect.Type]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if _, ok := seen[t]; ok {
		return // a type met again is documented once, at its first path
	}
	seen[t] = path
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[path] = append(out[path], name)
		ft := f.Type
		list := false
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			if ft.Kind() == reflect.Slice {
				list = true
			}
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == reflect.TypeFor[v1alpha1.Listener]().PkgPath() {
			p := path + "." + name
			if list {
				p += "[]"
			}
			fieldPaths(ft, p, out, seen)
		}
	}
}

// sectionRows splits the reference into its sections' field names.
func sectionRows(doc string) map[string][]string {
	rows := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(doc, "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			cur = h
		} else if h, ok := strings.CutPrefix(line, "### "); ok {
			cur = h
		} else if strings.HasPrefix(line, "| `") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
			rows[cur] = append(rows[cur], name)
		}
	}
	return rows
}

// TestReferenceCoversEverySpecField: every field of spec and status, at every depth, has a row in the section of
// its path, in declaration order.
func TestReferenceCoversEverySpecField(t *testing.T) {
	out, err := Generate(tools.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	rows := sectionRows(string(out))
	want := map[string][]string{}
	seen := map[reflect.Type]string{}
	fieldPaths(reflect.TypeFor[v1alpha1.LoadBalancerPolicySpec](), "spec", want, seen)
	fieldPaths(reflect.TypeFor[v1alpha1.LoadBalancerPolicyStatus](), "status", want, seen)
	if len(want) < 40 {
		t.Fatalf("only %d objects found under spec and status", len(want))
	}
	for path, fields := range want {
		if !reflect.DeepEqual(rows[path], fields) {
			t.Errorf("section %q lists %v, the type has %v", path, rows[path], fields)
		}
	}
}

// TestReferenceText: no marker leaks into the text, every enum lists its values, every spec field says something.
func TestReferenceText(t *testing.T) {
	out, err := Generate(tools.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	doc := string(out)
	for _, leak := range []string{"+kubebuilder", "+listType", "+listMapKey", "+optional", "+groupName"} {
		if strings.Contains(doc, leak) {
			t.Errorf("marker %q leaks into the reference", leak)
		}
	}
	for _, want := range []string{
		"Values: `HTTP`; `HTTPS`; `TCP`.",
		"`RoundRobin`; `LeastRequest`; `Random`; `RingHash`; `Maglev`; `BackendUtilization`",
		"`Reject`: answers 400",
		"Limits: 1 to 65535.",
		"Rules: set either endpoints or service.",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("reference lacks %q", want)
		}
	}
	specEnd := strings.Index(doc, "\n## status")
	for _, line := range strings.Split(doc[:specEnd], "\n") {
		if strings.HasPrefix(line, "| `") && strings.HasSuffix(line, "|  |") {
			t.Errorf("field without a description: %s", line)
		}
	}
}

// TestReferenceStable: two runs give the same bytes, and the committed docs/policy-reference.md is what the
// generator makes (make generate; make check-generated diffs it too).
func TestReferenceStable(t *testing.T) {
	root := tools.RepoRoot()
	a, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two runs of the generator differ")
	}
	committed, err := os.ReadFile(filepath.Join(root, "docs", "policy-reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, committed) {
		t.Fatal("docs/policy-reference.md is stale: run make generate and commit")
	}
}
