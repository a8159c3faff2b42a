//go:build cluster

package cluster

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// envoyImageHasNoShell: the chart's Envoy runs from a distroless-style image (make cluster's
// lbplane.local/envoy: the Envoy binary and its libraries, nothing else). Its pods are Ready (their readiness
// probe is Envoy's own /ready, liveness and the preStop hook are envoy-sidecar's HTTP) and serve, and no
// shell or interpreter can be started in the Envoy container, while the Envoy binary itself can.
func (c *cluster) envoyImageHasNoShell(t *testing.T) {
	pods := c.envoyPods(t)
	for pod, ip := range pods {
		c.must(t, "", "-n", namespace, "wait", "--for=condition=Ready", "pod/"+pod, "--timeout=120s")
		image := c.must(t, "", "-n", namespace, "get", "pod", pod, "-o", `jsonpath={.spec.containers[?(@.name=="envoy")].image}`)
		if out := c.must(t, "", "-n", namespace, "exec", pod, "-c", "envoy", "--", "/usr/local/bin/envoy", "--version"); !strings.Contains(out, "1.40.0") {
			t.Fatalf("envoy --version in %s: %s", pod, out)
		}
		for _, shell := range []string{"/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash", "/bin/busybox", "/usr/bin/perl"} {
			out, err := c.run("", "-n", namespace, "exec", pod, "-c", "envoy", "--", shell, "-c", "true")
			if err == nil || !strings.Contains(out, "no such file or directory") {
				t.Errorf("%s in the Envoy container of %s (image %s): %v\n%s; want no such file", shell, pod, image, err, out)
			}
		}
		url := fmt.Sprintf("http://%s/", net.JoinHostPort(ip, "10080"))
		for i := 0; i < 10; i++ {
			if b, code, err := answer(url, "demo"); err != nil || code != 200 || !strings.HasPrefix(b, "demo-backend-") {
				t.Fatalf("the Envoy pod %s (image %s): answered %d by %q: %v", pod, image, code, b, err)
			}
		}
		t.Logf("the Envoy pod %s runs image %s, Ready and serving, without a shell", pod, image)
	}
}
