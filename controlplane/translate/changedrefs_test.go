package translate

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// serviceBacked is contended with Service backends and TLS Secrets drawn from small pools, so that many
// policies share a Service or a Secret.
func serviceBacked(r *rand.Rand, name string, base time.Time) *v1alpha1.LoadBalancerPolicy {
	p := contended(r, name, base)
	if len(p.Spec.Backends) > 0 && r.IntN(4) > 0 {
		p.Spec.Backends[0].Endpoints = nil
		p.Spec.Backends[0].Service = &v1alpha1.ServiceRef{Name: fmt.Sprintf("s%d", r.IntN(4)), Port: int32(80 + r.IntN(2))}
	}
	if t := p.Spec.Listener.TLS; t != nil {
		for i := range t.Certificates {
			if r.IntN(2) == 0 {
				t.Certificates[i].CertificateFile, t.Certificates[i].PrivateKeyFile = "", ""
				t.Certificates[i].SecretName = fmt.Sprintf("tls%d", r.IntN(3))
			}
		}
	}
	return p
}

// The path that is told which Services and Secrets changed gives exactly what the path that checks every
// policy gives, and what a translation from scratch gives, after every step of random sequences of policy
// edits and Service and Secret changes (added, modified, removed).
func TestTranslateChangedMatchesFullTranslation(t *testing.T) {
	files := testFiles(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	goodSecret := TLSSecret{Cert: files["app.crt"].Data, Key: files["app.key"].Data}
	var rechecked, retranslated int64
	for seed := range uint64(25) {
		r := rand.New(rand.NewPCG(seed, 11))
		hinted, full := NewTranslator(), NewTranslator()
		var set []*v1alpha1.LoadBalancerPolicy
		services := map[ServiceRef]ServiceEndpoints{}
		secrets := map[SecretRef]TLSSecret{}
		for step := range 80 {
			var hint ChangedRefs
			switch r.IntN(3) {
			case 0:
				set = randomEdit(r, set, step, func(name string) *v1alpha1.LoadBalancerPolicy { return serviceBacked(r, name, base) })
			case 1:
				// Copy on write, as the Kubernetes source does: the translators hold the previous map.
				services = maps.Clone(services)
				for range 1 + r.IntN(2) {
					ref := ServiceRef{Namespace: []string{"", "a", "b"}[r.IntN(3)], Name: fmt.Sprintf("s%d", r.IntN(4)), Port: int32(80 + r.IntN(2))}
					switch r.IntN(4) {
					case 0:
						delete(services, ref)
					case 1:
						services[ref] = ServiceEndpoints{Err: "no such Service"}
					default:
						services[ref] = ServiceEndpoints{Endpoints: []ServiceEndpoint{{Address: fmt.Sprintf("10.0.0.%d", 1+r.IntN(3)), Port: 8080, Ready: r.IntN(4) > 0}}}
					}
					hint.Services = append(hint.Services, ref)
				}
			default:
				secrets = maps.Clone(secrets)
				ref := SecretRef{Namespace: []string{"", "a", "b"}[r.IntN(3)], Name: fmt.Sprintf("tls%d", r.IntN(3))}
				switch r.IntN(3) {
				case 0:
					delete(secrets, ref)
				case 1:
					secrets[ref] = TLSSecret{Err: "not a kubernetes.io/tls Secret"}
				default:
					secrets[ref] = goodSecret
				}
				hint.Secrets = append(hint.Secrets, ref)
			}
			refs := Refs{Files: files, Services: services, Secrets: secrets}
			runs := hinted.Runs()
			got := hinted.TranslateChanged(slices.Clone(set), refs, hint)
			retranslated += hinted.Runs() - runs
			want := full.Translate(slices.Clone(set), refs)
			scratch := translateAll(set, refs)
			if !reflect.DeepEqual(want.Policies.Map(), scratch.Policies.Map()) || !reflect.DeepEqual(want.IR, scratch.IR) {
				t.Fatalf("seed %d step %d: the full path differs from a translation from scratch", seed, step)
			}
			if !reflect.DeepEqual(got.Policies.Map(), want.Policies.Map()) {
				for k, w := range want.Policies.All() {
					if g := got.Policies.Of(k); !reflect.DeepEqual(g, w) {
						t.Errorf("seed %d step %d: %s:\n got %+v\nwant %+v", seed, step, k, g, w)
					}
				}
				t.Fatalf("seed %d step %d: results differ (%d vs %d)", seed, step, got.Policies.Len(), want.Policies.Len())
			}
			if !reflect.DeepEqual(got.IR, want.IR) {
				t.Fatalf("seed %d step %d: IR differs: %s", seed, step, firstDiff(dump(got.IR), dump(want.IR)))
			}
		}
		rechecked += full.RefHashes() - hinted.RefHashes()
	}
	// The sequences must exercise the path: Service and Secret changes that translate policies again, with
	// fewer hashes than the full path.
	if retranslated == 0 || rechecked <= 0 {
		t.Fatalf("the sequences did not exercise the changed-references path: %d policies translated, %d hashes spared", retranslated, rechecked)
	}
	t.Logf("%d policies translated by the hinted path; %d reference hashes spared", retranslated, rechecked)
}

// One Service change among 10,000 Service-backed policies translates the one policy that references it,
// and hashes the references of that policy only.
func TestTranslateChangedChecksOnlyThePoliciesOfAChangedService(t *testing.T) {
	const n = 10000
	set := make([]*v1alpha1.LoadBalancerPolicy, 0, n)
	services := make(map[ServiceRef]ServiceEndpoints, n)
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		set = append(set, &v1alpha1.LoadBalancerPolicy{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{name + ".example.com"}},
				Backends: []v1alpha1.Backend{{Name: "web", Service: &v1alpha1.ServiceRef{Name: name, Port: 80}}}}})
		services[ServiceRef{Namespace: "shop", Name: name, Port: 80}] = ServiceEndpoints{Endpoints: []ServiceEndpoint{{Address: "10.0.0.1", Port: 8080, Ready: true}}}
	}
	tr := NewTranslator()
	tr.Translate(set, Refs{Services: services})
	next := maps.Clone(services)
	ref := ServiceRef{Namespace: "shop", Name: "s4242", Port: 80}
	next[ref] = ServiceEndpoints{Endpoints: []ServiceEndpoint{{Address: "10.0.0.2", Port: 8080, Ready: true}}}
	runs, hashes := tr.Runs(), tr.RefHashes()
	res := tr.TranslateChanged(set, Refs{Services: next}, ChangedRefs{Services: []ServiceRef{ref}})
	if d := tr.Runs() - runs; d != 1 {
		t.Fatalf("one Service change translated %d policies, want 1", d)
	}
	// The policy's references are hashed to find it changed, again when its fragment is replaced, and once
	// for the new fragment: 3, whatever the number of policies.
	if d := tr.RefHashes() - hashes; d < 1 || d > 3 {
		t.Fatalf("one Service change hashed references %d times, want at most 3 (one policy's)", d)
	}
	if !reflect.DeepEqual(res.IR, translateAll(set, Refs{Services: next}).IR) {
		t.Fatal("IR differs from a translation from scratch")
	}
	// The full path checks every policy: the counter sees the difference.
	full := NewTranslator()
	full.Translate(set, Refs{Services: services})
	hashes = full.RefHashes()
	full.Translate(set, Refs{Services: next})
	if d := full.RefHashes() - hashes; d < n {
		t.Fatalf("the full path hashed references %d times, want at least %d: the counter does not count what it should", d, n)
	}
}
