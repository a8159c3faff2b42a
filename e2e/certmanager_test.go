package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// certManagerValues render the chart with cert-manager issuing the certificates.
var certManagerValues = []string{"--set", "mtls.certManager.issuerRef.name=ca-issuer", "--set", "mtls.certManager.issuerRef.kind=ClusterIssuer",
	"--set", "envoy.proxyGroup=edge"}

// cmCertificate is what a test issuer needs of a rendered cert-manager.io/v1 Certificate.
type cmCertificate struct {
	Metadata struct{ Name, Namespace string } `json:"metadata"`
	Spec     struct {
		SecretName string   `json:"secretName"`
		CommonName string   `json:"commonName"`
		DNSNames   []string `json:"dnsNames"`
		URIs       []string `json:"uris"`
		Subject    struct {
			OrganizationalUnits []string `json:"organizationalUnits"`
		} `json:"subject"`
		Usages   []string `json:"usages"`
		Duration string   `json:"duration"`
	} `json:"spec"`
	raw string
}

// chartCertificates are the Certificates in helm template's output, by name.
func chartCertificates(t *testing.T, out string) map[string]cmCertificate {
	t.Helper()
	certs := map[string]cmCertificate{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if yaml.Unmarshal([]byte(doc), &obj) != nil || obj.Kind != "Certificate" {
			continue
		}
		if obj.APIVersion != "cert-manager.io/v1" {
			t.Fatalf("Certificate of %s", obj.APIVersion)
		}
		var c cmCertificate
		// Not strict: the API server checks the whole object against cert-manager's CRD
		// (TestHelmChartCertManager); this is only what the test issuer reads.
		if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
			t.Fatal(err)
		}
		c.raw = doc
		certs[c.Metadata.Name] = c
	}
	return certs
}

// testIssuer signs Certificates as a cert-manager CA issuer would: a CA of its own (not lbplane's pki), each
// Secret of type kubernetes.io/tls with tls.crt, tls.key and the CA as ca.crt.
type testIssuer struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	caPEM  []byte
	serial int64
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test cert-manager ClusterIssuer ca-issuer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testIssuer{cert: cert, key: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 100}
}

// issue makes the Secret cert-manager would write for c: exactly the names, URIs, OUs, usages and duration
// the Certificate asks for, so a Certificate that asks for the wrong identity yields a certificate lbplane
// or Envoy refuses.
func (is *testIssuer) issue(t *testing.T, c cmCertificate) *corev1.Secret {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	life, err := time.ParseDuration(c.Spec.Duration)
	if err != nil {
		t.Fatalf("Certificate %s duration: %v", c.Metadata.Name, err)
	}
	is.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(is.serial), NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(life),
		Subject: pkix.Name{CommonName: c.Spec.CommonName, OrganizationalUnit: c.Spec.Subject.OrganizationalUnits}, DNSNames: c.Spec.DNSNames}
	for _, u := range c.Spec.URIs {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, p)
	}
	for _, u := range c.Spec.Usages {
		switch u {
		case "digital signature":
			tmpl.KeyUsage |= x509.KeyUsageDigitalSignature
		case "key encipherment":
			tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
		case "server auth":
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		case "client auth":
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
		default:
			t.Fatalf("Certificate %s: usage %q", c.Metadata.Name, u)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, is.cert, &key.PublicKey, is.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: c.Spec.SecretName, Namespace: c.Metadata.Namespace,
			Annotations: map[string]string{"cert-manager.io/certificate-name": c.Metadata.Name}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{
			"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
			"ca.crt":  is.caPEM,
		},
	}
}

// certManagerEnvoyVolume lays out the Envoy pod's projected tls volume as the kubelet would: the issued
// Secret's PEM files and the ConfigMap's SDS files (their /etc/envoy/tls paths pointed at the directory).
// It returns the directory, and a function that swaps a renewed Secret in.
func certManagerEnvoyVolume(t *testing.T, configMap map[string]string, s *corev1.Secret) (string, func(*corev1.Secret)) {
	t.Helper()
	dir := t.TempDir()
	contents := func(s *corev1.Secret) *corev1.Secret {
		data := map[string][]byte{}
		for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
			data[k] = s.Data[k]
		}
		for _, k := range []string{"xds-client.json", "xds-ca.json"} {
			if configMap[k] == "" {
				t.Fatalf("the Envoy ConfigMap has no %s", k)
			}
			data[k] = []byte(strings.ReplaceAll(configMap[k], "/etc/envoy/tls", dir))
		}
		return &corev1.Secret{Data: data}
	}
	first := contents(s)
	updateSecretVolume(t, dir, first)
	for k := range first.Data {
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, func(s *corev1.Secret) { updateSecretVolume(t, dir, contents(s)) }
}
