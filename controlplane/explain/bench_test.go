package explain

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// BenchmarkExplain5000 explains one policy among 5,000 on one port (each with its own host name, as the
// push benchmark stores them) the way the push API does: from the engine's published resources, decoded
// one by one, with nothing built again.
func BenchmarkExplain5000(b *testing.B) {
	const n = 5000
	policies := make([]*v1alpha1.LoadBalancerPolicy, n)
	for i := range policies {
		policies[i] = &v1alpha1.LoadBalancerPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%05d", i), Namespace: "default"},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{fmt.Sprintf("p-%05d.example.com", i)}},
				Backends: []v1alpha1.Backend{{Name: "app", Endpoints: []v1alpha1.Endpoint{{Address: "192.0.2.1", Port: 80}, {Address: "192.0.2.2", Port: 80}}}},
			},
		}
	}
	e := engine.New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.Set(engine.SourceStore, policies)
	res, _ := e.Result()
	p := policies[n/2]
	pr := res.Policies.Of(objkey.Of(p))
	if pr == nil || !pr.Accepted {
		b.Fatalf("policy not translated: %+v", pr)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		x, err := Policy(p, pr, res, e.Resource)
		if err != nil {
			b.Fatal(err)
		}
		if len(x.Resources) < 3 {
			b.Fatalf("resources %v", x.Resources)
		}
	}
}

// TestExplainReadsThePublishedResources: explaining from the engine's state finds the policy's listener,
// its own route table (the port is served as scoped routes), its cluster and endpoints, and every field
// resolves, as explaining from the IR does.
func TestExplainReadsThePublishedResources(t *testing.T) {
	const n = 300
	var policies []*v1alpha1.LoadBalancerPolicy
	for i := range n {
		policies = append(policies, &v1alpha1.LoadBalancerPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%03d", i), Namespace: "default"},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{fmt.Sprintf("p-%03d.example.com", i)}},
				Backends: []v1alpha1.Backend{{Name: "app", Endpoints: []v1alpha1.Endpoint{{Address: "192.0.2.1", Port: 80, Weight: ptr(int32(3))}}}},
			},
		})
	}
	e := engine.New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.Set(engine.SourceStore, policies)
	res, _ := e.Result()
	p := policies[7]
	served, err := Policy(p, res.Policies.Of(objkey.Of(p)), res, e.Resource)
	if err != nil {
		t.Fatal(err)
	}
	offline, err := Policy(p, res.Policies.Of(objkey.Of(p)), res, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(served.Resources) != 4 || fmt.Sprint(served.Resources) != fmt.Sprint(offline.Resources) {
		t.Errorf("resources served %v, offline %v", served.Resources, offline.Resources)
	}
	weight := false
	for i, f := range served.Fields {
		if f.EnvoyValue == "(not found)" {
			t.Errorf("%s: not found in %v", f.Policy, f.Resource)
		}
		if f.Policy == "spec.backends[0].endpoints[0].weight" && f.EnvoyValue == "3" {
			weight = true
		}
		if o := offline.Fields[i]; o.EnvoyValue != f.EnvoyValue || o.Envoy != f.Envoy {
			t.Errorf("%s: served %q at %s, offline %q at %s", f.Policy, f.EnvoyValue, f.Envoy, o.EnvoyValue, o.Envoy)
		}
	}
	if !weight {
		t.Errorf("the endpoint weight is not read from the published assignment: %+v", served.Fields)
	}
}

func ptr[T any](v T) *T { return &v }
