package manifest

import (
	"strings"
	"testing"
	"unsafe"
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
