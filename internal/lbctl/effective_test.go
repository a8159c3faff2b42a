package lbctl_test

import (
	"strings"
	"testing"
)

// A policy pushed without an algorithm or a proxy group shows the ones it is served with, as the server
// publishes them in status (status.algorithm, status.proxyGroup): lbctl applies no default of its own.
func TestGetShowsTheEffectiveAlgorithmAndGroup(t *testing.T) {
	url := apiServer(t)
	const doc = `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: plain, namespace: default}
spec:
  listener: {port: 10095, protocol: HTTP}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: 18081}]
`
	if code, out, errs := run(t, doc, "--server", url, "--token", "admin", "push-config", "-f", "-"); code != 0 {
		t.Fatalf("push-config: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := run(t, "", "--server", url, "--token", "admin", "get", "plain", "-o",
		"jsonpath={.status.algorithm} {.status.proxyGroup}")
	if code != 0 || out != "RoundRobin default" {
		t.Errorf("get -o jsonpath: exit %d, %q, want \"RoundRobin default\"\n%s", code, out, errs)
	}
	code, out, errs = run(t, "", "--server", url, "--token", "admin", "get", "-o", "wide")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[1], "RoundRobin") || !strings.Contains(lines[1], " default ") {
		t.Errorf("get -o wide: exit %d, want plain with RoundRobin in group default:\n%s%s", code, out, errs)
	}
}
