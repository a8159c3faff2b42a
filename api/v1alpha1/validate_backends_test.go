package v1alpha1_test

import (
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func TestValidateBackendFeatures(t *testing.T) {
	runCases(t, map[string]validateCase{
		"outlier detection off": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].HealthCheck = &v1alpha1.HealthCheck{Passive: &v1alpha1.PassiveHealthCheck{Disabled: true}}
		}, nil},
		"outlier detection off with a detector": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].HealthCheck = &v1alpha1.HealthCheck{Passive: &v1alpha1.PassiveHealthCheck{Disabled: true, Consecutive5xx: i32(3)}}
		}, []string{`spec.backends[0].healthCheck.passive.disabled: no detector may be set with disabled: true`}},
	})
}
