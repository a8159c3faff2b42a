package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// ownCA tells whether lbplane runs its own CA (the default): not with --xds-insecure, nor with certificates
// from files.
func (l *Lbplane) ownCA() bool {
	return !slices.ContainsFunc(l.extraArg, func(a string) bool {
		return a == "--xds-insecure" || strings.HasPrefix(a, "--xds-tls-")
	})
}

// envoyTLS is what startEnvoy gives Envoy to reach lbplane: a certificate for nodeID in group, issued by
// lbplane through the push API as `lbctl bootstrap --out-dir` gets it, in a directory Envoy watches. Nil when
// lbplane serves xDS without its own CA.
func envoyTLS(t *testing.T, l *Lbplane, nodeID, group string) *envoybootstrap.TLS {
	t.Helper()
	if !l.ownCA() {
		return nil
	}
	dir := filepath.Join(t.TempDir(), "certs-"+nodeID)
	renewEnvoyCert(t, l, nodeID, group, dir)
	return &envoybootstrap.TLS{Dir: dir}
}

// renewEnvoyCert gets a fresh certificate for nodeID in group and writes it into dir, replacing what is
// there the way Envoy picks up without a restart.
func renewEnvoyCert(t *testing.T, l *Lbplane, nodeID, group, dir string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := l.Client.IssueCertificate(ctx, nodeID, group)
	if err != nil {
		t.Fatalf("a certificate for %s: %v", nodeID, err)
	}
	if err := envoybootstrap.WriteCredentials(dir, envoybootstrap.Credentials{Cert: []byte(c.Certificate), Key: []byte(c.PrivateKey), CA: []byte(c.CA)}); err != nil {
		t.Fatal(err)
	}
	return c.NotAfter
}
