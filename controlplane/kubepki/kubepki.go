// Package kubepki keeps lbplane's CA and the Envoy group certificates in Kubernetes Secrets: every replica
// loads the same CA from one Secret (the first to start creates it), and each proxy group's client
// certificate lives in a Secret the chart mounts into that group's Envoy pods.
package kubepki

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/pki"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// Keys of the Secrets: kubernetes.io/tls with ca.crt, as cert-manager writes them.
const (
	CertKey = corev1.TLSCertKey       // tls.crt
	KeyKey  = corev1.TLSPrivateKeyKey // tls.key
	CAKey   = "ca.crt"
)

// labels mark the Secrets lbplane writes, so that an operator can tell them from Secrets people made.
var labels = map[string]string{"app.kubernetes.io/managed-by": "lbplane"}

// LoadOrCreateCA loads the CA from the Secret namespace/name, creating it with a new CA when there is none.
// Replicas starting together race safely: one Create wins, and the others, refused with AlreadyExists, read
// the winner's. created tells whether this call made it.
func LoadOrCreateCA(ctx context.Context, c corev1client.SecretsGetter, namespace, name string) (*pki.CA, bool, error) {
	secrets := c.Secrets(namespace)
	source := "Secret " + objkey.Key{Namespace: namespace, Name: name}.String()
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		ca, err := pki.ParseCA(source, s.Data[CertKey], s.Data[KeyKey])
		return ca, false, err
	}
	if !apierrors.IsNotFound(err) {
		return nil, false, fmt.Errorf("reading %s: %w", source, err)
	}
	certPEM, keyPEM, err := pki.NewCAPEM()
	if err != nil {
		return nil, false, err
	}
	_, err = secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Type:       corev1.SecretTypeTLS,
		// ca.crt too: the CA certificate is also what a client of lbplane trusts (lbctl's --ca-file).
		Data: map[string][]byte{CertKey: certPEM, KeyKey: keyPEM, CAKey: certPEM},
	}, metav1.CreateOptions{})
	switch {
	case err == nil:
		ca, err := pki.ParseCA(source, certPEM, keyPEM)
		return ca, true, err
	case apierrors.IsAlreadyExists(err):
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, false, fmt.Errorf("reading %s: %w", source, err)
		}
		ca, err := pki.ParseCA(source, s.Data[CertKey], s.Data[KeyKey])
		return ca, false, err
	default:
		return nil, false, fmt.Errorf("creating %s: %w", source, err)
	}
}

// GroupCerts keeps one Secret per proxy group holding a group certificate (pki.IssueGroup) and its key, the
// CA, and the SDS files the chart's Envoy bootstrap watches. Every replica runs it: a write happens only
// when a certificate is missing, due (two thirds of its life) or from another CA, and a replica that loses
// a race (AlreadyExists, Conflict) leaves it to the winner.
type GroupCerts struct {
	// Client is the core/v1 client only: the typed clientset would link every API group's client.
	Client    corev1client.SecretsGetter
	Namespace string
	CA        *pki.CA
	// Secrets maps a proxy group to the name of its Secret.
	Secrets  map[string]string
	Validity time.Duration
	Log      *slog.Logger
	// Interval between checks; a minute when 0.
	Interval time.Duration

	mu sync.Mutex
	// expiry is when each group's certificate in its Secret expires, as last seen, for the metrics.
	expiry map[string]time.Time
}

// Expiry returns when each proxy group's certificate, as last seen in its Secret, expires.
func (g *GroupCerts) Expiry() map[string]time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.expiry)
}

func (g *GroupCerts) seen(group string, notAfter time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.expiry == nil {
		g.expiry = map[string]time.Time{}
	}
	g.expiry[group] = notAfter
}

// Run checks now and then every Interval until ctx ends.
func (g *GroupCerts) Run(ctx context.Context) {
	every := g.Interval
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		// Each check is bounded, so a hung API server call cannot stop later checks (and renewals).
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := g.Sync(sctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			g.Log.Error("keeping Envoy group certificates", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sync writes each group's Secret that needs it.
func (g *GroupCerts) Sync(ctx context.Context) error {
	var errs []error
	for group, name := range g.Secrets {
		if err := g.sync(ctx, group, name); err != nil {
			errs = append(errs, fmt.Errorf("group %s, Secret %s/%s: %w", group, g.Namespace, name, err))
		}
	}
	return errors.Join(errs...)
}

func (g *GroupCerts) sync(ctx context.Context, group, name string) error {
	secrets := g.Client.Secrets(g.Namespace)
	old, err := secrets.Get(ctx, name, metav1.GetOptions{})
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if exists && g.CA.Fresh(old.Data[CertKey]) && string(old.Data[CAKey]) == string(g.CA.CertPEM) {
		if t, ok := pki.NotAfter(old.Data[CertKey]); ok {
			g.seen(group, t)
		}
		return nil
	}
	is, err := g.CA.IssueGroup(group, g.Validity)
	if err != nil {
		return err
	}
	files, err := envoybootstrap.CredentialFiles(envoybootstrap.Credentials{Cert: is.CertPEM, Key: is.KeyPEM, CA: is.CAPEM})
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	for _, f := range files {
		data[f.Name] = f.Data
	}
	if !exists {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.Namespace, Labels: labels},
			Type:       corev1.SecretTypeTLS, Data: data,
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // another replica wrote it; the next check looks at theirs
		}
	} else {
		s := old.DeepCopy()
		s.Data = data // the type stays: it is immutable, and the keys fit kubernetes.io/tls and Opaque alike
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		maps.Copy(s.Labels, labels)
		// The resourceVersion read above makes this a compare-and-swap: a replica that renewed first wins.
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return nil
		}
	}
	if err != nil {
		return err
	}
	g.seen(group, is.NotAfter)
	g.Log.Info("issued an Envoy group certificate", "group", group, "secret", objkey.Key{Namespace: g.Namespace, Name: name}.String(), "serial", is.Serial,
		"notAfter", is.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// PublishCA writes lbplane's CA certificate (no key) into the ConfigMap namespace/name (key ca.crt), which
// the Envoy pods mount to verify lbplane when they ask for their certificates. A ConfigMap that already holds
// it is left alone; replicas racing write the same bytes.
func PublishCA(ctx context.Context, c corev1client.ConfigMapsGetter, namespace, name string, caPEM []byte) error {
	cms := c.ConfigMaps(namespace)
	old, err := cms.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
			Data: map[string]string{CAKey: string(caPEM)}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
	case err == nil && old.Data[CAKey] != string(caPEM):
		cm := old.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[CAKey] = string(caPEM)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("ConfigMap %s/%s: %w", namespace, name, err)
	}
	return nil
}
