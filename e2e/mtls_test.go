package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/tools"
)

// testPKI writes a CA and certificates signed by it into dir.
type testPKI struct {
	dir  string
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64
}

func newPKI(t *testing.T, dir, name string) *testPKI {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &testPKI{dir: dir, ca: ca, key: key, next: 2}
	writePEM(t, filepath.Join(dir, name+".crt"), "CERTIFICATE", der)
	return p
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue writes name.crt and name.key; cn and ous make the subject, dns the SANs.
func (p *testPKI) issue(t *testing.T, name, cn string, ous, dns []string, usage x509.ExtKeyUsage) (certPath, keyPath string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p.next++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(p.next), Subject: pkix.Name{CommonName: cn, OrganizationalUnit: ous}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certPath, keyPath = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	writePEM(t, certPath, "CERTIFICATE", der)
	writePEM(t, keyPath, "EC PRIVATE KEY", kder)
	return certPath, keyPath
}

func TestXDSOverMTLSBindsNodesToCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pki := newPKI(t, dir, "ca")
	other := newPKI(t, dir, "other-ca")
	srvCert, srvKey := pki.issue(t, "lbplane", "lbplane", nil, []string{"lbplane.test"}, x509.ExtKeyUsageServerAuth)
	envoyCert, envoyKey := pki.issue(t, "envoy-1", "envoy-1", []string{"default"}, nil, x509.ExtKeyUsageClientAuth)
	strangerCert, strangerKey := other.issue(t, "stranger", "envoy-1", []string{"default"}, nil, x509.ExtKeyUsageClientAuth)
	caPath := filepath.Join(dir, "ca.crt")

	l := startLbplane(t, "--xds-tls-cert", srvCert, "--xds-tls-key", srvKey, "--xds-tls-client-ca", caPath)
	bs := startBackends(t, "m1")
	port := reservePort(t)
	// The real Envoy, over mTLS.
	b, err := envoybootstrap.Render(envoybootstrap.Params{NodeID: "envoy-1", XDS: l.XDSAddr, Delta: true, AdminSocket: adminSocketPath(t),
		TLS: &envoybootstrap.TLS{Cert: envoyCert, Key: envoyKey, CA: caPath, ServerName: "lbplane.test"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "envoy.yaml")
	os.WriteFile(cfg, b, 0o600)
	startProcess(t, "envoy-mtls.log", tools.Require(t, "envoy"), "-c", cfg, "--use-dynamic-base-id", "--concurrency", "1", "-l", "warn")
	push(t, l, policy(t, roundRobin, map[string]any{"Port": port, "B": bs}))
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", port), "m1")
	waitSynced(t, l, 1)

	pool := x509.NewCertPool()
	pool.AddCert(pki.ca)
	// ask opens an ADS stream with the given client certificate and node, and returns the first error.
	ask := func(certPath, keyPath string, maxVersion uint16, node *corev3.Node) error {
		tc := &tls.Config{RootCAs: pool, ServerName: "lbplane.test", MaxVersion: maxVersion}
		if certPath != "" {
			c, err := tls.LoadX509KeyPair(certPath, keyPath)
			if err != nil {
				return err
			}
			tc.Certificates = []tls.Certificate{c}
		}
		conn, err := grpc.NewClient(l.XDSAddr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType}); err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	if err := ask(envoyCert, envoyKey, 0, &corev3.Node{Id: "envoy-1", Cluster: "default"}); err != nil {
		t.Fatalf("the rightful node was refused: %v", err)
	}
	for _, tc := range []struct {
		name      string
		cert, key string
		max       uint16
		node      *corev3.Node
		want      string
	}{
		{"no client certificate", "", "", 0, &corev3.Node{Id: "envoy-1"}, ""},
		{"a certificate from another CA", strangerCert, strangerKey, 0, &corev3.Node{Id: "envoy-1"}, ""},
		{"TLS 1.2", envoyCert, envoyKey, tls.VersionTLS12, &corev3.Node{Id: "envoy-1"}, ""},
		{"another node id", envoyCert, envoyKey, 0, &corev3.Node{Id: "envoy-2", Cluster: "default"}, "does not match the client certificate"},
		{"another proxy group", envoyCert, envoyKey, 0, &corev3.Node{Id: "envoy-1", Cluster: "edge"}, `may not join proxy group "edge"`},
		{"no node at all", envoyCert, envoyKey, 0, nil, "PermissionDenied"},
	} {
		err := ask(tc.cert, tc.key, tc.max, tc.node)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want refused (%q)", tc.name, err, tc.want)
		} else {
			t.Logf("%s: refused: %.160s", tc.name, err)
		}
	}
}
