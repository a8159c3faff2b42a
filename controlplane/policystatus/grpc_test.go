package policystatus

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// The findings for gRPC clients show only while the group has one; what they refuse keeps the policy from
// being Programmed, as a NACK would.
func TestGRPCFindingsShowWithGRPCClients(t *testing.T) {
	envoyOnly := "retry-without-budget: spec.routes[0].retry: x"
	refused := "grpc-refused: spec.backends[0].tls: gRPC clients take upstream TLS as certificate provider instances"
	ignored := "grpc-ignored: spec.backends[0].healthCheck.active: gRPC clients do not probe"
	r := &translate.PolicyResult{Key: objkey.Key{Namespace: "ns", Name: "p"}, Accepted: true, ProxyGroup: "g", Listener: "http-8080",
		Warnings: []string{envoyOnly, refused, ignored}}
	envoy := xdsserver.ProxyStatus{NodeID: "e", Group: "g", State: xdsserver.Synced, Client: xdscache.ClientEnvoy}
	grpcClient := xdsserver.ProxyStatus{NodeID: "c", Group: "g", State: xdsserver.Synced, Client: xdscache.ClientGRPC}
	otherGroup := grpcClient
	otherGroup.Group = "h"
	now := metav1.Now()

	st := Compute(r, []xdsserver.ProxyStatus{envoy, otherGroup}, nil, now)
	if !slices.Equal(st.Warnings, []string{envoyOnly}) {
		t.Errorf("Envoys only: warnings %v", st.Warnings)
	}
	if c := meta.FindStatusCondition(st.Conditions, "Programmed"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Envoys only: %+v", c)
	}
	st = Compute(r, []xdsserver.ProxyStatus{envoy, grpcClient}, nil, now)
	if !slices.Equal(st.Warnings, r.Warnings) {
		t.Errorf("with a gRPC client: warnings %v", st.Warnings)
	}
	c := meta.FindStatusCondition(st.Conditions, "Programmed")
	if c == nil || c.Reason != ReasonRejected || !strings.Contains(c.Message, `gRPC clients of group "g"`) || !strings.Contains(c.Message, "spec.backends[0].tls") {
		t.Errorf("with a gRPC client: %+v", c)
	}
}
