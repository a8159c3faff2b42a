package xdsbuild_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/translate"
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

// goldenCase is one input file: testdata/in/*.yaml and every file under examples/.
type goldenCase struct{ name, path string }

func cases(t *testing.T) []goldenCase {
	var out []goldenCase
	in, _ := filepath.Glob("testdata/in/*.yaml")
	for _, p := range in {
		out = append(out, goldenCase{strings.TrimSuffix(filepath.Base(p), ".yaml"), p})
	}
	ex, _ := filepath.Glob(filepath.Join(tools.RepoRoot(), "examples", "*.yaml"))
	for _, p := range ex {
		out = append(out, goldenCase{"example-" + strings.TrimSuffix(filepath.Base(p), ".yaml"), p})
	}
	if len(out) < 5 {
		t.Fatalf("found only %d golden inputs", len(out))
	}
	return out
}

// render produces the golden files of one input: one per xDS type (resources of every group, keyed by
// group), plus the status translation gave each policy.
func render(t *testing.T, path string) (map[string][]byte, map[string]xdsbuild.Resources) {
	t.Helper()
	docs, err := manifest.ReadPath(path, nil)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	policies := manifest.Policies(docs)
	res := translate.Translate(policies, translate.Refs{Files: readFiles(policies), Reach: reach.Loopback})
	if err := res.IR.Validate(); err != nil {
		t.Fatalf("IR invalid: %v", err)
	}
	groups := map[string]xdsbuild.Resources{}
	files := map[string][]byte{}
	perType := map[string]map[string][]any{}
	for name, g := range res.IR.Groups {
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
	type status struct {
		Accepted, ResolvedRefs string
		ProxyGroup, Listener   string   `json:",omitempty"`
		Clusters               []string `json:",omitempty"`
		Endpoints              int32
		Errors                 []string `json:",omitempty"`
	}
	st := map[string]status{}
	for k, r := range res.Policies.All() {
		s := status{
			Accepted:     fmt.Sprintf("%v %s: %s", r.Accepted, r.AcceptedReason, r.AcceptedMessage),
			ResolvedRefs: fmt.Sprintf("%v %s: %s", r.ResolvedRefs, r.ResolvedRefsReason, r.ResolvedRefsMessage),
			ProxyGroup:   r.ProxyGroup, Listener: r.Listener, Clusters: r.Clusters, Endpoints: r.Endpoints,
		}
		for _, e := range r.Errors {
			s.Errors = append(s.Errors, e.Error())
		}
		slices.Sort(s.Errors)
		st[k.String()] = s
	}
	b, err := yaml.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	files["status.yaml"] = b
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

// readFiles reads the files the inputs reference; relative paths are relative to the repository, as they
// are for a user running lbctl there.
func readFiles(policies []*v1alpha1.LoadBalancerPolicy) translate.Files {
	files := translate.Files{}
	for _, p := range translate.ReferencedFiles(policies) {
		full := p
		if !filepath.IsAbs(p) {
			full = filepath.Join(tools.RepoRoot(), p)
		}
		data, err := os.ReadFile(full)
		if err != nil {
			files[p] = translate.File{Err: "cannot read it"}
			continue
		}
		files[p] = translate.File{Data: data}
	}
	return files
}
