package pki

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCAIsCreatedOnceAndIssuesBoundCertificates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	ca, created, err := LoadOrCreateCA(dir)
	if err != nil || !created {
		t.Fatalf("first start: created %v, %v", created, err)
	}
	for name, want := range map[string]os.FileMode{"": 0o700, CAKeyFile: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%q: mode %v (%v), want %v", name, fi.Mode().Perm(), err, want)
		}
	}
	again, created, err := LoadOrCreateCA(dir)
	if err != nil || created || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("second start must load the same CA: created %v, %v", created, err)
	}

	is, err := ca.IssueClient("envoy-1", "edge", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(is.CertPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("client certificate does not verify: %v", err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate must not pass as a server certificate")
	}
	if c.Subject.CommonName != "envoy-1" || len(c.Subject.OrganizationalUnit) != 1 || c.Subject.OrganizationalUnit[0] != "edge" ||
		len(c.URIs) != 1 || c.URIs[0].String() != "spiffe://lbplane/group/edge/node/envoy-1" || len(c.DNSNames)+len(c.IPAddresses) != 0 {
		t.Errorf("identity: CN %q OU %v URIs %v DNS %v IP %v", c.Subject.CommonName, c.Subject.OrganizationalUnit, c.URIs, c.DNSNames, c.IPAddresses)
	}
	if d := time.Until(c.NotAfter); d > time.Hour || d < 59*time.Minute {
		t.Errorf("validity: expires in %v, want 1h", d)
	}
	for _, bad := range [][2]string{{"", "g"}, {"n", ""}, {"a/b", "g"}, {"n", "g\nx"}} {
		if _, err := ca.IssueClient(bad[0], bad[1], 0); err == nil {
			t.Errorf("issued a certificate for node %q group %q", bad[0], bad[1])
		}
	}

	s, err := NewServingCert(ca, dir, []string{"localhost", "127.0.0.1", "lbplane.internal"})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := s.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"localhost", "127.0.0.1", "lbplane.internal"} {
		if err := sc.Leaf.VerifyHostname(name); err != nil {
			t.Errorf("serving certificate: %v", err)
		}
	}
	// Restarted with the same names, the certificate on disk is reused; with a new name, it is re-issued.
	s2, _ := NewServingCert(ca, dir, []string{"localhost", "127.0.0.1", "lbplane.internal"})
	if c2, _ := s2.GetCertificate(nil); !c2.Leaf.Equal(sc.Leaf) {
		t.Error("an unchanged serving certificate was re-issued")
	}
	s3, _ := NewServingCert(ca, dir, []string{"localhost", "other.internal"})
	if c3, _ := s3.GetCertificate(nil); c3.Leaf.VerifyHostname("other.internal") != nil {
		t.Error("a new name did not re-issue the serving certificate")
	}

	// Half a CA (a key without its certificate) is refused, never replaced.
	os.Remove(filepath.Join(dir, CACertFile))
	if _, _, err := LoadOrCreateCA(dir); err == nil {
		t.Error("a CA key without its certificate was accepted or overwritten")
	}
}
