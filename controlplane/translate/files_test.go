package translate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func exampleCert(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "certs", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCertificatePEMKeepsOnlyCertificates(t *testing.T) {
	cert, key, ca := exampleCert(t, "app.example.com.crt"), exampleCert(t, "app.example.com.key"), exampleCert(t, "ca.crt")
	combined := append(append(append([]byte("Bag Attributes: some text\n"), key...), cert...), ca...)
	got, err := CertificatePEM(combined)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(got, []byte("PRIVATE KEY")) || bytes.Contains(got, []byte("Bag Attributes")) {
		t.Errorf("the key or text leaked into the CA bundle:\n%s", got)
	}
	if n := bytes.Count(got, []byte("-----BEGIN CERTIFICATE-----")); n != 2 {
		t.Errorf("%d certificates kept, want 2", n)
	}
	if _, err := CertificatePEM(key); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a key alone: %v", err)
	}
	bad := []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	if _, err := CertificatePEM(bad); err == nil {
		t.Error("a broken certificate was accepted")
	}
}

func TestCAFileWithAPrivateKeyIsRefused(t *testing.T) {
	cert, key, ca := exampleCert(t, "app.example.com.crt"), exampleCert(t, "app.example.com.key"), exampleCert(t, "ca.crt")
	files := Files{"combined.pem": {Data: append(append(cert, key...), ca...)}, "ca.crt": {Data: ca}}
	const field = "spec.backends[0].tls.caFile"
	if got, err := files.caBundle(field, "combined.pem"); err == nil || !strings.Contains(err.Error(), field+": holds a private key") || got != nil {
		t.Errorf("a CA file with a key: %q, %v; want it refused naming the field", got, err)
	}
	if got, err := files.caBundle(field, "ca.crt"); err != nil || !bytes.Contains(got, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("a plain CA file: %v", err)
	}
}

func TestFileErrorsNameTheField(t *testing.T) {
	ca := exampleCert(t, "ca.crt")
	p := &v1alpha1.LoadBalancerPolicy{}
	p.Name = "p"
	p.Spec.Listener = v1alpha1.Listener{Port: 8443, Protocol: v1alpha1.ProtocolHTTPS, Hostnames: []string{"app.example.com"},
		TLS: &v1alpha1.ListenerTLS{Certificates: []v1alpha1.Certificate{{CertificateFile: "/etc/shadow", PrivateKeyFile: "k"}}}}
	p.Spec.Backends = []v1alpha1.Backend{{Name: "b", BackendSettings: v1alpha1.BackendSettings{TLS: &v1alpha1.BackendTLS{SNI: "b.internal", CAFile: "ca"}},
		Endpoints: []v1alpha1.Endpoint{{Address: "127.0.0.1", Port: 1}}}}
	const refused = "not a readable regular file under the files roots"
	files := Files{"/etc/shadow": {Err: refused}, "k": {Data: exampleCert(t, "app.example.com.key")}, "ca": {Data: ca}}
	got := strings.Join(FileErrors(p, files), "\n")
	if want := "spec.listener.tls.certificates[0].certificateFile: " + refused; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	files["/etc/shadow"] = File{Data: exampleCert(t, "app.example.com.crt")}
	files["ca"] = File{Data: []byte("no pem here")}
	got = strings.Join(FileErrors(p, files), "\n")
	if want := "spec.backends[0].tls.caFile: no PEM certificate in it"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestCertificateFileWithAPrivateKeyIsRefused(t *testing.T) {
	cert, key := exampleCert(t, "app.example.com.crt"), exampleCert(t, "app.example.com.key")
	const field = "spec.listener.tls.certificates[0]"
	for name, data := range map[string][]byte{"key first": append(append([]byte{}, key...), cert...), "key last": append(append([]byte{}, cert...), key...)} {
		files := Files{"combined.pem": {Data: data}, "app.key": {Data: key}}
		c, k, err := files.keyPair(field, "combined.pem", "app.key")
		if err == nil || !strings.HasPrefix(err.Error(), field+".certificateFile: holds a private key") || c != nil || k != nil {
			t.Errorf("%s: a certificate file holding a key: %v; want it refused naming the field", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "combined.pem") {
			t.Errorf("%s: the error names the file: %v", name, err)
		}
	}
	files := Files{"app.crt": {Data: cert}, "app.key": {Data: key}}
	if c, _, err := files.keyPair(field, "app.crt", "app.key"); err != nil || bytes.Contains(c, []byte("PRIVATE KEY")) {
		t.Errorf("a plain certificate file: %v", err)
	}
}
