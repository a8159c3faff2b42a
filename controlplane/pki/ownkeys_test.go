package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every key the CA issues, the CA's own key and every certificate it issued are recognised by content, in
// any PEM form a TLS library reads, after a restart too; anything else is not.
func TestOwnKeysRecogniseIssuedAndHeldKeys(t *testing.T) {
	dir := t.TempDir()
	ca, _, err := LoadOrCreateCA(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(dir, "issued-keys")
	keys, err := OpenOwnKeys(record)
	if err != nil {
		t.Fatal(err)
	}
	ca.Keys = keys
	keys.TrustCA(ca)
	envoy, err := ca.IssueClient("envoy-1", "default", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	group, err := ca.IssueGroup("edge", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := os.ReadFile(filepath.Join(dir, "pki", CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	// The same key in SEC 1 form ("EC PRIVATE KEY"), as openssl ec writes it, and mislabelled.
	sec1 := func(keyPEM []byte, label string) []byte {
		b, _ := pem.Decode(keyPEM)
		k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalECPrivateKey(k.(*ecdsa.PrivateKey))
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: label, Bytes: der})
	}
	otherKey, otherCert := selfSigned(t)
	otherCA, _, err := LoadOrCreateCA(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	fromOtherCA, err := otherCA.IssueClient("envoy-1", "default", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	check := func(k *OwnKeys, when string) {
		t.Helper()
		for name, data := range map[string][]byte{
			"an Envoy's key":                    envoy.KeyPEM,
			"an Envoy's key in SEC 1 form":      sec1(envoy.KeyPEM, "EC PRIVATE KEY"),
			"an Envoy's key mislabelled":        sec1(envoy.KeyPEM, "PRIVATE KEY"),
			"a group key":                       group.KeyPEM,
			"the CA's key":                      caKey,
			"an Envoy's certificate":            envoy.CertPEM,
			"a key after other blocks":          append(append([]byte("text\n"), otherCert...), envoy.KeyPEM...),
			"a certificate and key in one file": append(group.CertPEM, group.KeyPEM...),
		} {
			if !k.Refuses(data) {
				t.Errorf("%s: %s is not recognised", when, name)
			}
		}
		for name, data := range map[string][]byte{
			"another key":              otherKey,
			"another certificate":      otherCert,
			"lbplane's CA certificate": ca.CertPEM,
			"another CA's certificate": fromOtherCA.CertPEM,
			"another CA's issued key":  fromOtherCA.KeyPEM,
			"no PEM at all":            []byte("hello"),
			"a broken private key PEM": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}),
		} {
			if k.Refuses(data) {
				t.Errorf("%s: %s is taken for lbplane's own", when, name)
			}
		}
	}
	check(keys, "while running")

	// After a restart, the record alone recognises the issued keys (the CA is trusted again at start).
	again, err := OpenOwnKeys(record)
	if err != nil {
		t.Fatal(err)
	}
	again.TrustCA(ca)
	check(again, "after a restart")
	bare, err := OpenOwnKeys(record)
	if err != nil {
		t.Fatal(err)
	}
	if !bare.Refuses(envoy.KeyPEM) || !bare.Refuses(group.KeyPEM) {
		t.Error("the record does not recognise the issued keys without the CA")
	}
	if fi, err := os.Stat(record); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("record file: %v, %v; want mode 0600", fi, err)
	}
}

// A record whose certificate has expired is forgotten at the next start, and the file is compacted; a line
// cut short by a crash is skipped; a file that is not a record is refused rather than overwritten.
func TestOwnKeysForgetExpiredRecords(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "issued-keys")
	live, _ := selfSigned(t)
	dead, _ := selfSigned(t)
	fp := func(keyPEM []byte) string {
		t.Helper()
		pubs := privateKeys(keyPEM)
		if len(pubs) != 1 {
			t.Fatalf("%d keys", len(pubs))
		}
		f, _ := fingerprint(pubs[0])
		return fmt.Sprintf("%x", f)
	}
	content := ownKeysMagic + "\n" +
		fp(live) + fmt.Sprintf(" %d\n", time.Now().Add(time.Hour).Unix()) +
		fp(dead) + fmt.Sprintf(" %d\n", time.Now().Add(-time.Hour).Unix()) +
		fp(dead)[:20]
	if err := os.WriteFile(record, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := OpenOwnKeys(record)
	if err != nil {
		t.Fatal(err)
	}
	if !k.Refuses(live) || k.Refuses(dead) {
		t.Errorf("live key refused %v (want true), expired key refused %v (want false)", k.Refuses(live), k.Refuses(dead))
	}
	b, _ := os.ReadFile(record)
	if lines := strings.Count(string(b), "\n"); lines != 2 {
		t.Errorf("the record holds %d lines after compaction, want 2 (the header and the live key):\n%s", lines, b)
	}
	if err := os.WriteFile(record, []byte("something else\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenOwnKeys(record); err == nil {
		t.Error("a file that is not a record was read as one")
	}
}

func selfSigned(t *testing.T) (keyPEM, certPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("PRIVATE KEY", kder), pemBlock("CERTIFICATE", der)
}

// A judgement is cached by content, and forgotten when the keys change: a key judged foreign is refused
// once lbplane holds it.
func TestOwnKeysCacheFollowsChanges(t *testing.T) {
	k, err := OpenOwnKeys("")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := selfSigned(t)
	for range 2 {
		if k.Refuses(key) {
			t.Fatal("a foreign key is refused")
		}
	}
	k.HoldPEM(key)
	if !k.Refuses(key) {
		t.Error("a key held after it was judged foreign is not refused: the cache outlived the change")
	}
}
