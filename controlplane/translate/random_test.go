package translate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/internal/envoyvalidate"
	"github.com/lbplane/lbplane/internal/tools"
)

// randomPolicy returns a random policy that combines features, from a seeded generator so that a failure
// can be replayed.
func randomPolicy(r *rand.Rand, i int) string {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	algo := pick("RoundRobin", "LeastRequest", "Random", "RingHash", "Maglev")
	var lb []string
	lb = append(lb, "algorithm: "+algo)
	switch algo {
	case "RingHash", "Maglev":
		lb = append(lb, "hashKeys: ["+pick("{sourceIP: {}}", "{header: {name: x-user}, terminal: true}, {sourceIP: {}}",
			"{cookie: {name: c, generate: {ttl: 30m, secure: true, sameSite: None}}}", "{queryParameter: {name: q}}")+"]")
	case "RoundRobin", "LeastRequest":
		if r.IntN(2) == 0 {
			lb = append(lb, fmt.Sprintf("slowStart: {window: %ds, aggression: \"%d.5\", minWeightPercent: %d}", 1+r.IntN(120), r.IntN(3), r.IntN(100)))
		}
	}
	zones := [2]string{}
	if r.IntN(2) == 0 {
		zones = [2]string{pick("zone-a", "zone-b"), pick("zone-a", "zone-c")}
		lb = append(lb, "zoneFailover: ["+pick("zone-a", "zone-a, zone-b", "zone-c, zone-a", "zone-x")+"]")
	} else if r.IntN(2) == 0 {
		// Zone-aware routing (not for the hashes) or zone weights, over endpoints that all have a listed zone.
		zones = [2]string{"zone-a", "zone-b"}
		if algo != "RingHash" && algo != "Maglev" && r.IntN(2) == 0 {
			lb = append(lb, fmt.Sprintf("zoneAware: {minEndpoints: %d}", 1+r.IntN(3)))
		} else {
			lb = append(lb, fmt.Sprintf("zoneWeights: [{zone: zone-a, weight: %d}, {zone: zone-b, weight: %d}]", 1+r.IntN(100), 1+r.IntN(100)))
		}
	}
	var extras []string
	http2 := r.IntN(2) == 0
	if r.IntN(2) == 0 {
		checks := []string{"{type: HTTP, http: {path: /h, expectedStatuses: [{start: 200, end: 204}], expectedBody: ok}}",
			"{type: TCP, port: 9000, tcp: {send: PING, receive: PONG}}"}
		if http2 {
			checks = append(checks, "{type: GRPC, grpc: {serviceName: svc}}")
		}
		extras = append(extras, fmt.Sprintf("healthCheck: {panicThreshold: %d, active: %s, passive: {consecutive5xx: %d, successRate: {stdevFactor: \"1.%d\"}}}",
			r.IntN(101), pick(checks...), 1+r.IntN(10), r.IntN(10)))
	}
	if r.IntN(2) == 0 {
		extras = append(extras, fmt.Sprintf("circuitBreakers: {maxConnections: %d, maxConnectionsPerEndpoint: %d, retryBudget: {percent: %d}}", 1+r.IntN(1000), 1+r.IntN(50), r.IntN(101)))
	}
	if http2 || r.IntN(2) == 0 {
		proto := "HTTP1"
		if http2 {
			proto = "HTTP2"
		}
		extras = append(extras, fmt.Sprintf("connection: {protocol: %s, maxRequestsPerConnection: %d, tcpKeepalive: {time: %ds}, bufferBytes: %d}",
			proto, 1+r.IntN(1000), 1+r.IntN(600), 1024+r.IntN(1<<20)))
	}
	if r.IntN(3) == 0 {
		extras = append(extras, "tls: {sni: backend.internal, caFile: ca.crt}")
	}
	protocol := pick("HTTP", "HTTPS", "TCP")
	listener := fmt.Sprintf("{port: %d, protocol: %s", 8000+i, protocol)
	if protocol == "HTTPS" {
		listener += ", hostnames: [a.example.com, b.example.com], tls: {minVersion: " + pick("TLSv1.2", "TLSv1.3") +
			", certificates: [{certificateFile: a.crt, privateKeyFile: a.key, hostnames: [a.example.com]}, {certificateFile: b.crt, privateKeyFile: b.key}]}"
	}
	if r.IntN(2) == 0 {
		lim := fmt.Sprintf("maxConnections: %d, connectionBufferBytes: %d", 1+r.IntN(100000), 1024+r.IntN(1<<20))
		if protocol != "TCP" {
			lim += fmt.Sprintf(", maxRequestHeadersKB: %d, maxHeadersCount: %d", 1+r.IntN(8192), 1+r.IntN(10000))
		}
		listener += ", limits: {" + lim + "}"
	}
	if protocol != "TCP" && r.IntN(2) == 0 {
		listener += fmt.Sprintf(", timeouts: {requestHeaders: %dms, streamIdle: %ds, connectionIdle: %dm}", 1+r.IntN(60000), 1+r.IntN(3600), 1+r.IntN(600))
		listener += fmt.Sprintf(", http2: {enabled: %s, maxConcurrentStreams: %d, initialStreamWindowSize: %d, initialConnectionWindowSize: %d}",
			pick("true", "false"), 1+r.IntN(1000), 65535+r.IntN(1<<24), 65535+r.IntN(1<<26))
		listener += fmt.Sprintf(", requests: {headersWithUnderscores: %s, normalizePath: %s, mergeSlashes: %s, escapedSlashes: %s}",
			pick("Reject", "Drop", "Allow"), pick("true", "false"), pick("true", "false"), pick("Keep", "Reject", "UnescapeAndRedirect", "UnescapeAndForward"))
	}
	listener += "}"
	routes := ""
	if protocol != "TCP" && r.IntN(2) == 0 {
		// A rewrite of the path as the match allows it, of the host, or none.
		pathType := pick("Prefix", "SegmentPrefix", "Exact")
		rewrite := pick("", "{hostname: api.internal}", "{path: {type: ReplaceFullPath, value: /v2/api}}")
		if pathType != "Exact" && r.IntN(2) == 0 {
			rewrite = "{hostname: api.internal, path: {type: ReplacePrefixMatch, value: " + pick("/", "/v2", "/v2/") + "}}"
		}
		if rewrite != "" {
			rewrite = "\n      rewrite: " + rewrite
		}
		routes = fmt.Sprintf(`
  routes:
    - match: {path: {type: %s, value: /api}, headers: [{name: x-v, type: RegularExpression, value: "v[0-9]+"}]}
      backends: [{name: one, weight: %d}, {name: two, weight: %d}]
      retry: {conditions: [connect-failure, retriable-status-codes], statusCodes: [503], attempts: %d, perTryTimeout: 2s}
      sessionPersistence: {type: %s}
      idleTimeout: %ds%s
    - backends: [{name: two}]
      responseHeaders: {set: [{name: cache-control, value: no-store}], add: [{name: vary, value: x-v}], remove: [server]}`,
			pathType, 1+r.IntN(100), r.IntN(100), r.IntN(5), pick("Cookie", "Header"), r.IntN(3600), rewrite)
	}
	backend := func(name string, port int) string {
		b := fmt.Sprintf("    - name: %s\n      loadBalancing: {%s}\n", name, strings.Join(lb, ", "))
		for _, e := range extras {
			b += "      " + e + "\n"
		}
		return b + fmt.Sprintf("      endpoints: [{address: 10.0.0.%d, port: %d, weight: %d, zone: %q}, {address: 10.0.1.%d, port: %d, state: %s, zone: %q}]\n",
			1+r.IntN(250), port, 1+r.IntN(100), zones[0], 1+r.IntN(250), port, pick("Active", "Draining"), zones[1])
	}
	return fmt.Sprintf(`apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: random-%d}
spec:
  listener: %s%s
  backends:
%s%s`, i, listener, routes, backend("one", 80), backend("two", 81))
}

// TestRandomValidPoliciesAreAcceptedByEnvoy checks the fuzzing property against the real Envoy on a sample:
// random combinations of features that validation accepts must be accepted by Envoy too.
func TestRandomValidPoliciesAreAcceptedByEnvoy(t *testing.T) {
	envoy := tools.Require(t, "envoy")
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) { randomPoliciesAccepted(t, envoy, seed) })
	}
}

func randomPoliciesAccepted(t *testing.T, envoy string, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 2))
	var docs []string
	for i := 0; i < 40; i++ {
		docs = append(docs, randomPolicy(r, i))
	}
	parsed, err := manifest.Decode("random", strings.NewReader(strings.Join(docs, "---\n")))
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, d := range parsed {
		all = append(all, d.Source)
	}
	policies := manifest.Policies(parsed)
	res := translate.Translate(policies, translate.Refs{Files: fakeFiles(policies)})
	for k, pr := range res.Policies.All() {
		if !pr.Accepted || !pr.ResolvedRefs {
			t.Errorf("generated policy %s was not accepted: %s %s", k, pr.AcceptedMessage, pr.ResolvedRefsMessage)
		}
	}
	for name, g := range res.IR.Groups {
		out, err := xdsbuild.Build(g)
		if err != nil {
			t.Fatal(err)
		}
		if err := envoyvalidate.Check(context.Background(), envoy, out); err != nil {
			t.Errorf("group %s (%d policies): %v", name, len(all), err)
		}
	}
}
