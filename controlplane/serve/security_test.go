package serve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// --api-tls-auto serves the push API with lbplane's own certificate, whether xDS uses lbplane's CA or is
// (explicitly) insecure, and the certificate carries the --xds-server-name names and verifies with the CA.
func TestAPITLSAutoUsesLbplanesCA(t *testing.T) {
	for _, insecure := range []bool{false, true} {
		cfg := &Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), DataDir: t.TempDir(), XDSAddress: "127.0.0.1:0",
			XDSInsecure: insecure, APITLSAuto: true, XDSServerNames: []string{"demo-lbplane-xds.lbplane.svc", "10.1.2.3"}}
		_, _, serving, ca, err := xdsSecurity(context.Background(), cfg)
		if err != nil || serving == nil || ca == nil {
			t.Fatalf("insecure=%v: serving %v, CA %v, %v", insecure, serving, ca, err)
		}
		tc, err := apiTLS(context.Background(), cfg, serving)
		if err != nil || tc == nil {
			t.Fatalf("insecure=%v: API TLS %v %v", insecure, tc, err)
		}
		cert, err := tc.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"demo-lbplane-xds.lbplane.svc", "10.1.2.3"} {
			if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: ca.Pool()}); err != nil {
				t.Errorf("insecure=%v: the API certificate for %s: %v", insecure, name, err)
			}
		}
	}
}

func TestSecurityFlagCombinationsRefused(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"group certificates without a CA Secret", Config{EnvoyCertSecrets: map[string]string{"edge": "edge-tls"}, Kubernetes: &rest.Config{}}, "--envoy-cert-secret"},
		{"group certificates with insecure xDS", Config{EnvoyCertSecrets: map[string]string{"edge": "edge-tls"}, CASecret: "ca", XDSInsecure: true, Kubernetes: &rest.Config{}}, "--envoy-cert-secret"},
		{"group certificates with a CA of files", Config{EnvoyCertSecrets: map[string]string{"edge": "edge-tls"}, CASecret: "ca",
			XDSTLS: &xdsserver.TLSFiles{Cert: "testdata/none.crt", Key: "k", ClientCA: "c"}, Kubernetes: &rest.Config{}}, "--envoy-cert-secret"},
		{"a CA Secret outside Kubernetes", Config{CASecret: "ca"}, "--ca-secret: needs --kubernetes"},
		{"a CA Secret without a namespace", Config{CASecret: "ca", Kubernetes: &rest.Config{}}, "--namespace"},
	} {
		cfg := tc.cfg
		cfg.Log, cfg.DataDir, cfg.XDSAddress = log, t.TempDir(), "127.0.0.1:0"
		if _, _, _, _, err := xdsSecurity(context.Background(), &cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	cfg := &Config{Log: log, APITLSAuto: true, APITLSCert: "a.crt", APITLSKey: "a.key"}
	if _, err := apiTLS(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "--api-tls-auto") {
		t.Errorf("--api-tls-auto with --api-tls-cert: %v", err)
	}
}
