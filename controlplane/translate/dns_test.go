package translate_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// TestDNSAnswerChangeTranslatesItsUsersAlone: a changed answer, named to the translator, re-translates the
// policies that resolve that name and no other, and gives what a fresh translation of the same input gives:
// the new addresses as endpoints, a forbidden one (rebinding to loopback) left out and said so.
func TestDNSAnswerChangeTranslatesItsUsersAlone(t *testing.T) {
	var policies []*v1alpha1.LoadBalancerPolicy
	for i := range 50 {
		p := hostedPolicy(fmt.Sprintf("p%d", i), 80, fmt.Sprintf("h%d.example.com", i), 8080)
		p.CreationTimestamp = createdAt(i)
		if i < 3 {
			p.Spec.Backends[0].Endpoints[0].Address = "app.example.test"
		}
		policies = append(policies, p)
	}
	q := translate.DNSQuery{Name: "app.example.test", Family: v1alpha1.DNSV4Preferred}
	answer := func(addrs ...string) map[translate.DNSQuery]translate.DNSAnswer {
		a := translate.DNSAnswer{}
		for _, s := range addrs {
			a.Addrs = append(a.Addrs, netip.MustParseAddr(s))
		}
		return map[translate.DNSQuery]translate.DNSAnswer{q: a}
	}
	tr := translate.NewTranslator()
	refs := translate.Refs{DNS: answer("198.51.100.7")}
	res := tr.Translate(policies, refs)
	before := tr.Runs()
	if r := res.Policies.Of(objkey.Key{Namespace: "default", Name: "p0"}); r == nil || !r.ResolvedRefs || r.Endpoints != 1 || r.ResolvedByEnvoy {
		t.Fatalf("p0 with its name resolved: %+v", r)
	}
	// The name rebinds to loopback beside a new good address.
	refs = translate.Refs{DNS: answer("127.0.0.1", "198.51.100.8")}
	res = tr.TranslateChanged(policies, refs, translate.ChangedRefs{DNS: []translate.DNSQuery{q}})
	if n := tr.Runs() - before; n != 3 {
		t.Errorf("a changed answer translated %d policies, want its 3 users", n)
	}
	fresh := translate.Translate(policies, refs)
	if !reflect.DeepEqual(res.IR, fresh.IR) {
		t.Error("the incremental IR differs from a fresh translation")
	}
	r := res.Policies.Of(objkey.Key{Namespace: "default", Name: "p1"})
	if r.ResolvedRefs || r.ResolvedRefsReason != translate.ReasonForbiddenAddress || !strings.Contains(r.ResolvedRefsMessage, `spec.backends[0].endpoints[0].address: "app.example.test" resolves to 127.0.0.1`) || !r.Accepted {
		t.Errorf("p1 after rebinding: %+v", r)
	}
	for _, c := range res.IR.Groups["default"].Clusters {
		if c.Source.Name != "p1" {
			continue
		}
		if len(c.Endpoints) != 1 || c.Endpoints[0].Address != "198.51.100.8" || c.Endpoints[0].Hostname != "app.example.test" || c.DNS != nil {
			t.Errorf("p1's cluster after rebinding: %+v", c)
		}
	}
	// With loopback re-admitted, the same answer serves both addresses.
	lo := translate.Translate(policies, translate.Refs{DNS: refs.DNS, Reach: reach.Loopback}).Policies.Of(objkey.Key{Namespace: "default", Name: "p1"})
	if !lo.ResolvedRefs || lo.Endpoints != 2 {
		t.Errorf("p1 with loopback allowed: %+v", lo)
	}
}

// TestEnvoyResolutionIsTheOperatorsOptIn: dns.resolver: Envoy is refused unless the server allows it, and
// then builds Envoy's DNS cluster over the names.
func TestEnvoyResolutionIsTheOperatorsOptIn(t *testing.T) {
	p := hostedPolicy("p", 80, "h.example.com", 8080)
	p.Spec.Backends[0].Endpoints[0].Address = "app.example.test"
	p.Spec.Backends[0].DNS = &v1alpha1.BackendDNS{Resolver: v1alpha1.DNSResolverEnvoy}
	k := objkey.Key{Namespace: "default", Name: "p"}
	r := translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, translate.Refs{}).Policies.Of(k)
	if r.Accepted || !strings.Contains(r.AcceptedMessage, "spec.backends[0].dns.resolver:") || !strings.Contains(r.AcceptedMessage, "--allow-envoy-dns") {
		t.Errorf("Envoy resolution without the server's opt-in: %+v", r)
	}
	res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, translate.Refs{Reach: reach.Rules{EnvoyDNS: true}})
	if r := res.Policies.Of(k); !r.Accepted || !r.ResolvedByEnvoy {
		t.Errorf("Envoy resolution with the opt-in: %+v", r)
	}
	if c := res.IR.Groups["default"].Clusters[0]; c.DNS == nil || c.Endpoints[0].Address != "app.example.test" {
		t.Errorf("the cluster Envoy resolves: %+v", c)
	}
}
