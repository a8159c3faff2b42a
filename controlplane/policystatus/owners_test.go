package policystatus

import (
	"slices"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// sharedPort is a group where policies ns/a and ns/b share listener http-80, each with its cluster, and
// ns/t has a TCP listener.
func sharedPort() *ir.Config {
	vh := func(name string) *ir.VirtualHost {
		src := ir.Source{Namespace: "ns", Name: name}
		return &ir.VirtualHost{Name: "ns/" + name, Source: src, Domains: []string{name + ".example"},
			Routes: []*ir.Route{{Name: "ns/" + name + "/default", Source: src}}}
	}
	cluster := func(policy, backend string) *ir.Cluster {
		return &ir.Cluster{Name: "ns/" + policy + "/" + backend, Source: ir.Source{Namespace: "ns", Name: policy, Backend: backend}}
	}
	return &ir.Config{Groups: map[string]*ir.Group{"g": {Name: "g",
		Listeners: []*ir.Listener{
			{Name: "http-80", Protocol: ir.HTTP, Port: 80, VirtualHosts: []*ir.VirtualHost{vh("a"), vh("b")},
				TLS: &ir.ListenerTLS{Chains: []ir.TLSChain{{ServerNames: []string{"b.example"}, Secret: "cert-b"}}}},
			{Name: "tcp-90", Protocol: ir.TCP, Port: 90, TCP: &ir.TCPRoute{Clusters: []ir.WeightedCluster{{Name: "ns/t/db"}}}},
		},
		Clusters: []*ir.Cluster{cluster("a", "app"), cluster("b", "app"), cluster("t", "db")},
	}}}
}

func TestOwnersReadTheIRSources(t *testing.T) {
	cfg := sharedPort()
	for name, tc := range map[string]struct {
		typ       string
		resources []string
		msg       string
		want      []string // policies of namespace ns
	}{
		"a cluster is its policy's":           {resource.ClusterType, []string{"ns/a/app"}, "bad", []string{"a"}},
		"endpoints are their cluster's":       {resource.EndpointType, []string{"ns/b/app"}, "bad", []string{"b"}},
		"a shared listener, no vhost named":   {resource.ListenerType, []string{"http-80"}, "cannot bind", []string{"a", "b"}},
		"a shared listener naming one vhost":  {resource.ListenerType, []string{"http-80"}, "virtual host ns/b: duplicate domain", []string{"b"}},
		"a route table naming one route":      {resource.RouteType, []string{"http-80"}, "route ns/a/default: bad regex", []string{"a"}},
		"a TCP listener is its clusters'":     {resource.ListenerType, []string{"tcp-90"}, "bad", []string{"t"}},
		"a certificate is its virtual host's": {resource.SecretType, []string{"cert-b"}, "bad key", []string{"b"}},
		"a resource no policy made":           {resource.ClusterType, []string{"ns/gone/app"}, "bad", nil},
		"a group the IR does not have":        {resource.ClusterType, []string{"ns/a/app"}, "bad", nil},
		"several resources, several policies": {resource.ClusterType, []string{"ns/a/app", "ns/b/app"}, "bad", []string{"a", "b"}},
	} {
		group := "g"
		if name == "a group the IR does not have" {
			group = "other"
		}
		var want []apiwire.PolicyRef
		for _, name := range tc.want {
			want = append(want, apiwire.PolicyRef{Namespace: "ns", Name: name})
		}
		if got := Owners(cfg, group, tc.typ, tc.resources, tc.msg); !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

// Attribution end to end within status: the policies a NACK is put on are unprogrammed, the others not.
func TestNackMarksOnlyThePoliciesItIsPutOn(t *testing.T) {
	cfg := sharedPort()
	now := metav1.Now()
	programmed := func(policy string, p xdsserver.ProxyStatus) metav1.Condition {
		r := &translate.PolicyResult{Key: objkey.Key{Namespace: "ns", Name: policy}, Accepted: true, ResolvedRefs: true, ProxyGroup: "g", Listener: "http-8080"}
		st := Compute(r, []xdsserver.ProxyStatus{p}, nil, now)
		return *meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgrammed)
	}
	nack := func(typ string, resources []string, msg string) xdsserver.ProxyStatus {
		return xdsserver.ProxyStatus{NodeID: "e", Group: "g", State: xdsserver.Nacked, Types: []xdsserver.TypeStatus{{TypeURL: typ,
			Nacked: true, NackMessage: msg, NackedResources: resources, NackedPolicies: Owners(cfg, "g", typ, resources, msg)}}}
	}
	// Policy a's cluster: b is untouched, though b's cluster has the same backend name.
	p := nack(resource.ClusterType, []string{"ns/a/app"}, "Error adding/updating cluster(s) ns/a/app: bad")
	if c := programmed("a", p); c.Reason != ReasonRejected {
		t.Errorf("a: %+v", c)
	}
	if c := programmed("b", p); c.Status != metav1.ConditionTrue {
		t.Errorf("b is marked for a's cluster: %+v", c)
	}
	// The shared listener, rejected whole with a message naming no virtual host: both.
	p = nack(resource.ListenerType, []string{"http-80"}, "Error adding/updating listener(s) http-80: cannot bind")
	for _, policy := range []string{"a", "b"} {
		if c := programmed(policy, p); c.Reason != ReasonRejected {
			t.Errorf("%s, shared listener: %+v", policy, c)
		}
	}
	if c := programmed("t", p); c.Status != metav1.ConditionTrue {
		t.Errorf("t is on another listener: %+v", c)
	}
	// The shared route table, with a message naming a's route: a only.
	p = nack(resource.RouteType, []string{"http-80"}, "route ns/a/default: invalid regex")
	if c := programmed("a", p); c.Reason != ReasonRejected {
		t.Errorf("a, named route: %+v", c)
	}
	if c := programmed("b", p); c.Status != metav1.ConditionTrue {
		t.Errorf("b, another policy's route named: %+v", c)
	}
}
