package serve

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/rollout"
)

func TestKubeMode(t *testing.T) {
	pol := func(gen int64, withRollout bool, mode string) *v1alpha1.LoadBalancerPolicy {
		p := &v1alpha1.LoadBalancerPolicy{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		if withRollout {
			p.Spec.Rollout = &v1alpha1.Rollout{}
		}
		if mode != "" {
			p.Annotations = map[string]string{apiwire.RolloutModeAnnotation: mode}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    *v1alpha1.LoadBalancerPolicy
		def  string
		want string
	}{
		{"no spec.rollout, immediate default", pol(2, false, ""), rollout.ModeImmediate, rollout.ModeImmediate},
		{"no spec.rollout, no default", pol(2, false, ""), "", rollout.ModeImmediate},
		{"no spec.rollout, --rollout-default staged", pol(2, false, ""), rollout.ModeStaged, rollout.ModeStaged},
		{"spec.rollout", pol(2, true, ""), rollout.ModeImmediate, rollout.ModeStaged},
		{"undo: immediate for this generation", pol(5, true, "5"), rollout.ModeStaged, rollout.ModeImmediate},
		{"an undo's annotation kept by a later apply", pol(6, true, "5"), "", rollout.ModeStaged},
	} {
		if got := kubeMode(tc.p, tc.def); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
