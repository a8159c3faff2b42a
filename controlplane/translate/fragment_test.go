package translate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/tenancy"
	"github.com/lbplane/lbplane/internal/tools"
)

// contended returns a policy drawn from small pools of ports, protocols, addresses, hostnames and
// certificates, so that random sets are full of conflicts of every kind.
func contended(r *rand.Rand, name string, base time.Time) *v1alpha1.LoadBalancerPolicy {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	p := &v1alpha1.LoadBalancerPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pick("", "a", "b"), Generation: int64(1 + r.IntN(3))},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			ProxyGroup: pick("", "g2"),
			Listener:   v1alpha1.Listener{Port: int32(8000 + r.IntN(3)), Protocol: v1alpha1.Protocol(pick("HTTP", "HTTP", "HTTPS", "TCP")), Address: pick("", "", "127.0.0.1")},
			Backends:   []v1alpha1.Backend{{Name: "be", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: int32(80 + r.IntN(2))}}}},
		},
	}
	if r.IntN(4) > 0 {
		p.CreationTimestamp = metav1.NewTime(base.Add(time.Duration(r.IntN(5)) * time.Second))
	}
	for range r.IntN(3) * boolInt(p.Spec.Listener.Protocol != v1alpha1.ProtocolTCP) {
		p.Spec.Listener.Hostnames = append(p.Spec.Listener.Hostnames, pick("a.example.com", "b.example.com", "c.example.com", "*.example.com"))
	}
	p.Spec.Listener.Hostnames = slices.Compact(p.Spec.Listener.Hostnames)
	if p.Spec.Listener.Protocol == v1alpha1.ProtocolHTTPS {
		t := &v1alpha1.ListenerTLS{MinVersion: v1alpha1.TLSVersion(pick("", "TLSv1.3"))}
		for i := range 1 + r.IntN(2) {
			c := v1alpha1.Certificate{CertificateFile: pick("app.crt", "missing.crt"), PrivateKeyFile: "app.key"}
			if i > 0 || r.IntN(2) == 0 {
				c.Hostnames = p.Spec.Listener.Hostnames[:min(len(p.Spec.Listener.Hostnames), i)]
			}
			t.Certificates = append(t.Certificates, c)
		}
		p.Spec.Listener.TLS = t
	}
	if r.IntN(10) == 0 {
		p.Spec.Backends = nil // invalid
	}
	return p
}

// testTenancy delegates names and a port of contended's pools: namespace a may use every name under
// example.com on 8000 and 8001, b may use b.example.com on every port and all of port 8002; default, not
// listed, may use the rest.
var testTenancy = func() tenancy.Rules {
	r, err := tenancy.New(tenancy.File{Delegations: []tenancy.Delegation{
		{Namespace: "a", Ports: []int32{8000, 8001}, Hostnames: []string{"*.example.com"}},
		{Namespace: "b", Hostnames: []string{"b.example.com"}},
		{Namespace: "b", Ports: []int32{8002}},
	}})
	if err != nil {
		panic(err)
	}
	return r
}()

func testFiles(t *testing.T) Files {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(tools.RepoRoot(), "examples", "certs", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return Files{"app.crt": {Data: read("app.example.com.crt")}, "app.key": {Data: read("app.example.com.key")},
		"missing.crt": {Err: "no such file"}}
}

// The incremental translator gives exactly what a translation from scratch gives, after every change of a
// random sequence of adds, edits and removals.
func TestTranslatorMatchesFullTranslation(t *testing.T) {
	files := testFiles(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := map[string]int{}
	defer func() {
		// The sequences must exercise what they are meant to.
		for _, what := range []string{ReasonConflicted, ReasonHostnameConflict, ReasonNotAllowed, ReasonAccepted, ReasonInvalid, ReasonInvalidRef, "tls"} {
			if seen[what] == 0 {
				t.Errorf("no %s result in any sequence", what)
			}
		}
		t.Logf("results seen: %v", seen)
	}()
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 7))
		tr := NewTranslator()
		var set []*v1alpha1.LoadBalancerPolicy
		for step := range 60 {
			set = randomEdit(r, set, step, func(name string) *v1alpha1.LoadBalancerPolicy { return contended(r, name, base) })
			refs := Refs{Files: files}
			if seed%2 == 1 {
				// Odd seeds under delegations: names carved out of others' and refused to other namespaces.
				refs.Tenancy = testTenancy
			}
			if step%17 == 16 {
				// The files change: a policy that read them is translated again.
				files = cloneFiles(files)
				files["missing.crt"] = files["app.crt"]
				refs.Files = files
			}
			got := tr.Translate(slices.Clone(set), refs)
			want := translateAll(set, refs)
			if !reflect.DeepEqual(got.Policies.Map(), want.Policies.Map()) {
				for k, w := range want.Policies.All() {
					if g := got.Policies.Of(k); !reflect.DeepEqual(g, w) {
						t.Errorf("seed %d step %d: %s:\n got %+v\nwant %+v", seed, step, k, g, w)
					}
				}
				t.Fatalf("seed %d step %d: results differ (%d vs %d)", seed, step, got.Policies.Len(), want.Policies.Len())
			}
			for _, pr := range want.Policies.All() {
				seen[pr.AcceptedReason]++
				if pr.ResolvedRefsReason == ReasonInvalidRef {
					seen[ReasonInvalidRef]++
				}
			}
			for _, g := range want.IR.Groups {
				for _, l := range g.Listeners {
					if l.TLS != nil && len(l.TLS.Chains) > 1 {
						seen["tls"]++
					}
				}
			}
			if !reflect.DeepEqual(got.IR, want.IR) {
				t.Fatalf("seed %d step %d: IR differs: %s\n%s\n%s", seed, step, firstDiff(dump(got.IR), dump(want.IR)), vhostNames(got.IR), vhostNames(want.IR))
			}
		}
	}
}

func cloneFiles(f Files) Files {
	out := Files{}
	for k, v := range f {
		out[k] = v
	}
	return out
}

func dedupe(set []*v1alpha1.LoadBalancerPolicy) []*v1alpha1.LoadBalancerPolicy {
	seen := map[objkey.Key]bool{}
	return slices.DeleteFunc(set, func(p *v1alpha1.LoadBalancerPolicy) bool {
		k := objkey.Of(p)
		if seen[k] {
			return true
		}
		seen[k] = true
		return false
	})
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

// firstDiff shows where two dumps part.
func vhostNames(c *ir.Config) string {
	var out []string
	for name, g := range c.Groups {
		for _, l := range g.Listeners {
			var vs []string
			for _, v := range l.VirtualHosts {
				vs = append(vs, fmt.Sprint(v.Name, v.Domains))
			}
			out = append(out, fmt.Sprintf("%s/%s: %v", name, l.Name, vs))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			lo, hi := max(i-8, 0), min(i+4, len(al), len(bl))
			return fmt.Sprintf("line %d:\n got %s\nwant %s", i, strings.Join(al[lo:hi], "\n"), strings.Join(bl[lo:hi], "\n"))
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(al), len(bl))
}

// One change among many translates one policy.
func TestTranslatorTranslatesOnlyWhatChanged(t *testing.T) {
	var set []*v1alpha1.LoadBalancerPolicy
	for i := range 300 {
		p := &v1alpha1.LoadBalancerPolicy{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind}, ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{fmt.Sprintf("h%d.example.com", i)}},
				Backends: []v1alpha1.Backend{{Name: "be", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}}}}}
		set = append(set, p)
	}
	tr := NewTranslator()
	tr.Translate(set, Refs{})
	if n := tr.Runs(); n != 300 {
		t.Fatalf("first translation ran %d times, want 300", n)
	}
	next := slices.Clone(set)
	c := set[150].DeepCopy()
	c.Spec.Backends[0].Endpoints[0].Port = 81
	next[150] = c
	res := tr.Translate(next, Refs{})
	if n := tr.Runs(); n != 301 {
		t.Fatalf("one change ran the translator %d times, want 1", n-300)
	}
	if !reflect.DeepEqual(res.IR, translateAll(next, Refs{}).IR) {
		t.Fatal("IR differs from a translation from scratch")
	}
	// The same content under a new pointer is not translated again.
	again := slices.Clone(next)
	again[7] = next[7].DeepCopy()
	tr.Translate(again, Refs{})
	if n := tr.Runs(); n != 301 {
		t.Fatalf("an equal copy ran the translator %d times, want 0", n-301)
	}
}

// An endpoint change of one Service translates the one policy that references it.
func TestTranslatorRetranslatesOnlyThePolicyOfAChangedService(t *testing.T) {
	var set []*v1alpha1.LoadBalancerPolicy
	services := map[ServiceRef]ServiceEndpoints{}
	for i := range 200 {
		name := fmt.Sprintf("s%d", i)
		p := &v1alpha1.LoadBalancerPolicy{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{name + ".example.com"}},
				Backends: []v1alpha1.Backend{{Name: "web", Service: &v1alpha1.ServiceRef{Name: name, Port: 80}}}}}
		set = append(set, p)
		services[ServiceRef{Namespace: "shop", Name: name, Port: 80}] = ServiceEndpoints{Endpoints: []ServiceEndpoint{{Address: "10.0.0.1", Port: 8080, Ready: true}}}
	}
	tr := NewTranslator()
	tr.Translate(set, Refs{Services: services})
	next := map[ServiceRef]ServiceEndpoints{}
	for k, v := range services {
		next[k] = v
	}
	next[ServiceRef{Namespace: "shop", Name: "s42", Port: 80}] = ServiceEndpoints{Endpoints: []ServiceEndpoint{{Address: "10.0.0.2", Port: 8080, Ready: true}}}
	before := tr.Runs()
	res := tr.Translate(set, Refs{Services: next})
	if n := tr.Runs() - before; n != 1 {
		t.Fatalf("one Service change translated %d policies, want 1", n)
	}
	if !reflect.DeepEqual(res.IR, translateAll(set, Refs{Services: next}).IR) {
		t.Fatal("IR differs from a translation from scratch")
	}
}

// randomEdit deletes, replaces (an edit: a new object under the same name) or adds one policy of set, made
// by mk, as a sequence of changes would.
func randomEdit(r *rand.Rand, set []*v1alpha1.LoadBalancerPolicy, step int, mk func(name string) *v1alpha1.LoadBalancerPolicy) []*v1alpha1.LoadBalancerPolicy {
	switch op := r.IntN(4); {
	case op == 0 && len(set) > 0:
		i := r.IntN(len(set))
		set = slices.Delete(set, i, i+1)
	case op == 1 && len(set) > 0:
		i := r.IntN(len(set))
		old := set[i]
		set[i] = mk(set[i].Name)
		set[i].Namespace = old.Namespace
	default:
		set = append(set, mk(fmt.Sprintf("p%d", step)))
	}
	return dedupe(set)
}
