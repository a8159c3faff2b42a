package dashboard

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
)

// A Gateway's policy is listed with what it serves, so that an operator finds it by its Gateway; a
// LoadBalancerPolicy has no gateway field.
func TestGatewayPoliciesSayWhatTheyServe(t *testing.T) {
	s := testServer()
	gw := &v1alpha1.LoadBalancerPolicy{}
	gw.Namespace, gw.Name = "shop", "gateway.web.80.any"
	gw.Annotations = map[string]string{gatewayapi.AnnotationGateway: "shop/web", gatewayapi.AnnotationPort: "80", gatewayapi.AnnotationHostname: "",
		gatewayapi.AnnotationListeners: "http"}
	plain := s.Policies()[0]
	s.Policies = func() []*v1alpha1.LoadBalancerPolicy { return []*v1alpha1.LoadBalancerPolicy{plain, gw} }
	st := s.snapshot(context.Background(), "")
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"gateway":{"gateway":"shop/web","port":80,"hostname":"","listeners":["http"]}`) || strings.Count(string(b), `"gateway":{`) != 1 {
		t.Errorf("state: %s", b)
	}
}
