package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLbctlLinksNoServer keeps lbctl a client: the push API server, its store (bbolt), the xDS server and
// the Prometheus client have no business in it, and each one grows the binary and its attack surface.
func TestLbctlLinksNoServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/lbplane/lbplane/controlplane/pushapi",
		"github.com/lbplane/lbplane/controlplane/store",
		"github.com/lbplane/lbplane/controlplane/engine",
		"github.com/lbplane/lbplane/controlplane/xdsserver",
		"github.com/lbplane/lbplane/controlplane/serve",
		"github.com/lbplane/lbplane/controlplane/metrics",
		"go.etcd.io/bbolt",
		"github.com/envoyproxy/go-control-plane/pkg/server/",
		"github.com/prometheus/client_golang",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages: %s", len(deps), out)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/") {
				t.Errorf("lbctl links %s", d)
			}
		}
	}
}
