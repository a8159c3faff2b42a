package kubetest_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/kubetest"
)

func TestAPIServerServesTheCRDWithValidation(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	p := &v1alpha1.LoadBalancerPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "ok", Namespace: "default"},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP},
			Backends: []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}}},
		},
	}
	if err := c.Client.Create(ctx, p); err != nil {
		t.Fatalf("a valid policy was refused: %v", err)
	}
	bad := p.DeepCopy()
	bad.ObjectMeta = metav1.ObjectMeta{Name: "bad", Namespace: "default"}
	bad.Spec.Backends[0].LoadBalancing.Algorithm = "RoundRobn"
	err := c.Client.Create(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "spec.backends[0].loadBalancing.algorithm") || !strings.Contains(err.Error(), "RoundRobn") {
		t.Fatalf("the API server accepted or badly refused a misspelled algorithm: %v", err)
	}
	t.Logf("refused: %v", err)
}
