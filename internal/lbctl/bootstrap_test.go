package lbctl_test

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/tools"
)

// lbctl bootstrap gets the node's certificate from the push API, writes it where Envoy watches it, and
// re-running it renews the files in place; the bootstrap is accepted by the real Envoy.
func TestBootstrapGetsAndRenewsTheNodeCertificate(t *testing.T) {
	envoy := tools.Require(t, "envoy")
	ca, _, err := pki.LoadOrCreateCA(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	api := &pushapi.Server{Token: "admin", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		IssueCert: func(node, group string) (*pki.Issued, error) { return ca.IssueClient(node, group, time.Hour) }}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "certs")
	args := []string{"--server", srv.URL, "--token", "admin", "bootstrap", "--node-id", "n1", "--proxy-group", "edge", "--out-dir", dir}

	code, out, errs := run(t, "", args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "path_config_source") || !strings.Contains(out, filepath.Join(dir, envoybootstrap.ClientSDSFile)) {
		t.Errorf("the bootstrap does not point Envoy at the SDS files:\n%s", out)
	}
	if err := envoyAccepts(t, envoy, out); err != nil {
		t.Errorf("Envoy refuses the bootstrap: %v", err)
	}
	for _, f := range []string{envoybootstrap.KeyFile, envoybootstrap.ClientSDSFile} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode().Perm())
		}
	}
	first, _ := os.ReadFile(filepath.Join(dir, envoybootstrap.CertFile))
	if code, _, errs := run(t, "", args...); code != 0 {
		t.Fatalf("renewal: exit %d: %s", code, errs)
	}
	second, _ := os.ReadFile(filepath.Join(dir, envoybootstrap.CertFile))
	if len(first) == 0 || string(first) == string(second) {
		t.Error("re-running did not renew the certificate")
	}

	// The wrong token gets nothing, and writes nothing.
	other := filepath.Join(t.TempDir(), "other")
	code, _, errs = run(t, "", "--server", srv.URL, "--token", "wrong", "bootstrap", "--node-id", "n1", "--out-dir", other)
	if code == 0 || !strings.Contains(errs, "wrong bearer token") {
		t.Errorf("a wrong token: exit %d %s", code, errs)
	}
	if _, err := os.Stat(other); err == nil {
		t.Error("a refused request wrote an output directory")
	}
}

// --xds-tls-dir points Envoy at credentials someone else keeps (the chart's mounted Secret) without asking
// lbplane for a certificate, and refuses to be mixed with the other sources.
func TestBootstrapXDSTLSDir(t *testing.T) {
	code, out, errs := run(t, "", "--server", "http://127.0.0.1:1", "bootstrap", "--node-id", "n1", "--xds-address", "lbplane.ns.svc:18000", "--xds-tls-dir", "/etc/envoy/tls")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{`path: "/etc/envoy/tls/xds-client.json"`, `watched_directory: {path: "/etc/envoy/tls"}`, `sni: "lbplane.ns.svc"`} {
		if !strings.Contains(out, want) {
			t.Errorf("bootstrap lacks %s", want)
		}
	}
	for _, extra := range [][]string{{"--xds-insecure"}, {"--out-dir", t.TempDir()}, {"--xds-tls-ca", "ca.crt"}} {
		if code, _, _ := run(t, "", append([]string{"bootstrap", "--node-id", "n1", "--xds-tls-dir", "/etc/envoy/tls"}, extra...)...); code == 0 {
			t.Errorf("--xds-tls-dir with %v was accepted", extra)
		}
	}
}
