package policystatus

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// TestResolvedEndpointsCountAsEnvoyReportsThem: a host name is one endpoint of the policy but as many as it
// resolves to in Envoy; once every backend is reported, the policy's counts are Envoy's.
func TestResolvedEndpointsCountAsEnvoyReportsThem(t *testing.T) {
	r := &translate.PolicyResult{Key: objkey.Key{Namespace: "ns", Name: "p"}, ProxyGroup: "g", Accepted: true, ResolvedRefs: true,
		Endpoints: 2, HealthyEndpoints: 2, ResolvedByEnvoy: true, Clusters: []string{"ns/p/dns", "ns/p/ip"},
		Backends: []string{"dns", "ip"}}
	health := proxystats.Health{"g": {
		"ns/p/dns": {Endpoints: v1alpha1.BackendEndpointCounts{Total: 3, Healthy: 2}},
		"ns/p/ip":  {Endpoints: v1alpha1.BackendEndpointCounts{Total: 1, Healthy: 1}},
	}}
	st := Compute(r, nil, health, metav1.Now())
	if st.Endpoints.Total != 4 || st.Endpoints.Healthy != 3 {
		t.Errorf("endpoints %+v, want 4 in total and 3 healthy, as the Envoys report them", st.Endpoints)
	}
	delete(health["g"], "ns/p/ip")
	if st := Compute(r, nil, health, metav1.Now()); st.Endpoints.Total != 2 {
		t.Errorf("with a backend not reported yet: endpoints %+v, want the policy's own count", st.Endpoints)
	}
}
