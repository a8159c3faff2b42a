package xdsserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// externalCA is a CA that is not lbplane's (controlplane/pki is not used): what cert-manager's CA or Vault
// issuer signs with.
type externalCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newExternalCA(t *testing.T, name string) *externalCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &externalCA{cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs tmpl as a cert-manager Certificate would be (no common name unless asked, only the given SANs).
func (ca *externalCA) issue(t *testing.T, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, dir string, c tls.Certificate) (certPath, keyPath string) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	return certPath, keyPath
}

// The chart's cert-manager mode: lbplane serves with --xds-tls-cert/--xds-tls-key and verifies Envoys with
// the issuer's CA (--xds-tls-client-ca); the Envoys' group certificate comes from that issuer, not from
// lbplane's pki. It must pass the handshake and be read as the group identity (any node of that group),
// exactly as a group certificate lbplane issues itself; one from another CA must not get through.
func TestExternalCAGroupCertificate(t *testing.T) {
	ca := newExternalCA(t, "cert-manager test issuer")
	dir := t.TempDir()
	certPath, keyPath := writePEM(t, dir, ca.issue(t, &x509.Certificate{DNSNames: []string{"demo-lbplane-xds.lbplane.svc"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}))
	caPath := filepath.Join(dir, "ca.crt")
	os.WriteFile(caPath, ca.pem, 0o600)
	opt, err := TLSFiles{Cert: certPath, Key: keyPath, ClientCA: caPath}.ServerOption(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Every call reaches this handler, which answers with what identityOf read, or fails when it read none.
	srv := grpc.NewServer(opt, grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		id, ok := identityOf(stream.Context())
		if !ok {
			return status.Error(codes.Unauthenticated, "no client certificate")
		}
		if err := id.authorize("demo-lbplane-envoy-5d8f7-x2x9q", "edge"); err != nil {
			return err
		}
		if id.authorize("demo-lbplane-envoy-5d8f7-x2x9q", "other") == nil {
			return status.Error(codes.Internal, "the group certificate was let into another group")
		}
		return stream.SendMsg(&emptypb.Empty{})
	}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	call := func(client tls.Certificate) error {
		pool := x509.NewCertPool()
		pool.AddCert(ca.cert)
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: pool, ServerName: "demo-lbplane-xds.lbplane.svc", Certificates: []tls.Certificate{client}, MinVersion: tls.VersionTLS13})))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return conn.Invoke(ctx, "/test.T/M", &emptypb.Empty{}, &emptypb.Empty{})
	}
	// What the chart's Certificate for proxy group edge asks for: one URI SAN, OU edge, client auth, no CN.
	groupTmpl := func() *x509.Certificate {
		return &x509.Certificate{URIs: []*url.URL{{Scheme: "spiffe", Host: "lbplane", Path: "/group/edge"}},
			Subject: pkix.Name{OrganizationalUnit: []string{"edge"}}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	}
	if err := call(ca.issue(t, groupTmpl())); err != nil {
		t.Fatalf("a group certificate from the external CA: %v", err)
	}
	if err := call(newExternalCA(t, "another issuer").issue(t, groupTmpl())); status.Code(err) != codes.Unavailable {
		t.Fatalf("a group certificate from another CA: got %v, want the handshake refused", err)
	}
	// A server-auth-only certificate from the right CA is no client certificate.
	serverOnly := groupTmpl()
	serverOnly.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if err := call(ca.issue(t, serverOnly)); status.Code(err) != codes.Unavailable {
		t.Fatalf("a certificate without client auth: got %v, want the handshake refused", err)
	}
}
