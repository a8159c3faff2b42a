package engine

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// UpdateKubernetes patches the Kubernetes source's list (changed, added, deleted) to what SetKubernetes
// of the whole list gives, translates only the policies it was given, and leaves the list it replaced as it
// was (the translator holds it).
func TestUpdateKubernetesIsSetKubernetesOfThePatchedList(t *testing.T) {
	e := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	services, secrets := map[translate.ServiceRef]translate.ServiceEndpoints{}, map[translate.SecretRef]translate.TLSSecret{}
	a, b, c := policy("a", 8080), policy("b", 8081), policy("c", 8082)
	e.SetKubernetes([]*v1alpha1.LoadBalancerPolicy{a, b, c}, services, secrets)
	held := e.Policies(SourceKubernetes)
	before := slices.Clone(e.sources[SourceKubernetes])

	b2, d := policy("b", 8091), policy("d", 8083)
	translated := e.Translations()
	res := e.UpdateKubernetes([]*v1alpha1.LoadBalancerPolicy{b2, d}, []objkey.Key{objkey.Of(a)}, services, secrets, translate.ChangedRefs{})
	if n := e.Translations() - translated; n != 2 {
		t.Errorf("an update of two policies translated %d", n)
	}
	if !slices.Equal(held, before) {
		t.Error("the list replaced was modified")
	}
	for _, k := range []string{"b", "c", "d"} {
		if res.Policies.Of(objkey.Key{Namespace: "default", Name: k}) == nil {
			t.Errorf("policy %s missing after the update", k)
		}
	}
	if res.Policies.Of(objkey.Of(a)) != nil {
		t.Error("the deleted policy is still there")
	}
	got := e.Policies(SourceKubernetes)
	want := map[*v1alpha1.LoadBalancerPolicy]bool{b2: true, c: true, d: true}
	if len(got) != len(want) {
		t.Fatalf("%d policies held, want %d", len(got), len(want))
	}
	for _, p := range got {
		if !want[p] {
			t.Errorf("policy %s held under another pointer than the one given", p.Name)
		}
	}
	fresh := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	full := fresh.SetKubernetes(got, services, secrets)
	if len(full.IR.Groups) != len(res.IR.Groups) {
		t.Fatalf("%d groups after the update, %d from the whole list", len(res.IR.Groups), len(full.IR.Groups))
	}
	for name, g := range full.IR.Groups {
		var ports, gotPorts []uint32
		for _, l := range g.Listeners {
			ports = append(ports, l.Port)
		}
		for _, l := range res.IR.Groups[name].Listeners {
			gotPorts = append(gotPorts, l.Port)
		}
		if !slices.Equal(ports, gotPorts) {
			t.Errorf("group %s: listeners on %v after the update, %v from the whole list", name, gotPorts, ports)
		}
	}

	// A list replaced by SetKubernetes is indexed again.
	e.SetKubernetes([]*v1alpha1.LoadBalancerPolicy{c, a}, services, secrets)
	res = e.UpdateKubernetes(nil, []objkey.Key{objkey.Of(c)}, services, secrets, translate.ChangedRefs{})
	if got := e.Policies(SourceKubernetes); len(got) != 1 || got[0] != a || res.Policies.Of(objkey.Of(c)) != nil {
		t.Errorf("after SetKubernetes(c, a) and deleting c: %d policies held", len(got))
	}
}

// An endpoint change of one Service among 1,000 Service-backed policies, passed with the Service it
// changed, translates one policy and hashes only that policy's references, and publishes what the whole
// list gives.
func TestUpdateKubernetesChecksOnlyThePoliciesOfTheChangedService(t *testing.T) {
	e := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	var list []*v1alpha1.LoadBalancerPolicy
	services := map[translate.ServiceRef]translate.ServiceEndpoints{}
	for i := range 1000 {
		p := policy(fmt.Sprintf("p%d", i), 8080)
		p.Spec.Listener.Hostnames = []string{fmt.Sprintf("h%d.example.com", i)}
		p.Spec.Backends[0].Endpoints = nil
		p.Spec.Backends[0].Service = &v1alpha1.ServiceRef{Name: p.Name, Port: 80}
		list = append(list, p)
		services[translate.ServiceRef{Namespace: "default", Name: p.Name, Port: 80}] = translate.ServiceEndpoints{
			Endpoints: []translate.ServiceEndpoint{{Address: "10.0.0.1", Port: 8080, Ready: true}}}
	}
	e.SetKubernetes(list, services, nil)
	next := maps.Clone(services)
	ref := translate.ServiceRef{Namespace: "default", Name: "p500", Port: 80}
	next[ref] = translate.ServiceEndpoints{Endpoints: []translate.ServiceEndpoint{{Address: "10.0.0.2", Port: 8080, Ready: true}}}
	translated, hashed := e.Translations(), e.translator.RefHashes()
	res := e.UpdateKubernetes(nil, nil, next, nil, translate.ChangedRefs{Services: []translate.ServiceRef{ref}})
	if n := e.Translations() - translated; n != 1 {
		t.Errorf("one Service change translated %d policies, want 1", n)
	}
	if n := e.translator.RefHashes() - hashed; n < 1 || n > 3 {
		t.Errorf("one Service change hashed references %d times, want at most 3 (one policy's)", n)
	}
	full := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil))).SetKubernetes(list, next, nil)
	if !reflect.DeepEqual(res.IR, full.IR) {
		t.Error("the IR differs from SetKubernetes of the same list and Services")
	}
}
