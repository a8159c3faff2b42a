package kubetest_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// The CRD's zone rules refuse only what lbplane's validation refuses: zone-aware routing with the
// defaulted algorithm, and zone weights with a hash, are accepted.
func TestAPIServerAcceptsZoneSettings(t *testing.T) {
	c := kubetest.Start(t)
	eps := []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80, Zone: "a"}, {Address: "10.0.0.2", Port: 80, Zone: "b"}}
	for name, lb := range map[string]v1alpha1.LoadBalancing{
		"zone-aware":   {ZoneAware: &v1alpha1.ZoneAware{}},
		"zone-weights": {Algorithm: v1alpha1.AlgorithmMaglev, ZoneWeights: []v1alpha1.ZoneWeight{{Zone: "a", Weight: 8}, {Zone: "b", Weight: 2}}},
	} {
		p := &v1alpha1.LoadBalancerPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP},
				Backends: []v1alpha1.Backend{{Name: "a", Endpoints: eps, BackendSettings: v1alpha1.BackendSettings{LoadBalancing: lb}}},
			},
		}
		if err := c.Client.Create(context.Background(), p); err != nil {
			t.Errorf("%s: a valid policy was refused: %v", name, err)
		}
	}
}
