package serve

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/rollout"
)

// kubeRollouts starts staged rollouts from the specs users apply in Kubernetes mode (kubesource's hook),
// and steers them from the policies' annotations (lbctl rollout pause|resume|abort in Kubernetes mode).
type kubeRollouts struct {
	ro     *rollout.Controller
	eng    *engine.Engine
	mode   string // --rollout-default
	log    *slog.Logger
	leader func() bool
}

// versionOf is a policy as the API server holds it, as a rollout keeps it: its spec and identity (the API
// keeps only the newest spec, so this is the baseline a rollback goes back to). It is a copy of its own: the
// informer's object is not kept. A Gateway's policy is kept whole.
func versionOf(p *v1alpha1.LoadBalancerPolicy) *v1alpha1.LoadBalancerPolicy {
	if p == nil {
		return nil
	}
	if _, ok := gatewayapi.ServedBy(p); ok {
		// A Gateway's policy is no informer's object: made by the translation, never modified, and its
		// annotations say what it serves (its clusters are shared by them, see translate.shareClusters).
		return p
	}
	return &v1alpha1.LoadBalancerPolicy{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Generation: p.Generation, CreationTimestamp: p.CreationTimestamp, UID: p.UID},
		Spec:       *p.Spec.DeepCopy()}
}

// kubeMode is how an applied generation reaches the Envoys: immediate when its rollout-mode annotation
// names this generation (lbctl rollout undo), else staged when it has spec.rollout, else immediate when it
// is a Gateway's policy whose HTTPRoutes ask for that, else the server's default.
func kubeMode(p *v1alpha1.LoadBalancerPolicy, def string) string {
	switch {
	case p.Annotations[apiwire.RolloutModeAnnotation] == strconv.FormatInt(p.Generation, 10):
		return rollout.ModeImmediate
	case p.Spec.Rollout != nil:
		return rollout.ModeStaged
	case p.Annotations[gatewayapi.AnnotationRollout] == gatewayapi.RolloutImmediate:
		return rollout.ModeImmediate
	case def == rollout.ModeStaged:
		return rollout.ModeStaged
	}
	return rollout.ModeImmediate
}

// Staged tells whether a change to p is staged: what PolicyChanges decides for it.
func (k *kubeRollouts) Staged(p *v1alpha1.LoadBalancerPolicy) bool {
	return kubeMode(p, k.mode) == rollout.ModeStaged
}

// PolicyChanges stages the changes that ask for it (spec.rollout, or --rollout-default staged) unless the
// change is marked immediate for its generation (lbctl rollout undo); the others, and deletions, leave their
// rollouts. Every replica decides the same from the same change; the leader stores it. A staged change whose
// rollout cannot start now (its ConfigMap could not be written, or another kind of rollout of the policy is
// under way) is held: no Envoy gets it until it starts (rollout.Controller.Stage); it never reaches every
// Envoy at once.
func (k *kubeRollouts) PolicyChanges(changes []kubesource.PolicyChange) {
	var staged []rollout.Change
	var unstaged []objkey.Key
	for _, ch := range changes {
		if ch.New == nil {
			unstaged = append(unstaged, objkey.Of(ch.Old))
			continue
		}
		p := ch.New
		key := objkey.Of(p)
		if kubeMode(p, k.mode) != rollout.ModeStaged {
			unstaged = append(unstaged, key)
			continue
		}
		staged = append(staged, rollout.Change{Key: key, Group: p.Spec.ProxyGroupOrDefault(), Old: versionOf(ch.Old), New: versionOf(p), Generation: p.Generation, Rollout: p.Spec.Rollout})
	}
	if len(unstaged) > 0 {
		if err := k.ro.Unstage(unstaged); err != nil {
			k.log.Error("ending rollouts", "error", err)
		}
	}
	if len(staged) > 0 {
		// Held on failure, and logged there.
		_ = k.ro.Stage(staged)
	}
}

// steer runs until ctx ends: followers read the rollouts the leader stores (every second); the leader
// applies the pause and abort annotations of the policies in a rollout.
func (k *kubeRollouts) steer(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !k.leader() {
			if err := k.ro.Reload(); err != nil {
				k.log.Warn("reading the rollouts the leader stored", "error", err)
			}
			continue
		}
		byKey := map[objkey.Key]*v1alpha1.LoadBalancerPolicy{}
		for _, p := range k.eng.Policies(engine.SourceKubernetes) {
			byKey[objkey.Of(p)] = p
		}
		for _, key := range k.ro.Keys() {
			p, st := byKey[key], k.ro.Status(key)
			if p == nil || st == nil || st.CandidateGeneration != p.Generation {
				continue
			}
			paused := p.Annotations[apiwire.PausedAnnotation] == "true"
			action := ""
			switch {
			case (p.Annotations[apiwire.AbortAnnotation] == strconv.FormatInt(p.Generation, 10) || p.Annotations[gatewayapi.GatewayRolloutAbort] == "true") &&
				(st.Phase == v1alpha1.RolloutProgressing || st.Phase == v1alpha1.RolloutPaused):
				action = "abort"
			case paused && st.Phase == v1alpha1.RolloutProgressing:
				action = "pause"
			case !paused && st.Phase == v1alpha1.RolloutPaused:
				action = "resume"
			}
			if action == "" {
				continue
			}
			if err := k.ro.Action(key, action); err != nil {
				k.log.Warn("rollout "+action, "policy", key.String(), "error", err)
				continue
			}
			k.log.Info("rollout "+action, "policy", key.String(), "by", "annotation")
		}
	}
}
