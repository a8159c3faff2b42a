package apiwire

import (
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
