package kubepki

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestCASecretCreatedOnceAndShared(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	first, created, err := LoadOrCreateCA(ctx, c.CoreV1(), "lbplane", "demo-ca")
	if err != nil || !created {
		t.Fatalf("first start: created=%v err=%v", created, err)
	}
	second, created, err := LoadOrCreateCA(ctx, c.CoreV1(), "lbplane", "demo-ca")
	if err != nil || created {
		t.Fatalf("second start: created=%v err=%v", created, err)
	}
	if !first.Cert.Equal(second.Cert) {
		t.Fatal("the second replica has another CA")
	}
	s, _ := c.CoreV1().Secrets("lbplane").Get(ctx, "demo-ca", metav1.GetOptions{})
	if s.Type != corev1.SecretTypeTLS || string(s.Data[CAKey]) != string(first.CertPEM) {
		t.Errorf("CA Secret: type %s, ca.crt matches=%v", s.Type, string(s.Data[CAKey]) == string(first.CertPEM))
	}
}

func TestGroupCertsWrittenOnlyWhenNeeded(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	ca, _, err := LoadOrCreateCA(ctx, c.CoreV1(), "lbplane", "ca")
	if err != nil {
		t.Fatal(err)
	}
	g := &GroupCerts{Client: c.CoreV1(), Namespace: "lbplane", CA: ca, Secrets: map[string]string{"edge": "edge-tls"}, Validity: time.Hour, Log: slog.New(slog.DiscardHandler)}
	get := func() *corev1.Secret {
		s, err := c.CoreV1().Secrets("lbplane").Get(ctx, "edge-tls", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := g.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	first := get()
	for _, k := range []string{CertKey, KeyKey, CAKey, "xds-client.json", "xds-ca.json"} {
		if len(first.Data[k]) == 0 {
			t.Errorf("group Secret has no %s", k)
		}
	}
	if err := g.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// A short life, too, counts from when it was issued, not from the clock-skew back-dating.
	if short, err := ca.IssueGroup("edge", 3*time.Minute); err != nil || !ca.Fresh(short.CertPEM) {
		t.Errorf("a three-minute certificate is due at once: %v", err)
	}
	if got := get(); string(got.Data[CertKey]) != string(first.Data[CertKey]) {
		t.Error("a fresh certificate was replaced")
	}
	// Another CA (the CA Secret was replaced): the group certificate is re-issued from the new one.
	other, _, err := LoadOrCreateCA(ctx, c.CoreV1(), "lbplane", "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	g.CA = other
	if err := g.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := get(); !other.Fresh(got.Data[CertKey]) || string(got.Data[CAKey]) != string(other.CertPEM) {
		t.Error("the group certificate was not re-issued from the new CA")
	}
	// Due for renewal: a certificate past two thirds of its life is replaced; one of 30ms is, 20ms after issue.
	due, err := other.IssueGroup("edge", 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(25 * time.Millisecond)
	if other.Fresh(due.CertPEM) {
		t.Fatal("a certificate past two thirds of its life counts as fresh")
	}
	s := get()
	s.Data[CertKey] = due.CertPEM
	if _, err := c.CoreV1().Secrets("lbplane").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := get(); string(got.Data[CertKey]) == string(due.CertPEM) || !other.Fresh(got.Data[CertKey]) {
		t.Error("a certificate due for renewal was not renewed")
	}
}

func TestTokensCreatedOnceAndCompleted(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	admin, ro, err := LoadOrCreateTokens(ctx, c.CoreV1(), "lbplane", "demo-api-token")
	if err != nil || len(admin) != 64 || len(ro) != 64 || admin == ro {
		t.Fatalf("first start: %q %q %v", admin, ro, err)
	}
	admin2, ro2, err := LoadOrCreateTokens(ctx, c.CoreV1(), "lbplane", "demo-api-token")
	if err != nil || admin2 != admin || ro2 != ro {
		t.Fatalf("second start read other tokens: %v", err)
	}
	// The chart's Secret with a chosen admin token: kept, and the read-only one added.
	c.CoreV1().Secrets("lbplane").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "chosen", Namespace: "lbplane"},
		Data: map[string][]byte{TokenKey: []byte("mine")}}, metav1.CreateOptions{})
	admin, ro, err = LoadOrCreateTokens(ctx, c.CoreV1(), "lbplane", "chosen")
	if err != nil || admin != "mine" || len(ro) != 64 {
		t.Fatalf("chart's Secret: %q %q %v", admin, ro, err)
	}
	s, _ := c.CoreV1().Secrets("lbplane").Get(ctx, "chosen", metav1.GetOptions{})
	if string(s.Data[ReadOnlyTokenKey]) != ro {
		t.Error("the read-only token was not written back")
	}
}
