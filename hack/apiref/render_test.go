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
	inlineFields(t, path, out, seen)
}

// inlineFields lists t's JSON fields under path, with those of an embedded struct inlined (json ",inline").
func inlineFields(t reflect.Type, path string, out map[string][]string, seen map[reflect.Type]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" && opts == "inline" && f.Anonymous && f.Type.PkgPath() == reflect.TypeFor[v1alpha1.Listener]().PkgPath() {
			inlineFields(f.Type, path, out, seen)
			continue
		}
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

// TestReferenceEnvoyLines: the "Envoy:" lines come from explain's rules alone. No doc comment of a spec
// field writes one (the mapping would then be written twice, and nothing would check the copy), and every
// spec field has a line, on its own row or on the row of the field above it that its rule covers.
func TestReferenceEnvoyLines(t *testing.T) {
	root := tools.RepoRoot()
	m, err := load(filepath.Join(root, APIDir))
	if err != nil {
		t.Fatal(err)
	}
	leaves := 0
	for _, s := range m.walk("LoadBalancerPolicySpec", "spec") {
		for _, f := range s.typ.fields {
			path := s.path + "." + f.json
			if strings.Contains(f.doc, "Envoy:") {
				t.Errorf("%s: its doc comment says which Envoy field it sets; that is explain's rule's to say (controlplane/explain/fields*.go)", path)
			}
			if name, _ := m.structOf(f.typ); name != "" {
				continue
			}
			leaves++
			covered := false
			for p := path; p != "spec" && !covered; p = p[:strings.LastIndexByte(p, '.')] {
				covered = envoyLine(strings.TrimSuffix(p, "[]")) != ""
			}
			if !covered {
				t.Errorf("%s has no Envoy line, nor does a field above it", path)
			}
		}
	}
	if leaves < 100 {
		t.Fatalf("only %d fields under spec", leaves)
	}
	out, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `connectTimeout` | duration (`5s`, `1m30s`) | connectTimeout bounds the TCP (and TLS) connect to an endpoint. Defaults to 5s. Envoy: Cluster `connect_timeout`. |",
		"Envoy: no field of its own; lbplane's: how a change reaches the group's Envoys, in stages.",
		"Envoy: Cluster `outlier_detection`, left out when true.",
		"Envoy: Cluster `health_checks[0].grpc_health_check.service_name`, unset while Envoy's default applies.",
		// RateLimit is the listener's and the routes' type: each path has its own line.
		"Envoy at `spec.routes[].rateLimit`: RouteConfiguration `virtual_hosts[name={vhost}].routes[name={route}].typed_per_filter_config.*.token_bucket.max_tokens`.",
		"Envoy at `spec.listener.rateLimit`: no field of its own; refused on the listener",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("reference lacks %q", want)
		}
	}
}
