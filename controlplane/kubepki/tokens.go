package kubepki

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/lbplane/lbplane/controlplane/objkey"
)

// Keys of the push API token Secret.
const (
	TokenKey         = "token"
	ReadOnlyTokenKey = "token-readonly"
)

// LoadOrCreateTokens returns the push API's admin and read-only tokens from the Secret namespace/name. The
// first replica to start creates the Secret, with random tokens; a Secret someone else made (the chart,
// with a chosen admin token) gets whichever token it lacks. Replicas racing for it settle on one write
// (Create refused with AlreadyExists, Update with Conflict) and read the winner's. lbplane making the
// Secret itself, instead of the chart with helm's lookup, keeps the tokens stable under helm template and
// GitOps tools, which cannot look anything up and would render a new token on every sync.
func LoadOrCreateTokens(ctx context.Context, c corev1client.SecretsGetter, namespace, name string) (admin, readOnly string, err error) {
	secrets := c.Secrets(namespace)
	source := "Secret " + objkey.Key{Namespace: namespace, Name: name}.String()
	for attempt := 0; attempt < 5; attempt++ {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}, Type: corev1.SecretTypeOpaque}
			fillTokens(s)
			if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
				if apierrors.IsAlreadyExists(err) {
					continue
				}
				return "", "", fmt.Errorf("creating %s: %w", source, err)
			}
		case err != nil:
			return "", "", fmt.Errorf("reading %s: %w", source, err)
		case fillTokens(s):
			if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				if apierrors.IsConflict(err) {
					continue
				}
				return "", "", fmt.Errorf("adding the missing token to %s: %w", source, err)
			}
		}
		admin, readOnly = string(s.Data[TokenKey]), string(s.Data[ReadOnlyTokenKey])
		if admin == readOnly {
			return "", "", fmt.Errorf("%s: the read-only token must differ from the admin token", source)
		}
		return admin, readOnly, nil
	}
	return "", "", fmt.Errorf("%s: changed under every attempt to complete it", source)
}

// fillTokens adds a random token for each missing key and tells whether it added one.
func fillTokens(s *corev1.Secret) bool {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	changed := false
	for _, k := range []string{TokenKey, ReadOnlyTokenKey} {
		if len(s.Data[k]) > 0 {
			continue
		}
		b := make([]byte, 32)
		rand.Read(b)
		s.Data[k] = []byte(hex.EncodeToString(b))
		changed = true
	}
	return changed
}
