package e2e

// Attacks on lbplane's own keys through policy file references (issue 28, item 2): with the README's own
// relative layout, through a hard link placed in a files root, and by a certificateFile that carries a
// private key. Each must be refused with the field and one message that tells nothing about the file, and
// nothing of the key may reach Envoy.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/serve"
	"github.com/lbplane/lbplane/internal/kubetest"
	"github.com/lbplane/lbplane/internal/tools"
)

// startLbplaneIn starts lbplane in working directory dir with --data-dir ./data and the given flags, as the
// README does from a checkout.
func startLbplaneIn(t *testing.T, dir string, extra ...string) *Lbplane {
	t.Helper()
	l := &Lbplane{DataDir: filepath.Join(dir, "data"), workDir: dir, dataDirArg: "./data", extraArg: extra}
	if err := l.start(t, serve.Ports{XDS: "127.0.0.1:0", API: "127.0.0.1:0", Metrics: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	return l
}

// startInFilesRoot starts lbplane as getting started does, --data-dir ./data --files-root . from a directory
// that holds a certificate and key of a site's own (app.crt, app.key), and returns the directory.
func startInFilesRoot(t *testing.T) (string, *Lbplane) {
	t.Helper()
	dir := t.TempDir()
	copyFile(t, certs("app.example.com.crt"), filepath.Join(dir, "app.crt"))
	copyFile(t, certs("app.example.com.key"), filepath.Join(dir, "app.key"))
	return dir, startLbplaneIn(t, dir, "--files-root", ".")
}

// goodPolicyUnderTheRoot checks that a good HTTPS policy naming app.crt and ./app.key of the files root is
// accepted (dry run): the root does serve, and the refusals that follow are about what they name.
func goodPolicyUnderTheRoot(t *testing.T, l *Lbplane, port, backend int) {
	t.Helper()
	good := policy(t, attackHTTPS, map[string]any{"Name": "good", "Port": port, "Cert": "app.crt", "Key": "./app.key", "B": backend})
	if _, err := l.Client.Apply(context.Background(), good, true); err != nil {
		t.Fatalf("a good policy under the root: %v", err)
	}
}

// refusedAs pushes doc (dry run and not) and fails unless both are refused with exactly want.
func refusedAs(t *testing.T, l *Lbplane, what string, doc []byte, want string) {
	t.Helper()
	for _, dry := range []bool{true, false} {
		_, err := l.Client.Apply(context.Background(), doc, dry)
		var apiErr *pushapi.APIError
		if !errors.As(err, &apiErr) {
			t.Errorf("%s (dry run %v): %v; want a refusal", what, dry, err)
			continue
		}
		if apiErr.Status != http.StatusConflict || len(apiErr.Errors) != 1 || apiErr.Errors[0] != want {
			t.Errorf("%s (dry run %v): %d %q\nwant 409 %q", what, dry, apiErr.Status, apiErr.Errors, want)
		}
	}
}

// The README's layout: lbplane serve --data-dir ./data --files-root . from one directory. The CA key and
// the serving key were served over SDS by their relative names, because the data directory's exclusion was
// kept as the relative name "data" and never matched.
func TestAttackKeyFilesREADMELayout(t *testing.T) {
	t.Parallel()
	dir, l := startInFilesRoot(t)
	// The CA's certificate is public: a copy of it in the root is read, and makes its key the only refused
	// file of its pair. A certificate the CA issued is refused itself (its key is lbplane's), so the serving
	// key is paired with a certificate another CA made for its public key.
	copyFile(t, filepath.Join(l.DataDir, "pki", "ca.crt"), filepath.Join(dir, "ca.crt"))
	writeForgedCertificate(t, filepath.Join(l.DataDir, "pki", "xds.crt"), filepath.Join(dir, "xds.crt"))
	bs := startBackends(t, "k1")
	port := reservePort(t)

	goodPolicyUnderTheRoot(t, l, port, bs[0].Port)
	key0 := "default/attack: spec.listener.tls.certificates[0].privateKeyFile: " + notReadable
	for _, a := range []struct{ cert, key string }{
		{"ca.crt", "data/pki/ca.key"},
		{"ca.crt", "./data/pki/ca.key"},
		{"ca.crt", "data/../data/pki/ca.key"},
		{"ca.crt", filepath.Join(dir, "data", "pki", "ca.key")},
		{"xds.crt", "data/pki/xds.key"},
		{"xds.crt", filepath.Join(dir, "data", "pki", "xds.key")},
	} {
		doc := policy(t, attackHTTPS, map[string]any{"Name": "attack", "Port": port + 1, "Cert": a.cert, "Key": a.key, "B": bs[0].Port})
		refusedAs(t, l, a.key, doc, key0)
	}
	// A copy of the serving certificate, with its own key: refused at the certificate already.
	copyFile(t, filepath.Join(l.DataDir, "pki", "xds.crt"), filepath.Join(dir, "xds-copy.crt"))
	doc := policy(t, attackHTTPS, map[string]any{"Name": "attack", "Port": port + 1, "Cert": "xds-copy.crt", "Key": "data/pki/xds.key", "B": bs[0].Port})
	refusedAs(t, l, "the serving certificate and key", doc, "default/attack: spec.listener.tls.certificates[0].certificateFile: "+notReadable)
	// The tokens and the store, named as a CA bundle, say the same: nothing about what they hold.
	for _, f := range []string{"data/token", "data/token-readonly", "data/policies.db"} {
		doc := policy(t, attackCA, map[string]any{"Name": "attack", "Port": port + 2, "CA": f, "B": bs[0].Port})
		refusedAs(t, l, f, doc, "default/attack: spec.backends[0].tls.caFile: "+notReadable)
	}
	if ps, err := l.Client.List(context.Background()); err != nil || len(ps) != 0 {
		t.Errorf("policies stored after the refused pushes: %d, %v", len(ps), err)
	}
}

// A hard link to the CA key (or another key or token lbplane holds) placed inside a files root is the same
// file under an innocent name; it is refused by identity (device and inode). And a certificateFile that
// carries a private key is refused: the chain goes to Envoy as it is and shows in its /config_dump.
func TestAttackKeyFileHardLinkAndKeyInCertificate(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	copyFile(t, certs("app.example.com.crt"), filepath.Join(root, "app.crt"))
	copyFile(t, certs("app.example.com.key"), filepath.Join(root, "app.key"))
	var combined []byte
	for _, f := range []string{"app.example.com.crt", "app.example.com.key"} {
		b, err := os.ReadFile(certs(f))
		if err != nil {
			t.Fatal(err)
		}
		combined = append(combined, b...)
	}
	if err := os.WriteFile(filepath.Join(root, "bundle.pem"), combined, 0o600); err != nil {
		t.Fatal(err)
	}
	l := startLbplane(t, "--files-root", root)
	pki := filepath.Join(l.DataDir, "pki")
	copyFile(t, filepath.Join(pki, "ca.crt"), filepath.Join(root, "site.crt"))
	// The serving certificate is refused itself (lbplane's CA issued it): another CA's for its key stands in.
	writeForgedCertificate(t, filepath.Join(pki, "xds.crt"), filepath.Join(root, "edge.crt"))
	for from, to := range map[string]string{
		filepath.Join(pki, "ca.key"):               "site.key",
		filepath.Join(pki, "xds.key"):              "edge.key",
		filepath.Join(l.DataDir, "token-readonly"): "bundle-a.crt", // the admin token is a flag here
		filepath.Join(l.DataDir, "policies.db"):    "bundle-b.crt",
		filepath.Join(l.DataDir, serve.PortsFile):  "ports.crt", // not a secret: a control
		filepath.Join(root, "app.key"):             "app-link.key",
	} {
		if err := os.Link(from, filepath.Join(root, to)); err != nil {
			t.Fatalf("linking %s: %v (the files root and the data directory must be on one filesystem)", from, err)
		}
	}
	bs := startBackends(t, "h1")
	goodPort, attackPort := reservePort(t), reservePort(t)
	e := startEnvoy(t, l, "envoy-keys", true)
	// A good HTTPS policy through a hard link to a file of the root's own is served: links as such are fine.
	push(t, l, policy(t, attackHTTPS, map[string]any{"Name": "good", "Port": goodPort, "Cert": "app.crt", "Key": "app-link.key", "B": bs[0].Port}))
	eventually(t, 30*time.Second, "the good HTTPS policy serves", func() error {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", goodPort), &tls.Config{RootCAs: testCA(t), ServerName: "app.example.com"})
		if err != nil {
			return err
		}
		return conn.Close()
	})

	key0 := "default/attack: spec.listener.tls.certificates[0].privateKeyFile: " + notReadable
	refusedAs(t, l, "a hard link to the CA key", policy(t, attackHTTPS, map[string]any{"Name": "attack", "Port": attackPort, "Cert": "site.crt", "Key": "site.key", "B": bs[0].Port}), key0)
	refusedAs(t, l, "a hard link to the CA key, by its absolute name", policy(t, attackHTTPS, map[string]any{"Name": "attack", "Port": attackPort, "Cert": "site.crt", "Key": filepath.Join(root, "site.key"), "B": bs[0].Port}), key0)
	refusedAs(t, l, "a hard link to the serving key", policy(t, attackHTTPS, map[string]any{"Name": "attack", "Port": attackPort, "Cert": "edge.crt", "Key": "edge.key", "B": bs[0].Port}), key0)
	ca0 := "default/attack: spec.backends[0].tls.caFile: " + notReadable
	for _, f := range []string{"bundle-a.crt", "bundle-b.crt"} {
		refusedAs(t, l, "a hard link to a token or the store ("+f+")", policy(t, attackCA, map[string]any{"Name": "attack", "Port": attackPort, "CA": f, "B": bs[0].Port}), ca0)
	}
	// The control: a hard link to a file lbplane does not keep secret is read (and found to be no CA).
	refusedAs(t, l, "a hard link to ports.json", policy(t, attackCA, map[string]any{"Name": "attack", "Port": attackPort, "CA": "ports.crt", "B": bs[0].Port}),
		"default/attack: spec.backends[0].tls.caFile: no PEM certificate in it")

	// A certificate file with the key inside.
	refusedAs(t, l, "a certificateFile holding a private key", policy(t, attackHTTPS, map[string]any{"Name": "attack", "Port": attackPort, "Cert": "bundle.pem", "Key": "app.key", "B": bs[0].Port}),
		"default/attack: spec.listener.tls.certificates[0].certificateFile: holds a private key; a certificate file must hold certificates only (put the key in privateKeyFile)")

	waitSynced(t, l, 1)
	if dump := e.ConfigDump(t); strings.Contains(dump, "PRIVATE KEY") {
		t.Errorf("a private key reached Envoy's config dump")
	}
	if ps, err := l.Client.List(context.Background()); err != nil || len(ps) != 1 {
		t.Errorf("policies stored: %d, %v; want the good one only", len(ps), err)
	}
}

// An Envoy's own client key, written where lbctl was told to (getting started once wrote ./envoy-1 inside
// the files root "."), was served to another node over SDS: it could then connect as that Envoy, and a
// revocation of its node did not stop the copy. A key lbplane issued is now refused by what it is: by its
// own name, copied, hard-linked, through a symlink, paired with its own certificate or with one another CA
// made for the same public key; and without --out-dir lbctl writes nothing into the working directory.
func TestAttackKeyFileAnEnvoysOwnKey(t *testing.T) {
	t.Parallel()
	dir, l := startInFilesRoot(t)
	lbctlIn := func(args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "lbctl"), append([]string{"--server", l.APIURL, "--token", token, "bootstrap", "--xds-address", l.XDSAddr}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("lbctl bootstrap %v: %v\n%s", args, err, out)
		}
	}
	// Without --out-dir, nothing lands in the working directory.
	before, _ := os.ReadDir(dir)
	lbctlIn("--node-id", "envoy-0")
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("lbctl bootstrap without --out-dir wrote into the working directory: %d entries before, %d after", len(before), len(after))
	}
	// The finding's layout: the Envoy's files inside the files root, by choice.
	lbctlIn("--node-id", "envoy-1", "--out-dir", "./envoy-1")
	key := filepath.Join(dir, "envoy-1", "tls.key")
	copyFile(t, key, filepath.Join(dir, "innocent.key"))
	if err := os.Link(key, filepath.Join(dir, "linked.key")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("envoy-1/tls.key", filepath.Join(dir, "sym.key")); err != nil {
		t.Fatal(err)
	}
	writeForgedCertificate(t, filepath.Join(dir, "envoy-1", "tls.crt"), filepath.Join(dir, "forged.crt"))

	bs := startBackends(t, "ek1")
	port := reservePort(t)
	goodPolicyUnderTheRoot(t, l, port, bs[0].Port)
	cert0 := "default/attack: spec.listener.tls.certificates[0].certificateFile: " + notReadable
	key0 := "default/attack: spec.listener.tls.certificates[0].privateKeyFile: " + notReadable
	for _, a := range []struct{ cert, key, want string }{
		{"./envoy-1/tls.crt", "./envoy-1/tls.key", cert0},
		{"forged.crt", "./envoy-1/tls.key", key0},
		{"forged.crt", "envoy-1/../envoy-1/tls.key", key0},
		{"forged.crt", key, key0},
		{"forged.crt", "innocent.key", key0},
		{"forged.crt", "linked.key", key0},
		{"forged.crt", "sym.key", key0},
	} {
		doc := policy(t, attackHTTPS, map[string]any{"Name": "attack", "Port": port + 1, "Cert": a.cert, "Key": a.key, "B": bs[0].Port})
		refusedAs(t, l, a.cert+" with "+a.key, doc, a.want)
	}
	if ps, err := l.Client.List(context.Background()); err != nil || len(ps) != 0 {
		t.Errorf("policies stored after the refused pushes: %d, %v", len(ps), err)
	}
}

// writeForgedCertificate writes a certificate for the public key of the certificate in from, signed by a CA
// of the attacker's own: it pairs with the key without being lbplane's.
func writeForgedCertificate(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM certificate", from)
	}
	victim, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "app.example.com"}, DNSNames: []string{"app.example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	parent := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "attacker CA"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, victim.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The README's flow wrote its secrets into the working tree where `git add -A` commits them: ./data (the CA
// key, the push API tokens) and ./envoy-1 (the Envoy's key). ./data is ignored by git; lbctl writes the
// Envoy's files outside the working tree (TestAttackKeyFileAnEnvoysOwnKey, internal/lbctl's tests).
func TestAttackREADMESecretsAreNotCommitted(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is needed to check what the checkout ignores: apt-get install git")
	}
	for _, f := range []string{"data/pki/ca.key", "data/pki/xds.key", "data/token", "data/token-readonly", "data/policies.db", "data/issued-keys"} {
		cmd := exec.Command(git, "check-ignore", "--no-index", "-q", f)
		cmd.Dir = tools.RepoRoot()
		if err := cmd.Run(); err != nil {
			t.Errorf("%s is not ignored by git (%v): git add -A would commit it", f, err)
		}
	}
}

const kubeSecretPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}, namespace: default}
spec:
  listener:
    address: 127.0.0.1
    port: {{.Port}}
    protocol: HTTPS
    hostnames: [app.example.com]
    tls: {certificates: [{secretName: {{.Secret}}}]}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: {{.B}}}]}]
`

// In Kubernetes mode lbplane's CA Secret and its group certificate Secret are kubernetes.io/tls Secrets of
// the release namespace, where a policy may name them: the CA key, or a key every Envoy of the group
// authenticates with, would be served to Envoys (and to whoever connects to the listener as a client's
// server certificate). They are recognised by what they hold and leave the reference unresolved; a
// tenant's own Secret beside them serves.
func TestAttackKeySecretsKubernetes(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	l := startLbplane(t, "--kubernetes", "--kubeconfig", cluster.Kubeconfig, "--namespace", "default",
		"--ca-secret", "lbplane-ca", "--envoy-cert-secret", "default=lbplane-envoy-tls", "--address-backends-namespaces", "default")
	eventually(t, 60*time.Second, "lbplane has made its CA and group certificate Secrets", func() error {
		for _, name := range []string{"lbplane-ca", "lbplane-envoy-tls"} {
			if out, err := kubectl(t, cluster.Kubeconfig, "", "get", "secret", name, "-o", "jsonpath={.type}"); err != nil || out != "kubernetes.io/tls" {
				return fmt.Errorf("%s: %v %s", name, err, out)
			}
		}
		return nil
	})
	if out, err := kubectl(t, cluster.Kubeconfig, "", "create", "secret", "tls", "app-tls", "--cert", certs("app.example.com.crt"), "--key", certs("app.example.com.key")); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	startEnvoy(t, l, "envoy-kube-keys", true)
	bs := startBackends(t, "ks1")
	ports := map[string]int{}
	for name, secret := range map[string]string{"good": "app-tls", "ca": "lbplane-ca", "group": "lbplane-envoy-tls"} {
		ports[name] = reservePort(t)
		kubeApply(t, cluster.Kubeconfig, kubeSecretPolicy, map[string]any{"Name": name, "Port": ports[name], "Secret": secret, "B": bs[0].Port})
	}
	resolved := func(name string) string {
		out, _ := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", name, "-o",
			`jsonpath={.status.conditions[?(@.type=="ResolvedRefs")].status}: {.status.conditions[?(@.type=="ResolvedRefs")].message}`)
		return out
	}
	eventually(t, 60*time.Second, "the tenant's own Secret resolves", func() error {
		if got := resolved("good"); !strings.HasPrefix(got, "True") {
			return fmt.Errorf("ResolvedRefs %s", got)
		}
		return nil
	})
	for _, name := range []string{"ca", "group"} {
		eventually(t, 30*time.Second, "the policy naming lbplane's "+name+" Secret is unresolved", func() error {
			if got := resolved(name); !strings.HasPrefix(got, "False") || !strings.Contains(got, "holds lbplane's own key material") {
				return fmt.Errorf("ResolvedRefs %s", got)
			}
			return nil
		})
	}
	handshake := func(name string) error {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[name]), &tls.Config{InsecureSkipVerify: true, ServerName: "app.example.com"})
		if err == nil {
			conn.Close()
		}
		return err
	}
	eventually(t, 30*time.Second, "the tenant's listener serves", func() error { return handshake("good") })
	for _, name := range []string{"ca", "group"} {
		if err := handshake(name); err == nil {
			t.Errorf("the listener naming lbplane's %s Secret served a TLS handshake", name)
		}
	}
}
