package translate_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/internal/tools"
)

var update = flag.Bool("update", false, "rewrite testdata/ir from the current output")

// TestGoldenIR pins what each input translates into, policy to IR, beside xdsbuild's goldens from IR to
// xDS (the same inputs: xdsbuild/testdata/in and examples). go test -update rewrites them and removes
// those whose input is gone.
func TestGoldenIR(t *testing.T) {
	inputs, _ := filepath.Glob(filepath.Join(tools.RepoRoot(), "controlplane", "xdsbuild", "testdata", "in", "*.yaml"))
	examples, _ := filepath.Glob(filepath.Join(tools.RepoRoot(), "examples", "*.yaml"))
	want := map[string]bool{}
	for _, set := range []struct {
		prefix string
		paths  []string
	}{{"", inputs}, {"example-", examples}} {
		for _, path := range set.paths {
			name := set.prefix + strings.TrimSuffix(filepath.Base(path), ".yaml")
			golden := filepath.Join("testdata", "ir", name+".json")
			want[golden] = true
			got := renderIR(t, path)
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			b, err := os.ReadFile(golden)
			if err != nil {
				t.Errorf("%s: %v (go test ./controlplane/translate -run TestGoldenIR -update writes it)", golden, err)
				continue
			}
			if string(b) != string(got) {
				t.Errorf("%s differs from the translation of %s (go test -update rewrites it):\n%s", golden, path, got)
			}
		}
	}
	if *update {
		old, _ := filepath.Glob(filepath.Join("testdata", "ir", "*.json"))
		for _, p := range old {
			if !want[p] {
				os.Remove(p)
			}
		}
	}
}

// renderIR is an input's IR and policy results as indented JSON, with private keys left out.
func renderIR(t *testing.T, path string) []byte {
	t.Helper()
	docs, err := manifest.ReadPath(path, nil)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	policies := manifest.Policies(docs)
	files := translate.Files{}
	for _, p := range translate.ReferencedFiles(policies) {
		full := p
		if !filepath.IsAbs(p) {
			full = filepath.Join(tools.RepoRoot(), p)
		}
		if data, err := os.ReadFile(full); err == nil {
			files[p] = translate.File{Data: data}
		} else {
			files[p] = translate.File{Err: "cannot read it"}
		}
	}
	res := translate.Translate(policies, translate.Refs{Files: files, Reach: reach.Loopback})
	groups := map[string]*ir.Group{}
	for name, g := range res.IR.Groups {
		c := *g
		c.Secrets = nil
		for _, s := range g.Secrets {
			r := *s
			if r.PrivateKey != nil {
				r.PrivateKey = []byte("[redacted]")
			}
			c.Secrets = append(c.Secrets, &r)
		}
		groups[name] = &c
	}
	policiesOut := map[string]*translate.PolicyResult{}
	for k, r := range res.Policies.All() {
		policiesOut[k.String()] = r
	}
	b, err := json.MarshalIndent(map[string]any{"groups": groups, "policies": policiesOut}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}
