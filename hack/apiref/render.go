// render.go renders the LoadBalancerPolicy reference (docs/policy-reference.md) from the doc comments of
// the API types in api/v1alpha1: one section per object, in the order a policy nests them, one table row per
// field with its type, its description (default, why), the Envoy field it becomes (explain's rules, see
// envoyLine) and the limits its +kubebuilder markers set. Markers never reach the text. The hand-written parts (header.md, footer.md in
// hack/apiref) are included as they are.

package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/lbplane/lbplane/controlplane/explain"
)

// APIDir, HeaderFile and FooterFile are relative to the repository root.
const (
	APIDir     = "api/v1alpha1"
	HeaderFile = "hack/apiref/header.md"
	FooterFile = "hack/apiref/footer.md"
)

type field struct {
	json    string
	goName  string
	typ     ast.Expr
	doc     string
	markers []string
	// inlineOf names the struct whose fields this embedded field (json ",inline") stands for, until
	// expandInline puts them in its place.
	inlineOf string
}

type typeInfo struct {
	name    string
	doc     string
	markers []string
	fields  []field // nil for non-struct types
	isEnum  bool
	values  []enumValue
}

type enumValue struct {
	value, doc string
}

type model struct {
	types map[string]*typeInfo
}

// load parses the API package's Go files (not tests, not generated code).
func load(dir string) (*model, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	m := &model{types: map[string]*typeInfo{}}
	var consts []*ast.GenDecl
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || strings.HasPrefix(n, "zz_generated") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			switch gd.Tok {
			case token.CONST:
				consts = append(consts, gd)
			case token.TYPE:
				for _, s := range gd.Specs {
					ts := s.(*ast.TypeSpec)
					cg := ts.Doc
					if cg == nil && len(gd.Specs) == 1 {
						cg = gd.Doc
					}
					ti := &typeInfo{name: ts.Name.Name}
					ti.doc, ti.markers = splitComment(cg)
					if st, ok := ts.Type.(*ast.StructType); ok {
						ti.fields = []field{}
						for _, f := range st.Fields.List {
							fi := field{typ: f.Type}
							fi.doc, fi.markers = splitComment(f.Doc)
							if f.Tag != nil {
								tag, _ := strconv.Unquote(f.Tag.Value)
								fi.json = jsonName(tag)
							}
							if len(f.Names) == 0 {
								// An embedded struct of this package with json ",inline" lends its fields;
								// embedded TypeMeta, ObjectMeta and ListMeta are left out.
								if id, ok := f.Type.(*ast.Ident); ok && f.Tag != nil && strings.Contains(f.Tag.Value, `,inline"`) {
									ti.fields = append(ti.fields, field{inlineOf: id.Name})
								}
								continue
							}
							for _, name := range f.Names {
								fi.goName = name.Name
								if fi.json == "" {
									fi.json = name.Name
								}
								ti.fields = append(ti.fields, fi)
							}
						}
					}
					for _, mk := range ti.markers {
						if strings.HasPrefix(mk, "+kubebuilder:validation:Enum=") {
							ti.isEnum = true
						}
					}
					m.types[ti.name] = ti
				}
			}
		}
	}
	for _, ti := range m.types {
		ti.fields = m.expandInline(ti.fields)
	}
	// Enum values and their docs, from the typed constants.
	for _, gd := range consts {
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			id, ok := vs.Type.(*ast.Ident)
			if !ok || m.types[id.Name] == nil || len(vs.Values) != len(vs.Names) {
				continue
			}
			doc, _ := splitComment(vs.Doc)
			for i := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				m.types[id.Name].values = append(m.types[id.Name].values, enumValue{v, stripGoName(doc, vs.Names[i].Name)})
			}
		}
	}
	return m, nil
}

func jsonName(tag string) string {
	i := strings.Index(tag, `json:"`)
	if i < 0 {
		return ""
	}
	rest := tag[i+len(`json:"`):]
	rest = rest[:strings.IndexByte(rest, '"')]
	name, _, _ := strings.Cut(rest, ",")
	return name
}

// splitComment separates a comment's text (paragraphs joined, one line each) from its +markers.
func splitComment(cg *ast.CommentGroup) (string, []string) {
	if cg == nil {
		return "", nil
	}
	var markers, paras []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			paras = append(paras, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, line := range strings.Split(cg.Text(), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "+"):
			markers = append(markers, t)
		case t == "":
			flush()
		default:
			cur = append(cur, t)
		}
	}
	flush()
	return strings.Join(paras, "\n\n"), markers
}

// stripGoName drops a leading Go identifier ("UnderscoresReject answers 400" → "answers 400"; "DNSStrict: ..." → "...").
func stripGoName(doc, name string) string {
	if rest, ok := strings.CutPrefix(doc, name); ok {
		return strings.TrimSpace(strings.TrimPrefix(rest, ":"))
	}
	return doc
}

// section is one object of the policy, at the first path where it appears.
type section struct {
	path  string
	typ   *typeInfo
	also  []string
	depth int
}

// walk lists the sections under root, depth first in field order; a type met again is linked, not repeated,
// and its section and those under it record the other paths they are found at.
func (m *model) walk(root, path string) []*section {
	byType := map[string]*section{}
	var out []*section
	var visit func(typ, path string, depth int)
	visit = func(typ, path string, depth int) {
		ti := m.types[typ]
		if s, ok := byType[typ]; ok {
			s.also = append(s.also, path)
		} else {
			s = &section{path: path, typ: ti, depth: depth}
			byType[typ] = s
			out = append(out, s)
		}
		for _, f := range ti.fields {
			name, list := m.structOf(f.typ)
			if name == "" {
				continue
			}
			p := path + "." + f.json
			if list {
				p += "[]"
			}
			visit(name, p, depth+1)
		}
	}
	visit(root, path, 0)
	return out
}

// structOf returns the local struct type a field holds (through pointers and slices), if any.
func (m *model) structOf(e ast.Expr) (string, bool) {
	list := false
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
			continue
		case *ast.ArrayType:
			list = true
			e = t.Elt
			continue
		case *ast.Ident:
			if ti := m.types[t.Name]; ti != nil && ti.fields != nil {
				return t.Name, list
			}
		}
		return "", false
	}
}

var anchorDrop = regexp.MustCompile(`[^a-z0-9 _-]`)

// Anchor is the fragment GitHub gives a heading.
func Anchor(heading string) string {
	return strings.ReplaceAll(anchorDrop.ReplaceAllString(strings.ToLower(heading), ""), " ", "-")
}

// typeText renders a field's type, linking objects to their sections.
func (m *model) typeText(e ast.Expr, sections map[string]*section) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return m.typeText(t.X, sections)
	case *ast.ArrayType:
		return "list of " + m.typeText(t.Elt, sections)
	case *ast.SelectorExpr:
		switch t.Sel.Name {
		case "Duration":
			return "duration (`5s`, `1m30s`)"
		case "Condition":
			return "[Condition](https://pkg.go.dev/k8s.io/apimachinery/pkg/apis/meta/v1#Condition)"
		}
		return t.Sel.Name
	case *ast.Ident:
		switch t.Name {
		case "string":
			return "string"
		case "bool":
			return "boolean"
		case "int32", "int64", "int":
			return "integer"
		}
		ti := m.types[t.Name]
		if ti == nil {
			return t.Name
		}
		if ti.fields != nil {
			if s := sections[t.Name]; s != nil {
				return fmt.Sprintf("[object](#%s)", Anchor(s.path))
			}
			return "object"
		}
		if ti.isEnum {
			return "enum"
		}
		return "string"
	}
	return "?"
}

// enumOf returns the enum type a field holds, if any.
func (m *model) enumOf(e ast.Expr) *typeInfo {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
			continue
		case *ast.ArrayType:
			e = t.Elt
			continue
		case *ast.Ident:
			if ti := m.types[t.Name]; ti != nil && ti.isEnum {
				return ti
			}
		}
		return nil
	}
}

func markerValue(markers []string, name string) (string, bool) {
	for _, mk := range markers {
		if v, ok := strings.CutPrefix(mk, "+kubebuilder:validation:"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// limits renders what a field's markers enforce.
func limits(markers []string) string {
	var parts []string
	lo, hasLo := markerValue(markers, "Minimum")
	hi, hasHi := markerValue(markers, "Maximum")
	switch {
	case hasLo && hasHi:
		parts = append(parts, lo+" to "+hi)
	case hasLo:
		parts = append(parts, "at least "+lo)
	case hasHi:
		parts = append(parts, "at most "+hi)
	}
	if v, ok := markerValue(markers, "MinLength"); ok {
		parts = append(parts, "at least "+v+" characters")
	}
	if v, ok := markerValue(markers, "MaxLength"); ok {
		parts = append(parts, "at most "+v+" characters")
	}
	if v, ok := markerValue(markers, "MaxItems"); ok {
		parts = append(parts, "at most "+v+" items")
	}
	return strings.Join(parts, "; ")
}

var xvalMessage = regexp.MustCompile(`message="([^"]*)"`)

// envoyName matches Envoy field and type names in comments (Cluster.connect_timeout, max_request_headers_kb,
// envoy.filters.http.local_ratelimit), which the reference sets in code.
var envoyName = regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9]*(?:[._][A-Za-z0-9]+)+(?:_\*)?`)

// inline escapes text for a table cell or a paragraph: HTML-like <names> and emphasis stars outside code
// spans, pipes everywhere.
func inline(s string) string {
	parts := strings.Split(s, "`")
	for i := range parts {
		if i%2 == 0 {
			parts[i] = envoyName.ReplaceAllStringFunc(parts[i], func(n string) string {
				if !strings.ContainsAny(n, "_") && !strings.Contains(n, ".") {
					return n
				}
				return "`" + n + "`"
			})
		}
	}
	parts = strings.Split(strings.Join(parts, "`"), "`")
	for i := range parts {
		if i%2 == 0 {
			parts[i] = strings.NewReplacer("<", "&lt;", ">", "&gt;", "*", `\*`, "_", `\_`).Replace(parts[i])
		}
	}
	return strings.ReplaceAll(strings.Join(parts, "`"), "|", `\|`)
}

// Generate renders the whole reference.
func Generate(root string) ([]byte, error) {
	m, err := load(filepath.Join(root, APIDir))
	if err != nil {
		return nil, err
	}
	header, err := os.ReadFile(filepath.Join(root, HeaderFile))
	if err != nil {
		return nil, err
	}
	footer, err := os.ReadFile(filepath.Join(root, FooterFile))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("<!-- Generated by `make generate` (go run ./hack/apiref) from the doc comments in api/v1alpha1 and\n" +
		"     hack/apiref/header.md, footer.md. Edit those, not this file. -->\n")
	b.Write(header)
	for _, top := range []struct{ typ, path string }{
		{"LoadBalancerPolicySpec", "spec"},
		{"LoadBalancerPolicyStatus", "status"},
	} {
		if m.types[top.typ] == nil {
			return nil, fmt.Errorf("%s: type %s not found", APIDir, top.typ)
		}
		secs := m.walk(top.typ, top.path)
		byType := map[string]*section{}
		for _, s := range secs {
			byType[s.typ.name] = s
		}
		for _, s := range secs {
			level := "##"
			if s.depth > 0 {
				level = "###"
			}
			fmt.Fprintf(&b, "\n%s %s\n\n", level, s.path)
			if s.typ.doc != "" {
				fmt.Fprintf(&b, "%s\n\n", inline(s.typ.doc))
			}
			if len(s.also) > 0 {
				sort.Strings(s.also)
				fmt.Fprintf(&b, "Also at %s.\n\n", strings.Join(codeAll(s.also), ", "))
			}
			var rules []string
			for _, mk := range s.typ.markers {
				if strings.HasPrefix(mk, "+kubebuilder:validation:XValidation:") {
					if mm := xvalMessage.FindStringSubmatch(mk); mm != nil {
						rules = append(rules, mm[1])
					}
				}
			}
			if len(rules) > 0 {
				fmt.Fprintf(&b, "Rules: %s.\n\n", inline(strings.Join(rules, "; ")))
			}
			b.WriteString("| field | type | description |\n|---|---|---|\n")
			for _, f := range s.typ.fields {
				desc := f.doc
				desc = strings.ReplaceAll(inline(desc), "\n\n", "<br><br>")
				if e := envoyLines(append([]string{s.path}, s.also...), f.json); e != "" {
					desc = joinSentence(desc, e)
				}
				if e := m.enumOf(f.typ); e != nil {
					var vals []string
					for _, v := range e.values {
						if v.doc != "" {
							vals = append(vals, fmt.Sprintf("`%s`: %s", v.value, inline(strings.TrimSuffix(v.doc, "."))))
						} else {
							vals = append(vals, fmt.Sprintf("`%s`", v.value))
						}
					}
					desc = joinSentence(desc, "Values: "+strings.Join(vals, "; ")+".")
				}
				if l := limits(f.markers); l != "" {
					desc = joinSentence(desc, "Limits: "+l+".")
				}
				if v, ok := defaultMarker(f.markers); ok && !strings.Contains(desc, "efault") {
					desc = joinSentence(desc, "Defaults to `"+v+"`.")
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.json, m.typeText(f.typ, byType), desc)
			}
		}
	}
	if err := writeExamples(&b, root); err != nil {
		return nil, err
	}
	b.WriteString("\n")
	b.Write(footer)
	return b.Bytes(), nil
}

// writeExamples lists examples/*.yaml with the first phrase of each one's leading comment.
func writeExamples(b *bytes.Buffer, root string) error {
	files, err := filepath.Glob(filepath.Join(root, "examples", "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	b.WriteString("\n## Examples\n\nOne file per feature, each linted clean and served by a real Envoy in the tests " +
		"(`e2e/examples_test.go`).\n\n| example | what it shows |\n|---|---|\n")
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var comment []string
		for _, line := range strings.Split(string(text), "\n") {
			c, ok := strings.CutPrefix(line, "#")
			if !ok {
				break
			}
			comment = append(comment, strings.TrimSpace(c))
		}
		what := strings.Join(comment, " ")
		depth := 0
		for i := 1; i+1 < len(what); i++ { // up to the first ": " or ". " outside parentheses
			switch what[i] {
			case '(':
				depth++
			case ')':
				depth--
			case ':', '.':
				if depth == 0 && what[i+1] == ' ' && what[i-1] != '.' {
					what = what[:i]
					i = len(what)
				}
			}
		}
		name := filepath.Base(f)
		fmt.Fprintf(b, "| [%s](../examples/%s) | %s |\n", name, name, inline(strings.TrimSuffix(what, ".")))
	}
	return nil
}

// envoyLine says which Envoy field a policy field sets, from the rules lbctl explain resolves on the built
// resources (explain.FieldMappings): the one description of that mapping. Empty for a field no rule maps.
func envoyLine(path string) string {
	var lines []string
	for _, m := range explain.FieldMappings(path) {
		lines = append(lines, mappingText(m))
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "; or ") + "."
}

// mappingText is one mapping in words.
func mappingText(m explain.Mapping) string {
	if m.None != "" {
		return "no field of its own; " + inline(m.None)
	}
	// A listener's field is in each filter chain, or in the default chain (HTTPS with a certificate for
	// every name): said once.
	var paths []string
	for i := 0; i < len(m.Paths); i++ {
		p := m.Paths[i]
		if rest, ok := strings.CutPrefix(p, "filter_chains[*]."); ok && i+1 < len(m.Paths) && m.Paths[i+1] == "default_filter_chain."+rest {
			paths = append(paths, "`"+p+"` (or `default_filter_chain`)")
			i++
			continue
		}
		paths = append(paths, "`"+p+"`")
	}
	line := m.Resource + " " + strings.Join(paths, " or ")
	switch {
	case m.Off:
		line += ", left out when true"
	case m.Optional:
		line += ", unset while Envoy's default applies"
	}
	return line
}

// envoyLines is the Envoy sentence of a field of a section found at several paths: one, or one per path
// where they differ (a route's rate limit is not the listener's).
func envoyLines(sectionPaths []string, field string) string {
	var at, lines []string
	for _, p := range sectionPaths {
		if l := envoyLine(p + "." + field); l != "" {
			at, lines = append(at, p), append(lines, l)
		}
	}
	switch {
	case len(lines) == 0:
		return ""
	case len(lines) == len(sectionPaths) && len(slices.Compact(slices.Clone(lines))) == 1:
		return "Envoy: " + lines[0]
	}
	out := make([]string, len(lines))
	for i := range lines {
		out[i] = "Envoy at `" + at[i] + "`: " + lines[i]
	}
	return strings.Join(out, " ")
}

func defaultMarker(markers []string) (string, bool) {
	for _, mk := range markers {
		if v, ok := strings.CutPrefix(mk, "+kubebuilder:default="); ok {
			return v, true
		}
	}
	return "", false
}

func joinSentence(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

func codeAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "`" + s + "`"
	}
	return out
}

// expandInline puts the fields of each inlined struct where it is embedded.
func (m *model) expandInline(fields []field) []field {
	if fields == nil {
		return nil
	}
	out := make([]field, 0, len(fields))
	for _, f := range fields {
		if f.inlineOf == "" {
			out = append(out, f)
		} else if ti := m.types[f.inlineOf]; ti != nil {
			out = append(out, m.expandInline(ti.fields)...)
		}
	}
	return out
}
