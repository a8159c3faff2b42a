package kubepki

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// RevocationsKey is the ConfigMap key holding the revocations, as JSON.
const RevocationsKey = "revocations.json"

// Revocations keeps the revoked Envoy identities (lbctl revoke) in a ConfigMap of lbplane's namespace,
// which every replica reads: a revocation made through any replica cuts the node off on all of them.
type Revocations struct {
	Client    corev1client.ConfigMapsGetter
	Namespace string
	Name      string
}

// Load returns the revocations stored; none when the ConfigMap does not exist yet.
func (r *Revocations) Load(ctx context.Context) ([]apiwire.Revocation, error) {
	cm, err := r.Client.ConfigMaps(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeRevocations(cm)
}

func decodeRevocations(cm *corev1.ConfigMap) ([]apiwire.Revocation, error) {
	v, ok := cm.Data[RevocationsKey]
	if !ok || v == "" {
		return nil, nil
	}
	var out []apiwire.Revocation
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", cm.Namespace, cm.Name, RevocationsKey, err)
	}
	return out, nil
}

// Store adds rs to what the ConfigMap holds (another replica may have added its own meanwhile; expired
// ones are dropped), creating it when needed. A conflicting write is retried with what is there now.
func (r *Revocations) Store(ctx context.Context, rs []apiwire.Revocation) error {
	cms := r.Client.ConfigMaps(r.Namespace)
	for attempt := 0; attempt < 5; attempt++ {
		cm, err := cms.Get(ctx, r.Name, metav1.GetOptions{})
		exists := err == nil
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace, Labels: labels}}
			err = nil
		}
		if err != nil {
			return err
		}
		have, err := decodeRevocations(cm)
		if err != nil {
			have = nil // a broken value is replaced, not kept
		}
		merged := mergeRevocations(have, rs, time.Now())
		b, err := json.Marshal(merged)
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[RevocationsKey] = string(b)
		if !exists {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		} else {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue
		}
		return err
	}
	return fmt.Errorf("ConfigMap %s/%s: kept changing under five writes in a row", r.Namespace, r.Name)
}

// mergeRevocations is the union of a and b, without repeats or expired entries, oldest first.
func mergeRevocations(a, b []apiwire.Revocation, now time.Time) []apiwire.Revocation {
	out := []apiwire.Revocation{}
	for _, r := range slices.Concat(a, b) {
		if !r.Until.After(now) {
			continue
		}
		if !slices.ContainsFunc(out, func(o apiwire.Revocation) bool {
			return o.NodeID == r.NodeID && o.Serial == r.Serial && o.Group == r.Group && o.At.Equal(r.At)
		}) {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(x, y apiwire.Revocation) int { return x.At.Compare(y.At) })
	return out
}

// Watch reads the ConfigMap every interval until ctx ends and hands each change to apply.
func (r *Revocations) Watch(ctx context.Context, interval time.Duration, log *slog.Logger, apply func([]apiwire.Revocation)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cm, err := r.Client.ConfigMaps(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			log.Warn("reading the revocations", "configmap", objkey.Key{Namespace: r.Namespace, Name: r.Name}.String(), "error", err)
			continue
		}
		if cm.Data[RevocationsKey] == last {
			continue
		}
		rs, err := decodeRevocations(cm)
		if err != nil {
			log.Warn("reading the revocations", "error", err)
			continue
		}
		last = cm.Data[RevocationsKey]
		apply(rs)
	}
}
