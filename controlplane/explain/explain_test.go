package explain

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/internal/tools"
)

// explainDir translates every policy of a directory the way lbctl explain -f does and explains each.
func explainDir(t *testing.T, dir string) []*Explanation {
	t.Helper()
	docs, err := manifest.ReadPath(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*Explanation
	for _, d := range docs {
		// Every host name answers one address, as lbplane's resolver would.
		dp := d.Policy.DeepCopy()
		v1alpha1.Default(dp)
		answers := map[translate.DNSQuery]translate.DNSAnswer{}
		for _, u := range translate.DNSQueries(dp) {
			answers[u.Query] = translate.DNSAnswer{Addrs: []netip.Addr{netip.MustParseAddr("198.51.100.20")}}
		}
		// Every Service has one ready endpoint, as its EndpointSlices would say.
		services := map[translate.ServiceRef]translate.ServiceEndpoints{}
		for _, b := range dp.Spec.Backends {
			if b.Service != nil {
				port := b.Service.Port
				if port == 0 {
					port = 8080
				}
				services[translate.ServiceRefOf(dp.Namespace, b.Service)] = translate.ServiceEndpoints{
					Endpoints: []translate.ServiceEndpoint{{Address: "198.51.100.30", Port: port, Ready: true}}}
			}
		}
		rules := reach.Loopback
		rules.EnvoyDNS = true // dns.resolver: Envoy, as lbplane serve --allow-envoy-dns allows it
		res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{d.Policy}, translate.Refs{Files: readFiles(t, d), Reach: rules, DNS: answers, Services: services})
		k := objkey.Of(d.Policy)
		p, _ := translate.Prepare(d.Policy, rules)
		pr := res.Policies.Of(k)
		g := res.IR.Groups[p.Spec.ProxyGroup]
		var built Lookup
		if g != nil {
			// What is served: the group built whole, looked up as the engine's state is.
			all, err := xdsbuild.Build(g)
			if err != nil {
				t.Fatal(err)
			}
			built = func(_, typ, name string) proto.Message {
				for _, m := range all[typ] {
					if cachev3.GetResourceName(m) == name {
						return m
					}
				}
				return nil
			}
		}
		e, err := Explain(p, pr, g, built)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// readFiles reads the files a policy references, relative to the repository as the examples are written.
func readFiles(t *testing.T, d manifest.Document) translate.Files {
	t.Helper()
	files := translate.Files{}
	for _, path := range translate.ReferencedFiles([]*v1alpha1.LoadBalancerPolicy{d.Policy}) {
		b, err := os.ReadFile(filepath.Join(tools.RepoRoot(), path))
		if err != nil {
			t.Fatal(err)
		}
		files[path] = translate.File{Data: b}
	}
	return files
}

// checkEnvoyValues explains the policies of file and checks, in the one named policy, the Envoy value of
// each field of want; same, when not nil, checks the policy's value too.
func checkEnvoyValues(t *testing.T, file, policy string, want map[string]string, same func(f Field, w string) bool) {
	t.Helper()
	for _, e := range explainDir(t, filepath.Join(tools.RepoRoot(), file)) {
		if e.Policy != policy {
			continue
		}
		for _, f := range e.Fields {
			if w, ok := want[f.Policy]; ok {
				if f.EnvoyValue != w || (same != nil && !same(f, w)) {
					t.Errorf("%s: policy %s, Envoy %s (%s), want %s", f.Policy, f.Value, f.EnvoyValue, f.Envoy, w)
				}
				delete(want, f.Policy)
			}
		}
		if len(want) > 0 {
			t.Errorf("fields not explained: %v", want)
		}
		return
	}
	t.Fatalf("%s not found", policy)
}

func TestExplainNamesTheValue(t *testing.T) {
	checkEnvoyValues(t, "examples/health-checks.yaml", "default/health", map[string]string{
		"spec.backends[0].healthCheck.panicThreshold":         "30",
		"spec.backends[0].healthCheck.passive.consecutive5xx": "5",
		"spec.listener.port":                                  "10089",
		"spec.backends[0].healthCheck.active.interval":        "2s",
	}, func(f Field, w string) bool { return strings.Contains(f.Value, strings.TrimSuffix(w, "s")) })
}

// A route Envoy answers itself (a redirect, a direct response) has no route action: its defaulted timeout is
// shown left out, saying why, while its own fields (its response headers too) and the other routes' timeouts
// and rewrites resolve.
func TestAnsweringRouteLeavesTheBackendSettingsOut(t *testing.T) {
	checkEnvoyValues(t, "controlplane/explain/testdata/fieldmap/routes.yaml", "default/routes", map[string]string{
		"spec.routes[0].timeout":                      "20s",
		"spec.routes[2].timeout":                      "(left out: the route answers with a redirect, not a backend)",
		"spec.routes[2].redirect.port":                "8443",
		"spec.routes[2].redirect.statusCode":          "PERMANENT_REDIRECT",
		"spec.routes[4].timeout":                      "(left out: the route answers with a direct response, not a backend)",
		"spec.routes[4].directResponse.status":        "410",
		"spec.routes[4].responseHeaders.set[0].value": `[{"append_action":"OVERWRITE_IF_EXISTS_OR_ADD","header":{"key":"cache-control","value":"max-age=3600"}}]`,
		"spec.routes[1].rewrite.hostname":             "orders.internal",
		"spec.routes[1].errorWeight":                  "1",
		"spec.routes[1].match.method":                 "POST",
	}, nil)
}
