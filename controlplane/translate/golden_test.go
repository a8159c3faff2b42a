package translate_test

import (
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/internal/tools"
)

var (
	update   = flag.Bool("update", false, "rewrite testdata/out from the current output")
	xdsInput = flag.String("xds-input", "", "write the IR of the named input (testdata/in/NAME.yaml, or example-NAME) as "+
		"controlplane/xdsbuild/testdata/in/NAME.yaml, a new input of the IR → xDS goldens")
)

// TestGoldenIR pins what each input (testdata/in and examples) translates into: policy to IR and to each
// policy's result. It is one of two independent golden sets, as in Envoy Gateway: xdsbuild's goldens start
// from IR files (controlplane/xdsbuild/testdata/in), so a change of translation shows here alone, and a
// change of the xDS build there alone. go test -update rewrites these and removes those whose input is gone.
func TestGoldenIR(t *testing.T) {
	inputs, _ := filepath.Glob(filepath.Join("testdata", "in", "*.yaml"))
	examples, _ := filepath.Glob(filepath.Join(tools.RepoRoot(), "examples", "*.yaml"))
	if len(inputs) < 5 || len(examples) < 5 {
		t.Fatalf("found only %d inputs and %d examples", len(inputs), len(examples))
	}
	want := map[string]bool{}
	for _, set := range []struct {
		prefix string
		paths  []string
	}{{"", inputs}, {"example-", examples}} {
		for _, path := range set.paths {
			name := set.prefix + strings.TrimSuffix(filepath.Base(path), ".yaml")
			golden := filepath.Join("testdata", "out", name+".json")
			want[golden] = true
			res := translateFile(t, path)
			if name == *xdsInput {
				writeXDSInput(t, name, res.IR)
			}
			got := renderIR(t, res)
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
	old, _ := filepath.Glob(filepath.Join("testdata", "out", "*"))
	for _, p := range old {
		switch {
		case want[p]:
		case *update:
			os.RemoveAll(p)
		default:
			t.Errorf("%s has no input any more; run with -update to remove it", p)
		}
	}
}

// translateFile translates the policies of one input, with the files they reference read relative to the
// repository, as they are for a user running lbctl there.
func translateFile(t *testing.T, path string) *translate.Result {
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
	res := translate.Translate(policies, translate.Refs{Files: files, Reach: reach.Loopback, DNS: goldenDNS(policies)})
	if err := res.IR.Validate(); err != nil {
		t.Fatalf("%s: the IR is invalid: %v", path, err)
	}
	return res
}

// goldenDNS answers every host name of the policies as lbplane's resolver would: two addresses of
// 198.51.100.0/24, except names under forbidden.test, which answer the forbidden 169.254.169.254, 0.0.0.0
// and 2002:a9fe:a9fe::1 (6to4 of 169.254.169.254) beside one allowed address, and names under nx.test, which do not resolve.
func goldenDNS(policies []*v1alpha1.LoadBalancerPolicy) map[translate.DNSQuery]translate.DNSAnswer {
	out := map[translate.DNSQuery]translate.DNSAnswer{}
	for _, p := range policies {
		c := p.DeepCopy()
		v1alpha1.Default(c)
		for _, u := range translate.DNSQueries(c) {
			switch {
			case strings.HasSuffix(u.Query.Name, ".forbidden.test"):
				out[u.Query] = translate.DNSAnswer{Addrs: []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("198.51.100.30"),
					netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("2002:a9fe:a9fe::1")}}
			case strings.HasSuffix(u.Query.Name, ".nx.test"):
				out[u.Query] = translate.DNSAnswer{Err: "no such host"}
			default:
				out[u.Query] = translate.DNSAnswer{Addrs: []netip.Addr{netip.MustParseAddr("198.51.100.20"), netip.MustParseAddr("198.51.100.21")}}
			}
		}
	}
	return out
}

// renderIR is a translation's IR and policy results as indented JSON, private keys left out.
func renderIR(t *testing.T, res *translate.Result) []byte {
	t.Helper()
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

// writeXDSInput writes cfg as an input of xdsbuild's goldens (-xds-input): the IR alone, keys included
// (the real Envoy checks what is built from it), as YAML.
func writeXDSInput(t *testing.T, name string, cfg *ir.Config) {
	t.Helper()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tools.RepoRoot(), "controlplane", "xdsbuild", "testdata", "in", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	from := "controlplane/translate/testdata/in/" + name + ".yaml"
	if example, ok := strings.CutPrefix(name, "example-"); ok {
		from = "examples/" + example + ".yaml"
	}
	header := "# IR input of the xDS goldens. First written from the translation of " + from + " by\n" +
		"# go test ./controlplane/translate -run TestGoldenIR -xds-input " + name + "; it is IR, edited as IR, from then on.\n"
	if err := os.WriteFile(path, append([]byte(header), b...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Status names a route's session cluster after the route ("switch/session"), from what translation recorded:
// nothing cuts the cluster's name apart.
func TestSessionClusterIsNamedAfterItsRoute(t *testing.T) {
	res := translateFile(t, filepath.Join("testdata", "in", "draining-sessions.yaml"))
	pr := res.Policies.Of(objkey.Key{Namespace: "default", Name: "draining-sessions"})
	if pr == nil {
		t.Fatal("no result for the policy")
	}
	var sessions []string
	for _, c := range pr.Clusters {
		if name, ok := pr.SessionOf(c); ok {
			if _, backend := pr.BackendOf(c); backend {
				t.Errorf("%s is both a backend and a session cluster", c)
			}
			sessions = append(sessions, c+" → "+name)
		}
	}
	if want := []string{"default/draining-sessions/switch/session → switch/session"}; strings.Join(sessions, ",") != strings.Join(want, ",") {
		t.Fatalf("session clusters %q, want %q", sessions, want)
	}
}
