package translate_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// endpointsOf lists a cluster's endpoints as "address:port" with " draining" for a draining one.
func endpointsOf(res *translate.Result, cluster string) []string {
	var out []string
	for _, c := range res.IR.Groups["default"].Clusters {
		if c.Name != cluster {
			continue
		}
		for _, e := range c.Endpoints {
			s := fmt.Sprintf("%s:%d", e.Address, e.Port)
			if e.Draining {
				s += " draining"
			}
			out = append(out, s)
		}
	}
	return out
}

func overridePolicy() *v1alpha1.LoadBalancerPolicy {
	p := pol("ovr", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p.Spec.Backends = []v1alpha1.Backend{
		{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}, {Address: "10.0.0.2", Port: 80},
			{Address: "10.0.0.3", Port: 80, State: v1alpha1.EndpointDraining}, {Address: "10.0.0.4", Port: 80}, {Address: "10.0.0.4", Port: 81}}},
		{Name: "b", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}},
	}
	return p
}

// A Draining override drains the endpoint, a Maintenance one leaves it out of Envoy's load assignment, the
// stronger of the spec's state and the overrides applies, an address alone covers its every port, a backend
// named limits it, and the status counts what each applies to (0 for one that matches nothing now).
func TestEndpointOverridesReachTheIR(t *testing.T) {
	p := overridePolicy()
	since := metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	ovs := []v1alpha1.EndpointOverride{
		{Endpoint: "10.0.0.1:80", Backend: "a", State: v1alpha1.OverrideDraining, Since: since},
		{Endpoint: "10.0.0.3:80", State: v1alpha1.OverrideMaintenance, Since: since},
		{Endpoint: "10.0.0.4", State: v1alpha1.OverrideDraining, Since: since},
		{Endpoint: "10.0.0.9:80", State: v1alpha1.OverrideMaintenance, Since: since},
	}
	k := objkey.Of(p)
	res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, translate.Refs{Overrides: translate.Overrides{k: ovs}})
	if got, want := endpointsOf(res, "default/ovr/a"), []string{"10.0.0.1:80 draining", "10.0.0.2:80", "10.0.0.4:80 draining", "10.0.0.4:81 draining"}; !slices.Equal(got, want) {
		t.Errorf("backend a: %v, want %v", got, want)
	}
	if got, want := endpointsOf(res, "default/ovr/b"), []string{"10.0.0.1:80"}; !slices.Equal(got, want) {
		t.Errorf("backend b (the drain names backend a): %v, want %v", got, want)
	}
	r := res.Policies.Of(k)
	var counts []int32
	for _, o := range r.EndpointOverrides() {
		counts = append(counts, o.Endpoints)
	}
	if !slices.Equal(counts, []int32{1, 1, 2, 0}) || r.EndpointOverrides()[1].Since != since {
		t.Errorf("status of the overrides: %+v", r.EndpointOverrides())
	}
	// Six endpoints, one under maintenance still counted; healthy leaves out the draining and the maintained.
	if r.Endpoints != 6 || r.HealthyEndpoints != 2 {
		t.Errorf("endpoints %d healthy %d, want 6 and 2", r.Endpoints, r.HealthyEndpoints)
	}
	// Without overrides the policy is as its spec says, and its status lists none.
	plain := translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, translate.Refs{})
	if got, want := endpointsOf(plain, "default/ovr/a"), []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80 draining", "10.0.0.4:80", "10.0.0.4:81"}; !slices.Equal(got, want) ||
		plain.Policies.Of(k).EndpointOverrides() != nil {
		t.Errorf("without overrides: %v, overrides %v", got, plain.Policies.Of(k).EndpointOverrides())
	}
}

// Every endpoint of a backend under maintenance leaves an empty load assignment, which the IR accepts (Envoy
// answers 503, no healthy upstream).
func TestMaintenanceOfEveryEndpointAndOfAHostName(t *testing.T) {
	p := pol("all", time.Now())
	p.Spec.Backends[0].Endpoints = []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}
	k := objkey.Of(p)
	res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, translate.Refs{Overrides: translate.Overrides{
		k: {{Endpoint: "10.0.0.1", State: v1alpha1.OverrideMaintenance}}}})
	if got := endpointsOf(res, "default/all/a"); len(got) != 0 {
		t.Errorf("endpoints %v, want none", got)
	}
	if err := res.IR.Validate(); err != nil {
		t.Errorf("IR: %v", err)
	}
	if !res.Policies.Of(k).Accepted {
		t.Errorf("not accepted: %s", res.Policies.Of(k).AcceptedMessage)
	}
}

// A change of one policy's overrides translates that policy alone again.
func TestAnOverrideChangeTranslatesItsPolicyAlone(t *testing.T) {
	var ps []*v1alpha1.LoadBalancerPolicy
	for i := range 50 {
		p := pol(fmt.Sprintf("p%02d", i), time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
		p.Spec.Listener.Port = int32(1000 + i)
		ps = append(ps, p)
	}
	tr := translate.NewTranslator()
	tr.Translate(ps, translate.Refs{})
	before := tr.Runs()
	k := objkey.Of(ps[7])
	drained := translate.Overrides{k: {{Endpoint: "10.0.0.1:80", State: v1alpha1.OverrideDraining}}}
	res := tr.Translate(ps, translate.Refs{Overrides: drained})
	if n := tr.Runs() - before; n != 1 {
		t.Errorf("a drain translated %d policies, want 1", n)
	}
	if got := endpointsOf(res, "default/p07/a"); !slices.Equal(got, []string{"10.0.0.1:80 draining"}) {
		t.Errorf("drained: %v", got)
	}
	// The same map again: nothing to do.
	before = tr.Runs()
	tr.Translate(ps, translate.Refs{Overrides: drained})
	if n := tr.Runs() - before; n != 0 {
		t.Errorf("the same overrides translated %d policies", n)
	}
	// Ready: the override is gone, the policy is translated again and serves the endpoint.
	before = tr.Runs()
	res = tr.Translate(ps, translate.Refs{Overrides: translate.Overrides{}})
	if n := tr.Runs() - before; n != 1 {
		t.Errorf("ready translated %d policies, want 1", n)
	}
	if got := endpointsOf(res, "default/p07/a"); !slices.Equal(got, []string{"10.0.0.1:80"}) {
		t.Errorf("after ready: %v", got)
	}
	// The result is what a fresh translation of the same input gives.
	fresh := translate.Translate(ps, translate.Refs{Overrides: drained})
	inc := tr.Translate(ps, translate.Refs{Overrides: drained})
	if a, b := endpointsOf(fresh, "default/p07/a"), endpointsOf(inc, "default/p07/a"); !slices.Equal(a, b) {
		t.Errorf("incremental %v, fresh %v", b, a)
	}
}
