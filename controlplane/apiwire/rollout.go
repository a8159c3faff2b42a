package apiwire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// RolloutResult is where a policy's staged rollout stands (GET /v1/policies/{ns}/{name}/rollout, and the
// answer of its actions): status.rollout, with the policy's generation and conditions.
type RolloutResult struct {
	Policy     string                 `json:"policy"`
	Generation int64                  `json:"generation"`
	Rollout    v1alpha1.RolloutStatus `json:"rollout"`
	Conditions []metav1.Condition     `json:"conditions,omitempty"`
}

// In Kubernetes mode a staged rollout's state, with the baseline spec the API server no longer holds, is
// kept in one ConfigMap per proxy group in the leader election's namespace, named RolloutConfigMapName
// (RolloutLabel set, the group in RolloutGroupKey, the state in RolloutStateKey). lbplane writes it; lbctl
// rollout undo reads the baseline from it (RolloutBaselines).
const (
	RolloutLabel    = "lbplane.io/rollout"
	RolloutGroupKey = "group"
	RolloutStateKey = "state"
)

// RolloutConfigMapName is the ConfigMap of a proxy group's rollout (a hash: a group name need not be a valid
// object name).
func RolloutConfigMapName(group string) string {
	sum := sha256.Sum256([]byte(group))
	return "lbplane-rollout-" + hex.EncodeToString(sum[:8])
}

// Annotations steering a rollout in Kubernetes mode, kubectl-style (lbctl rollout sets them): paused ("true")
// holds it, as a Deployment's spec.paused; abort, set to the candidate generation, rolls it back; a
// generation whose rollout-mode annotation names it reaches every Envoy at once (lbctl rollout undo).
const (
	PausedAnnotation      = "lbplane.io/rollout-paused"
	AbortAnnotation       = "lbplane.io/rollout-abort"
	RolloutModeAnnotation = "lbplane.io/rollout-mode"
)

// RolloutBaselines is the part of a stored rollout that lbctl rollout undo reads: each policy's baseline.
// Package rollout writes the whole state.
type RolloutBaselines struct {
	Policies []RolloutBaselinePolicy `json:"policies"`
}

// RolloutBaselinePolicy is one policy of a stored rollout; Baseline is nil when the policy was new in it.
type RolloutBaselinePolicy struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Baseline  *RolloutBaseline `json:"baseline,omitempty"`
}

// RolloutBaseline is a policy as it was: the policy object, of which lbctl reads the generation and the spec.
// Document and Generation are the form earlier versions of lbplane stored (the document as pushed, and the
// generation beside it).
type RolloutBaseline struct {
	Metadata struct {
		Generation int64 `json:"generation"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec,omitempty"`

	Document   []byte `json:"document,omitempty"`
	Generation int64  `json:"generation,omitempty"`
}

// NoRollout is the rollout status of a policy with none under way (settled: never staged, undone, or
// ended long enough ago to be forgotten): no phase, and generation gen as candidate and baseline.
func NoRollout(gen int64) v1alpha1.RolloutStatus {
	return v1alpha1.RolloutStatus{CandidateGeneration: gen, BaselineGeneration: gen,
		Message: fmt.Sprintf("no staged rollout under way: generation %d is not staged", gen)}
}
