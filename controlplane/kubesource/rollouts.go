package kubesource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/store"
)

// Staged rollouts in Kubernetes mode keep their state, the baseline spec included, in one ConfigMap per
// proxy group in the leader election's namespace (apiwire.RolloutConfigMapName; package rollout owns the
// state's format). A user who applies a new spec replaces the old one in the API: the ConfigMap is where the
// baseline lives on, readable by every replica (which serve their Envoys the side it says) and by lbctl
// rollout undo. Only the elected replica writes it; a write over a version it had not read is refused
// (resourceVersion) and decided again.

// PolicyChange is a policy whose spec changed: Old is the previous copy (nil: new), New the current one
// (nil: deleted).
type PolicyChange struct {
	Old, New *v1alpha1.LoadBalancerPolicy
}

// RolloutHook hears of spec changes before the engine publishes them (Source.Rollouts), and tells which
// changes are staged.
type RolloutHook interface {
	PolicyChanges(changes []PolicyChange)
	Staged(p *v1alpha1.LoadBalancerPolicy) bool
}

// Leader reports whether this replica is the elected one (always true without an election).
func (s *Source) Leader() bool {
	if s.LeaderElectionNamespace == "" || s.mgr == nil {
		return true
	}
	select {
	case <-s.mgr.Elected():
		return true
	default:
		return false
	}
}

// RolloutStore keeps rollouts in ConfigMaps (rollout.Persist).
type RolloutStore struct {
	s *Source

	mu   sync.Mutex
	revs map[string]string // group -> resourceVersion last read or written
}

// RolloutStore returns the source's rollout store; nil without a leader election namespace.
func (s *Source) RolloutStore() *RolloutStore {
	if s.LeaderElectionNamespace == "" {
		return nil
	}
	return &RolloutStore{s: s, revs: map[string]string{}}
}

func (r *RolloutStore) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// Rollouts reads every group's rollout.
func (r *RolloutStore) Rollouts() (map[string][]byte, error) {
	ctx, cancel := r.ctx()
	defer cancel()
	var cms corev1.ConfigMapList
	if err := r.s.mgr.GetAPIReader().List(ctx, &cms, client.InNamespace(r.s.LeaderElectionNamespace), client.MatchingLabels{apiwire.RolloutLabel: "true"}); err != nil {
		return nil, fmt.Errorf("%w: listing the rollout ConfigMaps: %v", store.ErrUnavailable, err)
	}
	out := map[string][]byte{}
	revs := map[string]string{}
	for _, cm := range cms.Items {
		g, ok := cm.Data[apiwire.RolloutGroupKey]
		if !ok || cm.Name != apiwire.RolloutConfigMapName(g) {
			continue
		}
		out[g] = []byte(cm.Data[apiwire.RolloutStateKey])
		revs[g] = cm.ResourceVersion
	}
	r.mu.Lock()
	r.revs = revs
	r.mu.Unlock()
	return out, nil
}

// PutRollout writes a group's rollout (nil deletes it) over the version last read (store.ErrConflict
// when another replica wrote it since).
func (r *RolloutStore) PutRollout(group string, v []byte) error {
	ctx, cancel := r.ctx()
	defer cancel()
	c := r.s.mgr.GetClient()
	r.mu.Lock()
	rev, known := r.revs[group]
	r.mu.Unlock()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: apiwire.RolloutConfigMapName(group), Namespace: r.s.LeaderElectionNamespace,
		Labels: map[string]string{apiwire.RolloutLabel: "true"}, ResourceVersion: rev},
		Data: map[string]string{apiwire.RolloutGroupKey: group, apiwire.RolloutStateKey: string(v)}}
	var err error
	switch {
	case v == nil && !known:
		return nil
	case v == nil:
		err = c.Delete(ctx, cm, client.Preconditions{ResourceVersion: &rev})
		if apierrors.IsNotFound(err) {
			err = nil
		}
	case !known:
		err = c.Create(ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			err = store.ErrConflict
		}
	default:
		err = c.Update(ctx, cm)
	}
	if apierrors.IsConflict(err) {
		err = store.ErrConflict
	}
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return err
		}
		return fmt.Errorf("writing ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	r.mu.Lock()
	if v == nil {
		delete(r.revs, group)
	} else {
		r.revs[group] = cm.ResourceVersion
	}
	r.mu.Unlock()
	return nil
}

// rolloutChanges tells the hook of the spec changes in rd (policies whose generation moved, new ones, and
// deleted ones), before the engine publishes them; prev are the copies before. Nothing is told before the
// first snapshot: the policies already there when lbplane starts are not changes.
func (s *Source) rolloutChanges(prev map[objkey.Key]*v1alpha1.LoadBalancerPolicy, rd *round) {
	if s.Rollouts == nil {
		return
	}
	select {
	case <-s.synced:
	default:
		return
	}
	var out []PolicyChange
	for _, p := range rd.changed {
		old := prev[objkey.Key{Namespace: p.Namespace, Name: p.Name}]
		if old == nil || old.Generation != p.Generation || old.UID != p.UID {
			out = append(out, PolicyChange{Old: old, New: p})
		}
	}
	for _, k := range rd.deleted {
		if old := prev[k]; old != nil {
			out = append(out, PolicyChange{Old: old})
		}
	}
	if len(out) > 0 {
		s.Rollouts.PolicyChanges(out)
	}
}
