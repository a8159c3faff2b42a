package lbctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// In Kubernetes mode lbctl rollout works on the policy, as kubectl rollout does on a Deployment: status
// reads status.rollout (written through the status subresource by the elected replica); pause and resume
// set and remove the paused annotation; abort sets the abort annotation to the generation rolled out;
// undo makes the baseline spec, kept in the rollout's ConfigMap, the policy's spec again, marked to reach
// every Envoy at once.

var configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")

// kubeRollout reads a policy's rollout from its status.
func kubeRollout(ctx context.Context, c *Cluster, ns, name string) (*apiwire.RolloutResult, error) {
	p, err := c.Get(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if p.Status.Rollout == nil {
		return &apiwire.RolloutResult{Policy: objkey.Of(p).String(), Generation: p.Generation, Rollout: apiwire.NoRollout(p.Generation), Conditions: p.Status.Conditions}, nil
	}
	return &apiwire.RolloutResult{Policy: objkey.Of(p).String(), Generation: p.Generation, Rollout: *p.Status.Rollout, Conditions: p.Status.Conditions}, nil
}

// kubeRolloutAction pauses, resumes, aborts or undoes a policy's rollout; it returns what it did.
func kubeRolloutAction(ctx context.Context, c *Cluster, ns, name, action string) (string, error) {
	p, err := c.Get(ctx, ns, name)
	if err != nil {
		return "", err
	}
	r := p.Status.Rollout
	if r == nil {
		return "", fmt.Errorf("policy %s/%s has no staged rollout", ns, name)
	}
	var set map[string]any
	switch action {
	case "pause":
		set = map[string]any{apiwire.PausedAnnotation: "true"}
	case "resume":
		set = map[string]any{apiwire.PausedAnnotation: nil}
	case "abort":
		if r.Phase != v1alpha1.RolloutProgressing && r.Phase != v1alpha1.RolloutPaused {
			return "", fmt.Errorf("the rollout of %s/%s is %s; only a progressing or paused rollout can be aborted", ns, name, r.Phase)
		}
		set = map[string]any{apiwire.AbortAnnotation: strconv.FormatInt(r.CandidateGeneration, 10)}
	case "undo":
		return kubeUndo(ctx, c, p)
	default:
		return "", fmt.Errorf("unknown action %q: pause, resume, abort or undo", action)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
	if _, err := c.Dynamic.Resource(policiesGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%s: %s requested (the elected lbplane replica acts on it within a second; lbctl rollout status %s follows it)", ns, name, action, name), nil
}

// kubeUndo makes the rollout's baseline the policy's spec again.
func kubeUndo(ctx context.Context, c *Cluster, p *v1alpha1.LoadBalancerPolicy) (string, error) {
	group := p.Spec.ProxyGroupOrDefault()
	cmName := apiwire.RolloutConfigMapName(group)
	var cms corev1.ConfigMapList
	ns := c.opts.lbplaneNamespace
	if err := c.list(ctx, configMapsGVR, ns, apiwire.RolloutLabel+"=true", &cms); err != nil {
		return "", fmt.Errorf("reading the rollout's ConfigMap %s (give lbplane's namespace with --lbplane-namespace): %w", cmName, err)
	}
	var stored []byte
	for _, cm := range cms.Items {
		if cm.Name == cmName && cm.Data[apiwire.RolloutGroupKey] == group {
			stored = []byte(cm.Data[apiwire.RolloutStateKey])
		}
	}
	if stored == nil {
		return "", fmt.Errorf("no rollout ConfigMap %s for proxy group %s", cmName, group)
	}
	var bs apiwire.RolloutBaselines
	if err := json.Unmarshal(stored, &bs); err != nil {
		return "", fmt.Errorf("the rollout ConfigMap %s: %w", cmName, err)
	}
	i := slices.IndexFunc(bs.Policies, func(bp apiwire.RolloutBaselinePolicy) bool { return bp.Namespace == p.Namespace && bp.Name == p.Name })
	if i < 0 {
		return "", fmt.Errorf("policy %s/%s is not in the rollout of group %s", p.Namespace, p.Name, group)
	}
	base := bs.Policies[i].Baseline
	if base == nil {
		return "", errors.New("the policy was new in this rollout: there is no earlier generation to go back to (delete it instead)")
	}
	var spec map[string]any
	if len(base.Spec) > 0 {
		if err := json.Unmarshal(base.Spec, &spec); err != nil {
			return "", fmt.Errorf("the baseline of generation %d: %w", base.Metadata.Generation, err)
		}
	} else {
		// A rollout stored by an earlier lbplane: the document as it was pushed.
		d, err := manifest.DecodeDocument(base.Document)
		if err != nil {
			return "", fmt.Errorf("the baseline of generation %d: %w", base.Generation, err)
		}
		if spec, err = runtime.DefaultUnstructuredConverter.ToUnstructured(&d.Policy.Spec); err != nil {
			return "", err
		}
	}
	// Read, change, write; again when lbplane (status) or anyone else wrote the policy in between, as kubectl
	// does. The new generation (the spec changes) reaches every Envoy at once.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := c.Dynamic.Resource(policiesGVR).Namespace(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		u.Object["spec"] = spec
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[apiwire.RolloutModeAnnotation] = strconv.FormatInt(u.GetGeneration()+1, 10)
		u.SetAnnotations(ann)
		_, err = c.Dynamic.Resource(policiesGVR).Namespace(p.Namespace).Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%s: the spec of generation %d is the policy's spec again, reaching every Envoy at once", p.Namespace, p.Name, base.Generation), nil
}
