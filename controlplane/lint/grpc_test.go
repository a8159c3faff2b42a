package lint

import (
	"slices"
	"testing"
)

// Every field a gRPC client rejects or ignores is named, and a policy it takes whole has no finding.
func TestGRPC(t *testing.T) {
	lint := func(doc string) []string {
		t.Helper()
		var out []string
		for _, f := range GRPC(policyOf(t, doc)) {
			out = append(out, f.Rule+" "+f.Field)
		}
		return out
	}
	clean := `metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP, hostnames: [api.example]}
  routes: [{backends: [{name: app}], retry: {attempts: 2}, timeout: 3s}]
  backends: [{name: app, loadBalancing: {algorithm: RingHash, hashKeys: [{header: {name: x-user}}]}, healthCheck: {passive: {consecutive5xx: 3}}, ` + eps + `}]`
	if got := lint(clean); len(got) != 0 {
		t.Errorf("a policy gRPC takes whole: %v", got)
	}
	got := lint(`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP, hostnames: [api.example, "*.example"]}
  routes:
    - {backends: [{name: app}], retry: {conditions: [retriable-status-codes], attempts: 2, statusCodes: [503], perTryTimeout: 1s}, sessionPersistence: {}}
    - {match: {path: {value: /hash}}, backends: [{name: hash}], responseHeaders: {set: [{name: x-a, value: "1"}]}, rewrite: {hostname: b.example}}
  backends:
    - {name: app, tls: {sni: app.internal, insecureSkipVerify: true}, proxyProtocol: {version: V2}, loadBalancing: {slowStart: {window: 10s}}, healthCheck: {active: {type: TCP}}, ` + eps + `}
    - {name: hash, loadBalancing: {algorithm: RingHash, hashKeys: [{cookie: {name: sid}}]}, ` + eps + `}`)
	for _, want := range []string{
		"grpc-ignored spec.listener.hostnames[1]",
		"grpc-refused spec.backends[0].tls",
		"grpc-refused spec.backends[0].proxyProtocol",
		"grpc-ignored spec.backends[1].loadBalancing.hashKeys[0]",
		"grpc-ignored spec.backends[0].loadBalancing.slowStart",
		"grpc-ignored spec.backends[0].healthCheck.active",
		"grpc-ignored spec.routes[0].retry.statusCodes",
		"grpc-ignored spec.routes[0].retry.perTryTimeout",
		"grpc-ignored spec.routes[0].sessionPersistence",
		"grpc-ignored spec.routes[1].responseHeaders",
		"grpc-ignored spec.routes[1].rewrite",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q in %v", want, got)
		}
	}
	if got := lint(`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, ` + eps + `}]`); !slices.Equal(got, []string{"grpc-refused spec.listener.hostnames"}) {
		t.Errorf("no host names: %v", got)
	}
	if got := lint(`metadata: {name: p}
spec:
  listener: {port: 80, protocol: TCP}
  backends: [{name: app, ` + eps + `}]`); !slices.Equal(got, []string{"grpc-refused spec.listener.protocol"}) {
		t.Errorf("TCP: %v", got)
	}
}

func TestForClients(t *testing.T) {
	ws := []string{"retry-without-budget: spec.routes[0].retry: x", "grpc-refused: spec.backends[0].tls: y", "grpc-ignored: spec.listener.tls: z"}
	out, refused := ForClients(ws, false)
	if !slices.Equal(out, ws[:1]) || refused != nil {
		t.Errorf("without gRPC clients: %v %v", out, refused)
	}
	out, refused = ForClients(ws, true)
	if !slices.Equal(out, ws) || !slices.Equal(refused, []string{"spec.backends[0].tls: y"}) {
		t.Errorf("with gRPC clients: %v %v", out, refused)
	}
	plain := ws[:1]
	if out, _ := ForClients(plain, false); &out[0] != &plain[0] {
		t.Error("warnings without gRPC findings are copied")
	}
}
