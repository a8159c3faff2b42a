package xdsbuild_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/internal/envoyvalidate"
	"github.com/lbplane/lbplane/internal/tools"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/out from the current output")

var typeFiles = map[string]string{
	resource.SecretType:   "secrets",
	resource.ClusterType:  "clusters",
	resource.EndpointType: "endpoints",
	resource.ListenerType: "listeners",
	resource.RouteType:    "routes",
	// Written only where there are scopes (a port with many hosts), so older outputs have no such file.
	resource.ScopedRouteType: "scopes",
}

// goldenCase is one input: testdata/in/NAME.yaml, the IR of one or more proxy groups (an ir.Config).
type goldenCase struct{ name, path string }

func cases(t *testing.T) []goldenCase {
	var out []goldenCase
	in, _ := filepath.Glob("testdata/in/*.yaml")
	for _, p := range in {
		out = append(out, goldenCase{strings.TrimSuffix(filepath.Base(p), ".yaml"), p})
	}
	if len(out) < 5 {
		t.Fatalf("found only %d golden inputs", len(out))
	}
	return out
}

// readIR decodes an input. An unknown field is an error, so that an input written for an older IR does not
// quietly lose a setting.
func readIR(t *testing.T, path string) *ir.Config {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg ir.Config
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%s: the IR is invalid: %v", path, err)
	}
	return &cfg
}

// render produces the golden files of one input: one per xDS type, the resources of every group keyed by
// group. The input is IR: translation has its own goldens (controlplane/translate, policy → IR), so these
// change only when the xDS build does.
func render(t *testing.T, path string) (map[string][]byte, map[string]xdsbuild.Resources) {
	t.Helper()
	cfg := readIR(t, path)
	groups := map[string]xdsbuild.Resources{}
	files := map[string][]byte{}
	perType := map[string]map[string][]any{}
	for name, g := range cfg.Groups {
		r, err := xdsbuild.Build(g)
		if err != nil {
			t.Fatalf("build group %s: %v", name, err)
		}
		groups[name] = r
		for typ, list := range r {
			if perType[typ] == nil {
				perType[typ] = map[string][]any{}
			}
			for _, m := range list {
				js, err := protojson.Marshal(xdsbuild.Redacted(m))
				if err != nil {
					t.Fatal(err)
				}
				var v any
				if err := yaml.Unmarshal(js, &v); err != nil {
					t.Fatal(err)
				}
				perType[typ][name] = append(perType[typ][name], v)
			}
		}
	}
	for typ, file := range typeFiles {
		if typ == resource.ScopedRouteType && len(perType[typ]) == 0 {
			continue
		}
		b, err := yaml.Marshal(perType[typ])
		if err != nil {
			t.Fatal(err)
		}
		files[file+".yaml"] = b
	}
	return files, groups
}

func TestGolden(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range cases(t) {
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			files, _ := render(t, c.path)
			dir := filepath.Join("testdata", "out", c.name)
			if *update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			have, _ := filepath.Glob(filepath.Join(dir, "*"))
			for _, p := range have {
				if _, ok := files[filepath.Base(p)]; !ok {
					if *update {
						os.Remove(p)
						continue
					}
					t.Errorf("%s is no output of the input any more; run with -update to remove it", p)
				}
			}
			for name, got := range files {
				p := filepath.Join(dir, name)
				if *update {
					if err := os.WriteFile(p, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(p)
				if err != nil {
					t.Fatalf("%v (regenerate with: go test ./controlplane/xdsbuild -run TestGolden -update)", err)
				}
				if string(want) != string(got) {
					t.Errorf("%s differs from the golden file (regenerate with -update and review the diff):\n--- want\n%s\n--- got\n%s", p, want, got)
				}
			}
		})
	}
	// Orphans: an output directory whose input is gone.
	dirs, _ := filepath.Glob("testdata/out/*")
	for _, d := range dirs {
		if !seen[filepath.Base(d)] {
			if *update {
				os.RemoveAll(d)
				continue
			}
			t.Errorf("%s has no input any more; run with -update to remove it", d)
		}
	}
}

// TestGoldenAcceptedByEnvoy feeds every golden output to the real Envoy binary.
func TestGoldenAcceptedByEnvoy(t *testing.T) {
	envoy := tools.Require(t, "envoy")
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, groups := render(t, c.path)
			for name, g := range groups {
				if err := envoyvalidate.Check(context.Background(), envoy, g); err != nil {
					t.Errorf("group %s: %v", name, err)
				}
			}
		})
	}
}
