package e2e

import (
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
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbplane/lbplane/internal/backend"
)

// clientPKI makes a CA and a client certificate it signed, as PEM.
func clientPKI(t *testing.T, cn string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn + " CA"}, NotBefore: now, NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, NotBefore: now, NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// writeAtomically replaces a file in one step, as certificate rotation tools do.
func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

const upstreamMTLSPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: mtls}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: secure
      tls:
        sni: backend.internal
        caFile: {{.CA}}
        clientCertificate: {certificateFile: {{.Cert}}, privateKeyFile: {{.Key}}}
      # A handshake per request, so that a rotated certificate shows on the next request (Envoy keeps
      # connections made with the old one).
      connection: {maxRequestsPerConnection: 1}
      endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: no-client-cert}
spec:
  listener: {address: 127.0.0.1, port: {{.PlainPort}}, protocol: HTTP}
  backends:
    - name: secure
      tls: {sni: backend.internal, caFile: {{.CA}}}
      endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]
`

// TestUpstreamMTLSPresentsTheClientCertificate: a backend that requires a client certificate answers
// through a policy that gives Envoy one, refuses the same backend reached without one, and refuses again once
// the certificate file is replaced by one its CA did not sign (lbplane re-reads the file and re-sends the
// secret).
func TestUpstreamMTLSPresentsTheClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clientCA, cert, key := clientPKI(t, "envoy")
	for name, data := range map[string][]byte{"client-ca.crt": clientCA, "client.crt": cert, "client.key": key} {
		writeAtomically(t, filepath.Join(dir, name), data)
	}
	cfg, err := backend.ServerTLS(certs("backend.internal.crt"), certs("backend.internal.key"), filepath.Join(dir, "client-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	b := startBackendWith(t, "secure", backend.ServeOptions{TLS: cfg})
	// Without a client certificate the backend itself refuses: the check below measures Envoy's side.
	if c, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", b.Port), &tls.Config{ServerName: "backend.internal", InsecureSkipVerify: true}); err == nil {
		_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		if err == nil {
			_, err = c.Read(make([]byte, 1))
		}
		c.Close()
		if err == nil {
			t.Fatal("the backend answered a client without a certificate")
		}
	}

	l := startLbplane(t, "--files-root", certs(""), "--files-root", dir)
	e := startEnvoy(t, l, "envoy-mtls", true)
	port, plainPort := reservePort(t), reservePort(t)
	push(t, l, policy(t, upstreamMTLSPolicy, map[string]any{"Port": port, "PlainPort": plainPort, "CA": certs("ca.crt"),
		"Cert": filepath.Join(dir, "client.crt"), "Key": filepath.Join(dir, "client.key"), "Backend": b.Port}))
	url, plainURL := fmt.Sprintf("http://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d", plainPort)
	waitServing(t, url, "secure")
	waitSynced(t, l, 1)
	c := newClient(false)
	for i := 0; i < 20; i++ {
		if _, err := requestVia(c, url, nil); err != nil {
			t.Fatalf("request %d with the client certificate: %v", i, err)
		}
	}
	for i := 0; i < 5; i++ {
		if _, code, err := doWith(c, plainURL, nil); err != nil || code != 503 {
			t.Fatalf("request %d without a client certificate: status %d, error %v; want 503", i, code, err)
		}
	}
	// The key goes only to the proxy group whose policy names it: an Envoy of another group never gets it.
	other := startEnvoyWith(t, l, "envoy-other", "other", true, envoyTLS(t, l, "envoy-other", "other"))
	waitSynced(t, l, 2)
	if !strings.Contains(e.ConfigDump(t), "client-certificate") {
		t.Errorf("the policy's Envoy has no client-certificate secret")
	}
	if d := other.ConfigDump(t); strings.Contains(d, "client-certificate") || strings.Contains(d, "PRIVATE KEY") {
		t.Errorf("an Envoy of another proxy group got the client certificate")
	}

	// A certificate from another CA: the backend refuses it.
	_, otherCert, otherKey := clientPKI(t, "intruder")
	writeAtomically(t, filepath.Join(dir, "client.key"), otherKey)
	writeAtomically(t, filepath.Join(dir, "client.crt"), otherCert)
	eventually(t, 30*time.Second, "a certificate the backend's CA did not sign is refused", func() error {
		if _, code, err := doWith(c, url, nil); err != nil || code != 503 {
			return fmt.Errorf("status %d %v", code, err)
		}
		return nil
	})
	// And back.
	writeAtomically(t, filepath.Join(dir, "client.key"), key)
	writeAtomically(t, filepath.Join(dir, "client.crt"), cert)
	waitServing(t, url, "secure")
	if t.Failed() {
		t.Log(e.Clusters(t))
	}
}

// TestKubernetesUpstreamClientCertificateSecret: in Kubernetes mode the client certificate comes from a
// kubernetes.io/tls Secret; the backend that requires it answers, and replacing the Secret's certificate by
// one its CA did not sign makes it refuse, as Envoy gets the new Secret.
func TestKubernetesUpstreamClientCertificateSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clientCA, cert, key := clientPKI(t, "envoy")
	_, otherCert, otherKey := clientPKI(t, "intruder")
	for name, data := range map[string][]byte{"client-ca.crt": clientCA, "client.crt": cert, "client.key": key, "other.crt": otherCert, "other.key": otherKey} {
		writeAtomically(t, filepath.Join(dir, name), data)
	}
	cfg, err := backend.ServerTLS(certs("backend.internal.crt"), certs("backend.internal.key"), filepath.Join(dir, "client-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	b := startBackendWith(t, "secure", backend.ServeOptions{TLS: cfg})
	// The backend is an address (on loopback), which Kubernetes mode allows only to the namespaces an operator
	// names.
	k := startKubeEnvWith(t, []string{"--address-backends-namespaces", "default"})
	secret := func(certFile, keyFile string) {
		t.Helper()
		y, err := kubectl(t, k.cluster.Kubeconfig, "", "create", "secret", "tls", "envoy-client", "--cert", certFile, "--key", keyFile, "--dry-run=client", "-o", "yaml")
		if err != nil {
			t.Fatalf("%v %s", err, y)
		}
		if out, err := kubectl(t, k.cluster.Kubeconfig, y, "apply", "-f", "-"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	secret(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	// File references are refused in Kubernetes mode, so the backend's certificate is not verified here; the
	// file-based test verifies it.
	k.apply(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: mtls, namespace: default}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: secure
      tls: {insecureSkipVerify: true, clientCertificate: {secretName: envoy-client}}
      connection: {maxRequestsPerConnection: 1}
      endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]
`, map[string]any{"Port": k.port, "Backend": b.Port})
	waitServing(t, k.url, "secure")
	secret(filepath.Join(dir, "other.crt"), filepath.Join(dir, "other.key"))
	c := newClient(false)
	eventually(t, 30*time.Second, "the replaced Secret's certificate is refused by the backend", func() error {
		if _, code, err := doWith(c, k.url, nil); err != nil || code != 503 {
			return fmt.Errorf("status %d %v", code, err)
		}
		return nil
	})
	secret(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	waitServing(t, k.url, "secure")
}

// TestUpstreamAutoSNIFromEndpointHostname: with tls.autoSNI each endpoint gets its own hostname as SNI, and
// its certificate must carry that name: the endpoint named as in its certificate answers, the same server
// named otherwise is refused.
func TestUpstreamAutoSNIFromEndpointHostname(t *testing.T) {
	t.Parallel()
	cfg, err := backend.ServerTLS(certs("backend.internal.crt"), certs("backend.internal.key"), "")
	if err != nil {
		t.Fatal(err)
	}
	var sni atomic.Value
	cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) { sni.Store(h.ServerName); return nil, nil }
	b := startBackendWith(t, "secure", backend.ServeOptions{TLS: cfg})
	tmpl := `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: secure
      tls: {autoSNI: true, caFile: {{.CA}}}
      endpoints: [{address: 127.0.0.1, port: {{.Backend}}, hostname: {{.Hostname}}}]
`
	l := startLbplane(t, "--files-root", certs(""))
	startEnvoy(t, l, "envoy-autosni", true)
	good, bad := reservePort(t), reservePort(t)
	push(t, l, policy(t, tmpl, map[string]any{"Name": "good", "Port": good, "CA": certs("ca.crt"), "Backend": b.Port, "Hostname": "backend.internal"}))
	push(t, l, policy(t, tmpl, map[string]any{"Name": "bad", "Port": bad, "CA": certs("ca.crt"), "Backend": b.Port, "Hostname": "other.internal"}))
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", good), "secure")
	waitSynced(t, l, 1)
	if got, _ := sni.Load().(string); got != "backend.internal" {
		t.Errorf("the backend got SNI %q, want the endpoint's hostname backend.internal", got)
	}
	c := newClient(false)
	for i := 0; i < 5; i++ {
		if _, code, err := doWith(c, fmt.Sprintf("http://127.0.0.1:%d", bad), nil); err != nil || code != 503 {
			t.Fatalf("request %d to an endpoint named other.internal: status %d, error %v; want 503 (its certificate is for backend.internal)", i, code, err)
		}
	}
	if got, _ := sni.Load().(string); got != "other.internal" {
		t.Errorf("the backend got SNI %q, want other.internal", got)
	}
}
