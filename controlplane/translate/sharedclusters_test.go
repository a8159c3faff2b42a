package translate_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
)

// gatewayPolicy is a policy as the Gateway API translator makes one for a host name: it sends to Service
// gw/web port 80.
func gatewayPolicy(name, host string, created time.Time) *v1alpha1.LoadBalancerPolicy {
	p := pol(name, created)
	p.Namespace = "gw"
	p.Annotations = map[string]string{v1alpha1.AnnotationGateway: "gw/edge"}
	p.Spec.Listener.Hostnames = []string{host}
	p.Spec.Backends = []v1alpha1.Backend{{Name: "web-80", Service: &v1alpha1.ServiceRef{Name: "web", Port: 80}}}
	return p
}

var webRefs = translate.Refs{Services: map[translate.ServiceRef]translate.ServiceEndpoints{
	{Namespace: "gw", Name: "web", Port: 80}: {Endpoints: []translate.ServiceEndpoint{
		{Address: "198.51.100.1", Port: 8080, Ready: true}, {Address: "198.51.100.2", Port: 8080, Ready: true}}},
}}

// serviceClusters lists the group's clusters of Service gw/web, each with the policies that use it.
func serviceClusters(g *ir.Group) []string {
	var out []string
	for _, c := range g.Clusters {
		if !strings.Contains(c.Name, "web") {
			continue
		}
		var users []string
		for _, s := range g.ClusterSources(c) {
			users = append(users, s.Namespace+"/"+s.Name+":"+s.Backend)
		}
		out = append(out, c.Name+" "+strings.Join(users, ","))
	}
	return out
}

// The policies the Gateway API translator makes, one per host name, share one cluster per Service port and
// settings: one health checker and one outlier detector however many routes send to it.
func TestGatewayPoliciesShareTheClusterOfAServicePort(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := gatewayPolicy("a", "a.example", base), gatewayPolicy("b", "b.example", base.Add(time.Second))
	own := gatewayPolicy("own", "own.example", base.Add(2*time.Second))
	own.Annotations = nil // a LoadBalancerPolicy of a user keeps its own clusters
	res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{a, b, own}, webRefs)
	g := res.IR.Groups["default"]
	got := serviceClusters(g)
	if len(got) != 2 || !strings.HasPrefix(got[0], "gw/own/web-80 gw/own:web-80") ||
		!strings.HasPrefix(got[1], "service/gw/web/80/") || !strings.HasSuffix(got[1], " gw/a:web-80,gw/b:web-80") {
		t.Fatalf("clusters of gw/web: %q, want the user policy's own and one shared by a and b", got)
	}
	shared := strings.Fields(got[1])[0]
	for _, k := range []string{"a", "b"} {
		r := res.Policies.Of(objkey.Key{Namespace: "gw", Name: k})
		if !r.Accepted || !slices.Contains(r.Clusters, shared) {
			t.Errorf("policy %s: accepted %v, clusters %v, want %s", k, r.Accepted, r.Clusters, shared)
		}
		if backend, _ := r.BackendOf(shared); backend != "web-80" {
			t.Errorf("policy %s: the shared cluster is backend %q, want web-80", k, backend)
		}
		// What predicts traffic finds the shared cluster as the policy's own, with its endpoints.
		built, err := trafficmodel.Build(res.IR, "gw", k)
		if err != nil {
			t.Fatal(err)
		}
		if built.BackendOf[shared] != "web-80" || len(built.Assignments[shared].GetEndpoints()) == 0 {
			t.Errorf("policy %s's traffic model: backends %v", k, built.BackendOf)
		}
	}
	// Nothing Envoy gets names one of the policies: the cluster does not change when one joins or leaves.
	for _, c := range g.Clusters {
		if c.Name == shared {
			md := xdsbuild.Cluster(c).GetMetadata().GetFilterMetadata()[xdsbuild.MetadataNamespace].GetFields()
			if md["policy"] != nil || md["backend"].GetStringValue() != "web-80" {
				t.Errorf("shared cluster's metadata %v, want the backend alone", md)
			}
		}
	}

	// Other settings make another cluster: b balances least-request.
	b2 := b.DeepCopy()
	b2.Spec.Backends[0].LoadBalancing.Algorithm = v1alpha1.AlgorithmLeastRequest
	got = serviceClusters(translate.Translate([]*v1alpha1.LoadBalancerPolicy{a, b2}, webRefs).IR.Groups["default"])
	if len(got) != 2 || !strings.HasSuffix(got[0], " gw/a:web-80") && !strings.HasSuffix(got[0], " gw/b:web-80") || got[0] == got[1] {
		t.Errorf("with other settings for b: %q, want a cluster for each", got)
	}

	// The operator's endpoint overrides are the policy's own: b then keeps a cluster of its own.
	refs := webRefs
	refs.Overrides = translate.Overrides{objkey.Key{Namespace: "gw", Name: "b"}: {{Endpoint: "198.51.100.1:8080", State: v1alpha1.OverrideDraining}}}
	got = serviceClusters(translate.Translate([]*v1alpha1.LoadBalancerPolicy{a, b}, refs).IR.Groups["default"])
	if len(got) != 2 || !strings.HasPrefix(got[0], "gw/b/web-80 gw/b:web-80") || !strings.HasSuffix(got[1], " gw/a:web-80") {
		t.Errorf("with an override of b's endpoints: %q, want b's own cluster and a's shared one", got)
	}
}

// Policies joining and leaving a shared cluster one at a time (the Translator redoes only what changed) end
// where a translation of the same set from scratch does; the last one to leave takes the cluster with it.
func TestSharedClusterFollowsThePoliciesThatUseIt(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b, c := gatewayPolicy("a", "a.example", base), gatewayPolicy("b", "b.example", base.Add(time.Second)), gatewayPolicy("c", "c.example", base.Add(2*time.Second))
	tr := translate.NewTranslator()
	for _, set := range [][]*v1alpha1.LoadBalancerPolicy{{a}, {a, b}, {a, b, c}, {b, c}, {c}, {}, {a, c}} {
		inc := tr.Translate(set, webRefs)
		full := translate.Translate(set, webRefs)
		var names []string
		for _, p := range set {
			names = append(names, "gw/"+p.Name+":web-80")
		}
		for _, res := range []*translate.Result{inc, full} {
			g := res.IR.Groups["default"]
			var got []string
			if g != nil {
				got = serviceClusters(g)
			}
			switch {
			case len(set) == 0 && len(got) != 0:
				t.Errorf("no policies: clusters %q", got)
			case len(set) > 0 && (len(got) != 1 || !strings.HasSuffix(got[0], " "+strings.Join(names, ","))):
				t.Errorf("policies %v: clusters %q, want one used by each", names, got)
			}
		}
	}
}
