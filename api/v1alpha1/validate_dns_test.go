package v1alpha1_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func TestValidateDNSBackends(t *testing.T) {
	names := func(p *v1alpha1.LoadBalancerPolicy, addrs ...string) {
		p.Spec.Backends[0].Endpoints = nil
		for _, a := range addrs {
			p.Spec.Backends[0].Endpoints = append(p.Spec.Backends[0].Endpoints, v1alpha1.Endpoint{Address: a, Port: 80})
		}
	}
	runCases(t, map[string]validateCase{
		"names, and an address literal among them": {func(p *v1alpha1.LoadBalancerPolicy) { names(p, "app.internal", "10.0.0.9") }, nil},
		"a name that is not DNS": {func(p *v1alpha1.LoadBalancerPolicy) { names(p, "App.Internal") },
			[]string{`spec.backends[0].endpoints[0].address: must be an IP address or a lowercase DNS name, got "App.Internal"`}},
		"dns without a name": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].DNS = &v1alpha1.BackendDNS{RespectTTL: true}
		}, []string{`spec.backends[0].dns: only allowed on a backend with an endpoint address that is a host name`}},
		"unknown resolution and family": {func(p *v1alpha1.LoadBalancerPolicy) {
			names(p, "app.internal")
			p.Spec.Backends[0].DNS = &v1alpha1.BackendDNS{Resolution: "Lazy", LookupFamily: "V5"}
		}, []string{`spec.backends[0].dns.resolution: unsupported value "Lazy"; supported: Strict, Logical`,
			`spec.backends[0].dns.lookupFamily: unsupported value "V5"; supported: V4Preferred, V4, V6, Auto, All`}},
		"refresh too often": {func(p *v1alpha1.LoadBalancerPolicy) {
			names(p, "app.internal")
			p.Spec.Backends[0].DNS = &v1alpha1.BackendDNS{RefreshInterval: &metav1.Duration{Duration: time.Millisecond}}
		}, []string{`spec.backends[0].dns.refreshInterval: must be at least 100ms, got 1ms`}},
		"an IPv4 literal with V6 lookups": {func(p *v1alpha1.LoadBalancerPolicy) {
			names(p, "app.internal", "10.0.0.9")
			p.Spec.Backends[0].DNS = &v1alpha1.BackendDNS{LookupFamily: v1alpha1.DNSV6}
		}, []string{`spec.backends[0].endpoints[1].address: an IPv4 address never resolves with dns.lookupFamily V6`}},
		"logical with two names and zone failover": {func(p *v1alpha1.LoadBalancerPolicy) {
			names(p, "a.example.com", "b.example.com")
			p.Spec.Backends[0].DNS = &v1alpha1.BackendDNS{Resolution: v1alpha1.DNSLogical}
			p.Spec.Backends[0].LoadBalancing.ZoneFailover = []string{"zone-a"}
		}, []string{`spec.backends[0].endpoints: dns.resolution Logical takes exactly one endpoint (the name Envoy connects to), got 2: use Strict, or one backend per name`,
			`spec.backends[0].loadBalancing.zoneFailover: not allowed with dns.resolution Logical: its one endpoint has no other zone to fail over to`}},
		"tls to a name needs no sni": {func(p *v1alpha1.LoadBalancerPolicy) {
			names(p, "api.example.com")
			p.Spec.Backends[0].TLS = &v1alpha1.BackendTLS{CAFile: "ca.crt"}
		}, nil},
		"tls to a name and a literal: the literal needs a hostname": {func(p *v1alpha1.LoadBalancerPolicy) {
			names(p, "api.example.com", "10.0.0.9")
			p.Spec.Backends[0].TLS = &v1alpha1.BackendTLS{CAFile: "ca.crt"}
		}, []string{`spec.backends[0].endpoints[1].hostname: required with tls.autoSNI: it is the name sent and verified`}},
		"session across a DNS backend": {func(p *v1alpha1.LoadBalancerPolicy) {
			names(p, "app.internal")
			p.Spec.Backends = append(p.Spec.Backends, v1alpha1.Backend{Name: "b", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.2", Port: 80}}})
			p.Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}, {Name: "b"}},
				SessionPersistence: &v1alpha1.SessionPersistence{AcrossBackends: true}}}
		}, []string{`spec.routes[0].backends[0]: backend "a" has host-name endpoints: sessionPersistence.acrossBackends cannot merge it with other backends`}},
	})
}

// TestDefaultDNS: a backend with a host name gets the documented DNS defaults, and TLS to it sends the
// name as SNI.
func TestDefaultDNS(t *testing.T) {
	p := valid()
	p.Spec.Backends[0].Endpoints[0].Address = "api.example.com"
	p.Spec.Backends[0].TLS = &v1alpha1.BackendTLS{CAFile: "ca.crt"}
	p.Spec.Backends = append(p.Spec.Backends, v1alpha1.Backend{Name: "ip", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.2", Port: 80}}})
	v1alpha1.Default(p)
	d := p.Spec.Backends[0].DNS
	if d == nil || d.Resolution != v1alpha1.DNSStrict || d.LookupFamily != v1alpha1.DNSV4Preferred ||
		d.RefreshInterval.Duration != v1alpha1.DefaultDNSRefreshInterval || d.RespectTTL {
		t.Errorf("defaults of a DNS backend: %+v", d)
	}
	if !p.Spec.Backends[0].TLS.AutoSNI {
		t.Error("TLS to a DNS backend without sni: autoSNI not defaulted")
	}
	if p.Spec.Backends[1].DNS != nil {
		t.Errorf("a backend of IP addresses got DNS settings: %+v", p.Spec.Backends[1].DNS)
	}
}
