package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/lbplane/lbplane"

// layers of the module, from the bottom: a package imports only from its own layer or below. Every
// top-level folder holding Go packages is in one; a new one fails the test until it is placed.
var layers = [][]string{
	{"api", "version", "atomicfile"},
	{"envoy-bootstrap"},
	{"controlplane"},
	{"internal"},
	{"cmd", "bench", "hack", "e2e"},
}

// layerOf is the layer of a package of the module by its top-level folder, or -1.
func layerOf(pkg string) int {
	top, _, _ := strings.Cut(strings.TrimPrefix(pkg, module+"/"), "/")
	for i, l := range layers {
		for _, d := range l {
			if d == top {
				return i
			}
		}
	}
	return -1
}

// checkLayers returns one line for each import of pkgs that points up a layer, and each package in no layer.
func checkLayers(pkgs map[string][]string) []string {
	var out []string
	for pkg, imports := range pkgs {
		from := layerOf(pkg)
		if from < 0 {
			out = append(out, pkg+" is in no layer: add its top-level folder to layers")
			continue
		}
		for _, imp := range imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if to := layerOf(imp); to > from {
				out = append(out, pkg+" imports "+imp+", a layer above it")
			}
		}
	}
	return out
}

// modulePackages lists the module's packages and what each imports (not counting its tests).
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		pkgs[p.ImportPath] = p.Imports
	}
	for _, want := range []string{module + "/controlplane/serve", module + "/envoy-bootstrap", module + "/internal/lbctl"} {
		if _, ok := pkgs[want]; !ok {
			t.Fatalf("go list listed %d packages, not %s", len(pkgs), want)
		}
	}
	return pkgs
}

// TestNoUpwardImports: nothing that ships imports upward. controlplane imports nothing from internal/
// (which holds the commands and the test helpers), and envoy-bootstrap imports nothing from controlplane,
// which imports it. Only the non-test imports count: tests of controlplane use internal's real
// kube-apiserver, etcd and Envoy helpers.
func TestNoUpwardImports(t *testing.T) {
	for _, line := range checkLayers(modulePackages(t)) {
		t.Error(line)
	}
}

// TestArchitectureListsEveryPackage: docs/architecture.md gives every package of the module a line of its
// own, and lists no folder that is not there.
func TestArchitectureListsEveryPackage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## The packages\n")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## The packages" section`)
	}
	_, block, ok := strings.Cut(section, "\n```text\n")
	if ok {
		block, _, ok = strings.Cut(block, "\n```\n")
	}
	if !ok {
		t.Fatal("the packages section of docs/architecture.md has no text block listing them")
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(block, "\n") {
		dir, _, _ := strings.Cut(line, " ")
		if !strings.HasSuffix(dir, "/") {
			t.Errorf("docs/architecture.md: %q does not start with a folder", line)
			continue
		}
		if listed[dir] {
			t.Errorf("docs/architecture.md lists %s twice", dir)
		}
		listed[dir] = true
		if fi, err := os.Stat(filepath.Join("..", dir)); err != nil || !fi.IsDir() {
			t.Errorf("docs/architecture.md lists %s, which is not a folder of the repository", dir)
		}
	}
	for pkg := range modulePackages(t) {
		if dir := strings.TrimPrefix(pkg, module+"/") + "/"; !listed[dir] {
			t.Errorf("docs/architecture.md does not list package %s (a line starting %q)", pkg, dir)
		}
	}
}

// TestCheckLayersFindsUpwardImports: the check names the imports of the kind it exists to stop.
func TestCheckLayersFindsUpwardImports(t *testing.T) {
	got := checkLayers(map[string][]string{
		module + "/controlplane/serve":  {"context", module + "/internal/memlimit", module + "/controlplane/store"},
		module + "/envoy-bootstrap":     {module + "/controlplane/pki", module + "/api/v1alpha1"},
		module + "/internal/lbctl":      {module + "/controlplane/pushclient", module + "/version"},
		module + "/newfolder/something": {"fmt"},
	})
	want := map[string]bool{
		module + "/controlplane/serve imports " + module + "/internal/memlimit, a layer above it": true,
		module + "/envoy-bootstrap imports " + module + "/controlplane/pki, a layer above it":     true,
		module + "/newfolder/something is in no layer: add its top-level folder to layers":        true,
	}
	if len(got) != len(want) {
		t.Fatalf("checkLayers = %q, want %d lines", got, len(want))
	}
	for _, g := range got {
		if !want[g] {
			t.Errorf("unexpected %q", g)
		}
	}
}
