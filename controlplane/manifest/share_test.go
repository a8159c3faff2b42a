package manifest

import (
	"strings"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// Two documents with the same address, backend name and protocol hold one copy of each; the values are
// those decoded.
func TestDecodeSharesRepeatedStrings(t *testing.T) {
	doc := func(name string) string {
		return "apiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {name: " + name + "}\nspec:\n" +
			"  listener: {address: 10.1.2.3, port: 8080, protocol: HTTP, hostnames: [" + name + ".example.com]}\n" +
			"  backends: [{name: app, endpoints: [{address: 10.9.8.7, port: 80, zone: zone-a}]}]\n"
	}
	docs, err := Decode("t", strings.NewReader(doc("one")+"---\n"+doc("two")))
	if err != nil || len(docs) != 2 {
		t.Fatal(len(docs), err)
	}
	a, b := docs[0].Policy.Spec, docs[1].Policy.Spec
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are not one shared copy", what, x, y)
		}
	}
	same("listener address", a.Listener.Address, b.Listener.Address)
	same("protocol", string(a.Listener.Protocol), string(b.Listener.Protocol))
	same("backend name", a.Backends[0].Name, b.Backends[0].Name)
	same("endpoint address", a.Backends[0].Endpoints[0].Address, b.Backends[0].Endpoints[0].Address)
	same("zone", a.Backends[0].Endpoints[0].Zone, b.Backends[0].Endpoints[0].Zone)
	if a.Listener.Address != "10.1.2.3" || a.Backends[0].Endpoints[0].Address != "10.9.8.7" || a.Listener.Hostnames[0] != "one.example.com" || b.Listener.Hostnames[0] != "two.example.com" {
		t.Errorf("decoded values changed: %+v / %+v", a, b)
	}
}

// A value longer than sharedMaxLen is left as decoded, and the table never grows past sharedMax.
func TestShareBounded(t *testing.T) {
	long := strings.Repeat("x", sharedMaxLen+1)
	if got := share(long); unsafe.StringData(got) != unsafe.StringData(long) {
		t.Error("a long value was replaced")
	}
	for i := range sharedMax + 10 {
		share(strings.Repeat("y", i%sharedMaxLen+1) + string(rune('a'+i%26)) + strings.Repeat("z", i/1000))
	}
	shared.Lock()
	n := len(shared.m)
	shared.Unlock()
	if n > sharedMax {
		t.Errorf("the table holds %d values, more than %d", n, sharedMax)
	}
}

// ShareStrings shares what a policy's status repeats from policy to policy, and its namespace, as the
// Kubernetes source's cache stores each policy.
func TestShareStringsOfStatus(t *testing.T) {
	// Built at run time: each policy holds its own copy of every value before ShareStrings.
	own := func(s string) string { return strings.Clone(s) }
	policy := func() *v1alpha1.LoadBalancerPolicy {
		p := &v1alpha1.LoadBalancerPolicy{}
		p.Namespace = own("team-a")
		p.Status.Algorithm, p.Status.ProxyGroup = v1alpha1.Algorithm(own("RoundRobin")), own("edge")
		p.Status.Conditions = []metav1.Condition{{Type: own("Accepted"), Reason: own("Accepted"), Message: own("the policy is valid and has no conflicts")}}
		p.Status.Backends = []v1alpha1.BackendStatus{{Name: own("app")}}
		ShareStrings(p)
		return p
	}
	a, b := policy(), policy()
	for what, pair := range map[string][2]string{
		"namespace":         {a.Namespace, b.Namespace},
		"algorithm":         {string(a.Status.Algorithm), string(b.Status.Algorithm)},
		"proxy group":       {a.Status.ProxyGroup, b.Status.ProxyGroup},
		"condition type":    {a.Status.Conditions[0].Type, b.Status.Conditions[0].Type},
		"condition reason":  {a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason},
		"condition message": {a.Status.Conditions[0].Message, b.Status.Conditions[0].Message},
		"backend name":      {a.Status.Backends[0].Name, b.Status.Backends[0].Name},
	} {
		if pair[0] != pair[1] || unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
			t.Errorf("%s: %q and %q are not one shared copy", what, pair[0], pair[1])
		}
	}
}
