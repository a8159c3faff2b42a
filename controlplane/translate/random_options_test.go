package translate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/internal/envoyvalidate"
	"github.com/lbplane/lbplane/internal/tools"
)

// randomTrafficPolicy combines the traffic features at random with the algorithms, TLS and HTTP/2.
func randomTrafficPolicy(r *rand.Rand, i int) string {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	protocol := pick("HTTP", "TCP")
	listener := fmt.Sprintf("{port: %d, protocol: %s", 9000+i, protocol)
	if r.IntN(2) == 0 {
		listener += ", proxyProtocol: {optional: " + pick("true", "false") + "}"
	}
	if protocol == "TCP" && r.IntN(2) == 0 {
		listener += fmt.Sprintf(", rateLimit: {requests: %d, interval: %dms, burst: %d}", 1+r.IntN(1000), 50+r.IntN(10000), 1+r.IntN(5000))
	}
	listener += "}"
	algo := pick("RoundRobin", "LeastRequest", "BackendUtilization", "RingHash")
	lb := "algorithm: " + algo
	switch algo {
	case "LeastRequest":
		lb += fmt.Sprintf(", leastRequest: {activeRequestBias: \"%d.%d\"}", r.IntN(3), r.IntN(10))
	case "BackendUtilization":
		lb += fmt.Sprintf(", backendUtilization: {blackoutPeriod: %ds, weightUpdatePeriod: %dms, weightExpirationPeriod: %dm, errorUtilizationPenalty: \"%d.5\"}",
			r.IntN(60), 100+r.IntN(5000), 1+r.IntN(10), r.IntN(3))
	}
	if r.IntN(2) == 0 {
		lb += ", zoneFailover: [zone-a, zone-b]"
	}
	var extras []string
	if r.IntN(2) == 0 {
		extras = append(extras, "proxyProtocol: {version: "+pick("V1", "V2")+"}")
	}
	if r.IntN(2) == 0 {
		extras = append(extras, "perEndpointStats: true")
	}
	if r.IntN(2) == 0 {
		tls := "tls: {sni: backend.internal, caFile: ca.crt"
		if r.IntN(2) == 0 {
			tls += ", clientCertificate: {certificateFile: client.crt, privateKeyFile: client.key}"
		}
		extras = append(extras, tls+"}")
	}
	if protocol == "HTTP" && r.IntN(2) == 0 {
		extras = append(extras, fmt.Sprintf("connection: {protocol: %s, maxConnectionDuration: %ds}", pick("HTTP1", "HTTP2"), 1+r.IntN(3600)))
	}
	if r.IntN(2) == 0 {
		extras = append(extras, fmt.Sprintf("healthCheck: {passive: {consecutive5xx: %d, baseEjectionTime: 10s, maxEjectionTime: %ds, alwaysEjectOneEndpoint: %s}}",
			1+r.IntN(10), 10+r.IntN(600), pick("true", "false")))
	}
	routes := ""
	if protocol == "HTTP" {
		routes = fmt.Sprintf(`
  routes:
    - backends: [{name: one}]
      rateLimit: {requests: %d, interval: %ds}
      mirrors: [{backend: two, percent: %d}]
      retry: {attempts: %d, avoidPreviousPriorities: %s}
      sessionPersistence: {type: Cookie}
    - match: {path: {value: /two}}
      backends: [{name: two}]`, 1+r.IntN(1000), 1+r.IntN(60), r.IntN(101), 1+r.IntN(3), pick("true", "false"))
	}
	backend := func(name string, port int) string {
		b := fmt.Sprintf("    - name: %s\n      loadBalancing: {%s}\n", name, lb)
		for _, e := range extras {
			b += "      " + e + "\n"
		}
		return b + fmt.Sprintf("      endpoints: [{address: 10.0.0.%d, port: %d, zone: zone-a}, {address: 10.0.1.%d, port: %d, zone: zone-b}]\n",
			1+r.IntN(250), port, 1+r.IntN(250), port)
	}
	return fmt.Sprintf(`apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: traffic-%d}
spec:
  listener: %s%s
  backends:
%s%s`, i, listener, routes, backend("one", 80), backend("two", 81))
}

// TestRandomTrafficPoliciesAreAcceptedByEnvoy: random combinations of the traffic features that validation
// accepts are accepted by the real Envoy too.
func TestRandomTrafficPoliciesAreAcceptedByEnvoy(t *testing.T) {
	envoy := tools.Require(t, "envoy")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(tools.RepoRoot(), "examples", "certs", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	files := translate.Files{"ca.crt": {Data: read("ca.crt")}, "client.crt": {Data: read("client.crt")}, "client.key": {Data: read("client.key")}}
	for seed := uint64(1); seed <= 3; seed++ {
		r := rand.New(rand.NewPCG(seed, 5))
		var docs []string
		for i := 0; i < 30; i++ {
			docs = append(docs, randomTrafficPolicy(r, i))
		}
		parsed, err := manifest.Decode("random", strings.NewReader(strings.Join(docs, "---\n")))
		if err != nil {
			t.Fatal(err)
		}
		res := translate.Translate(manifest.Policies(parsed), translate.Refs{Files: files})
		for k, pr := range res.Policies.All() {
			if !pr.Accepted || !pr.ResolvedRefs {
				t.Errorf("seed %d: generated policy %s was not accepted: %s %s", seed, k, pr.AcceptedMessage, pr.ResolvedRefsMessage)
			}
		}
		for name, g := range res.IR.Groups {
			out, err := xdsbuild.Build(g)
			if err != nil {
				t.Fatal(err)
			}
			if err := envoyvalidate.Check(context.Background(), envoy, out); err != nil {
				t.Errorf("seed %d group %s: %v", seed, name, err)
			}
		}
	}
}
