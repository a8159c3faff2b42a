package policystatus

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// RejectionSince is the NACK made at since or later that a proxy holds against the policy key ("" when
// none): the rule Compute applies to the Programmed condition.
func RejectionSince(p xdsserver.ProxyStatus, key types.NamespacedName, since time.Time) string {
	return rejectionSince(p, key, since)
}

// Reasons of the Programmed condition during and after a staged rollout, and of RolledBack.
const (
	ReasonRollingOut = "RollingOut"
	ReasonRolledBack = "RolledBack"
	ReasonRolloutOK  = "RolloutSucceeded"
)

// WithRollout puts a rollout's state on a status Compute made: status.rollout, the RolledBack condition,
// and, while the Envoys are split or held on the previous generation, a Programmed condition that says so
// (the Envoys on the previous generation are synced to what they are meant to run, not to this spec).
func WithRollout(st *v1alpha1.LoadBalancerPolicyStatus, r *v1alpha1.RolloutStatus, now metav1.Time) {
	if r == nil {
		return
	}
	st.Rollout = r
	gen := st.ObservedGeneration
	switch r.Phase {
	case v1alpha1.RolloutProgressing, v1alpha1.RolloutPaused:
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgrammed); c != nil && c.Status == metav1.ConditionTrue {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionProgrammed, Status: metav1.ConditionFalse,
				ObservedGeneration: gen, LastTransitionTime: now, Reason: ReasonRollingOut, Message: r.Message})
		}
	case v1alpha1.RolloutRolledBack, v1alpha1.RolloutAborted:
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionProgrammed, Status: metav1.ConditionFalse,
			ObservedGeneration: gen, LastTransitionTime: now, Reason: ReasonRolledBack, Message: "every Envoy runs the previous generation: " + r.Message})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionRolledBack, Status: metav1.ConditionTrue,
			ObservedGeneration: gen, LastTransitionTime: now, Reason: r.Phase, Message: limitMessage(r.Message)})
		notReady(st, now)
		return
	}
	notReady(st, now)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionRolledBack, Status: metav1.ConditionFalse,
		ObservedGeneration: gen, LastTransitionTime: now, Reason: r.Phase, Message: limitMessage(r.Message)})
}

// notReady keeps Ready behind Programmed: a policy a rollout holds back is not Ready either.
func notReady(st *v1alpha1.LoadBalancerPolicyStatus, now metav1.Time) {
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgrammed); c != nil && c.Status != metav1.ConditionTrue {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			ObservedGeneration: st.ObservedGeneration, LastTransitionTime: now, Reason: ReasonNotProgrammed, Message: "the policy is not Programmed: " + c.Reason})
	}
}
