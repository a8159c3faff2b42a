package lbctl_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/internal/envoyvalidate"
	"github.com/lbplane/lbplane/internal/tools"
)

// TestBootstrapDNSResolvers: --dns-resolver puts c-ares with exactly those servers in the bootstrap, which
// Envoy accepts, and a value that is not an IP address is refused.
func TestBootstrapDNSResolvers(t *testing.T) {
	envoy := tools.Require(t, "envoy")
	code, out, errs := run(t, "", "bootstrap", "--node-id", "e1", "--xds-insecure", "--dns-resolver", "127.0.0.1:5353", "--dns-resolver", "::1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"envoy.network.dns_resolver.cares", `{address: "127.0.0.1", port_value: 5353, protocol: UDP}`, `{address: "::1", port_value: 53, protocol: UDP}`} {
		if !strings.Contains(out, want) {
			t.Errorf("bootstrap lacks %q", want)
		}
	}
	if err := envoyAccepts(t, envoy, out); err != nil {
		t.Error(err)
	}
	if code, _, errs := run(t, "", "bootstrap", "--node-id", "e1", "--xds-insecure", "--dns-resolver", "dns.example.com"); code == 0 || !strings.Contains(errs, "--dns-resolver") {
		t.Errorf("a resolver that is a name: exit %d %s", code, errs)
	}
	if code, out, _ := run(t, "", "bootstrap", "--node-id", "e1", "--xds-insecure"); code != 0 || strings.Contains(out, "typed_dns_resolver_config") {
		t.Errorf("without --dns-resolver: exit %d, resolver config present: %v", code, strings.Contains(out, "typed_dns_resolver_config"))
	}
}

// envoyAccepts writes the bootstrap to a file and returns why the envoy binary refuses it, if it does.
func envoyAccepts(t *testing.T, envoy, bootstrap string) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "b.yaml")
	if err := os.WriteFile(path, []byte(bootstrap), 0o600); err != nil {
		t.Fatal(err)
	}
	return envoyvalidate.CheckBootstrap(context.Background(), envoy, path)
}
