package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/internal/kubetest"
)

// conditionOf reads a policy's condition as "status reason: message".
func conditionOf(t *testing.T, kubeconfig, ns, name, typ string) string {
	t.Helper()
	q := fmt.Sprintf(`{.status.conditions[?(@.type==%q)]`, typ)
	out, err := kubectl(t, kubeconfig, "", "get", "lbp", name, "-n", ns, "-o", "jsonpath="+q+".status} "+q+".reason}: "+q+".message}")
	if err != nil {
		return fmt.Sprintf("kubectl: %v %s", err, out)
	}
	return out
}

// waitCondition waits until a policy's condition starts with want ("False NotServed") and its message holds
// every part.
func waitCondition(t *testing.T, kubeconfig, ns, name, typ, want string, parts ...string) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%s/%s is %s %s", ns, name, typ, want), func() error {
		got := conditionOf(t, kubeconfig, ns, name, typ)
		if !strings.HasPrefix(got, want+":") {
			return fmt.Errorf("%s", got)
		}
		for _, p := range parts {
			if !strings.Contains(got, p) {
				return fmt.Errorf("%s (no %q)", got, p)
			}
		}
		return nil
	})
}

// TestProgrammedMeansServedKube is issue 49's sixth finding against a real kube-apiserver and Envoy: a policy
// whose TLS Secret is missing showed Programmed=True while its port refused connections, and right after
// kubectl wait --for=condition=Programmed a request got 503 "no healthy upstream" because the backends'
// first health checks were pending. Now such a policy is Programmed=False (NotServed) until the Secret exists,
// and Ready, the condition the README waits for, is True only once every Envoy has an endpoint of each
// backend that takes traffic: the request sent right after kubectl wait --for=condition=Ready is answered
// by the backend.
func TestProgrammedMeansServedKube(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	kc := cluster.Kubeconfig
	web := startBackend(t, "web", 0)
	web.SetHealth(http.StatusServiceUnavailable) // starting: its health endpoint says not yet
	tlsPort, httpPort := reservePort(t), reservePort(t)
	l := startLbplane(t, "--kubernetes", "--kubeconfig", kc, "--address-backends-namespaces", "*")
	startEnvoy(t, l, "envoy-ready", true)
	kubeApply(t, kc, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: secure, namespace: default}
spec:
  listener:
    address: 127.0.0.1
    port: {{.TLSPort}}
    protocol: HTTPS
    hostnames: [app.example.com]
    tls: {certificates: [{secretName: app-tls}]}
  backends:
    - name: web
      endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: checked, namespace: default}
spec:
  listener: {address: 127.0.0.1, port: {{.HTTPPort}}, protocol: HTTP}
  backends:
    - name: web
      healthCheck:
        active: {type: HTTP, interval: 1s, unhealthyThreshold: 1, healthyThreshold: 1, http: {path: /healthz}}
      endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]
`, map[string]any{"TLSPort": tlsPort, "HTTPPort": httpPort, "Backend": web.Port})

	t.Run("a policy whose Secret is missing is not Programmed", func(t *testing.T) {
		waitCondition(t, kc, "default", "secure", "ResolvedRefs", "False InvalidReference", "app-tls")
		waitCondition(t, kc, "default", "secure", "Programmed", "False NotServed", "no Envoy serves the policy", "app-tls")
		waitCondition(t, kc, "default", "secure", "Ready", "False NotProgrammed")
		// The other policy, served by the same Envoy, is Programmed: the condition is per policy.
		waitCondition(t, kc, "default", "checked", "Programmed", "True Programmed")
		if _, err := httpsClient(t, tlsPort).Get("https://app.example.com/"); err == nil {
			t.Fatal("the policy's port answers while its Secret is missing")
		}
		if out, err := kubectl(t, kc, "", "create", "secret", "tls", "app-tls", "--cert", certs("app.example.com.crt"), "--key", certs("app.example.com.key")); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		waitCondition(t, kc, "default", "secure", "Programmed", "True Programmed")
	})

	t.Run("Ready waits for an endpoint that takes traffic", func(t *testing.T) {
		// Programmed (the Envoy runs the config) while the only endpoint fails its health checks: not Ready.
		waitCondition(t, kc, "default", "checked", "Ready", "False NoHealthyEndpoints", "backend web has no endpoint that takes traffic on Envoy envoy-ready")
		if out, err := kubectl(t, kc, "", "get", "lbp", "checked", "-o", "jsonpath={.status.conditions[?(@.type==\"Programmed\")].status}"); err != nil || out != "True" {
			t.Fatalf("Programmed while the backend is not healthy: %q %v", out, err)
		}
		web.SetHealth(http.StatusOK)
		// As the README waits: once kubectl wait returns, the very next request is answered by the backend.
		if out, err := kubectl(t, kc, "", "wait", "lbp/checked", "lbp/secure", "--for=condition=Ready", "--timeout=60s"); err != nil {
			t.Fatalf("kubectl wait --for=condition=Ready: %v %s", err, out)
		}
		if b, err := requestVia(newClient(false), fmt.Sprintf("http://127.0.0.1:%d/", httpPort), nil); err != nil || b != "web" {
			t.Errorf("right after Ready: answered by %q: %v", b, err)
		}
		resp, err := httpsClient(t, tlsPort).Get("https://app.example.com/")
		if err != nil {
			t.Fatalf("https right after Ready: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != "web" {
			t.Errorf("https right after Ready: status %d from %q", resp.StatusCode, resp.Header.Get("X-Backend"))
		}
		waitCondition(t, kc, "default", "checked", "Ready", "True Ready", `each of the 1 Envoys of group "default"`)
	})
}
