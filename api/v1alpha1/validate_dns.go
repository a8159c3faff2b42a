package v1alpha1

import (
	"net"
	"time"
)

var (
	supportedDNSResolutions    = []DNSResolution{DNSStrict, DNSLogical}
	supportedDNSResolvers      = []DNSResolver{DNSResolverLbplane, DNSResolverEnvoy}
	supportedDNSLookupFamilies = []DNSLookupFamily{DNSV4Preferred, DNSV4, DNSV6, DNSAuto, DNSAll}
)

// MinDNSRefreshInterval keeps a typo such as "1ms" from sending each Envoy's resolver a query per name every
// millisecond.
const MinDNSRefreshInterval = 100 * time.Millisecond

// dnsBackends validates host-name endpoints and the dns settings of each backend.
func (v *validator) dnsBackends(spec path, s *LoadBalancerPolicySpec) {
	dnsBackend := map[string]bool{}
	for i := range s.Backends {
		b := &s.Backends[i]
		bp := spec.child("backends").index(i)
		if b.UsesDNS() {
			dnsBackend[b.Name] = true
		}
		v.backendDNS(bp, b)
	}
	// A session across backends merges them into one cluster, which is either resolved by Envoy or fed by
	// lbplane, not both.
	for i, r := range s.Routes {
		if r.SessionPersistence == nil || !r.SessionPersistence.AcrossBackends || len(r.Backends) < 2 {
			continue
		}
		for j, ref := range r.Backends {
			if dnsBackend[ref.Name] {
				v.add(spec.child("routes").index(i).child("backends").index(j),
					"backend %q has host-name endpoints: sessionPersistence.acrossBackends cannot merge it with other backends", ref.Name)
			}
		}
	}
}

func (v *validator) backendDNS(bp path, b *Backend) {
	d := b.DNS
	dp := bp.child("dns")
	if d == nil {
		return
	}
	if !b.UsesDNS() {
		v.add(dp, "only allowed on a backend with an endpoint address that is a host name")
		return
	}
	if d.Resolver != "" && !oneOf(d.Resolver, supportedDNSResolvers) {
		v.add(dp.child("resolver"), "%s", unsupported(d.Resolver, supportedDNSResolvers))
	}
	if !oneOf(d.Resolution, supportedDNSResolutions) {
		v.add(dp.child("resolution"), "%s", unsupported(d.Resolution, supportedDNSResolutions))
	}
	if !oneOf(d.LookupFamily, supportedDNSLookupFamilies) {
		v.add(dp.child("lookupFamily"), "%s", unsupported(d.LookupFamily, supportedDNSLookupFamilies))
	}
	if d.RefreshInterval != nil {
		r := d.RefreshInterval.Duration
		v.duration(dp.child("refreshInterval"), r, false)
		if r > 0 && r < MinDNSRefreshInterval {
			v.add(dp.child("refreshInterval"), "must be at least 100ms, got %s", r)
		}
	}
	for i, e := range b.Endpoints {
		ip := net.ParseIP(e.Address)
		if ip == nil {
			continue
		}
		// Envoy resolves an address literal too, and a literal of the other family never resolves.
		ap := bp.child("endpoints").index(i).child("address")
		switch {
		case d.LookupFamily == DNSV6 && ip.To4() != nil:
			v.add(ap, "an IPv4 address never resolves with dns.lookupFamily V6")
		case d.LookupFamily == DNSV4 && ip.To4() == nil:
			v.add(ap, "an IPv6 address never resolves with dns.lookupFamily V4")
		}
	}
	if d.Resolution != DNSLogical {
		return
	}
	// Envoy refuses a LOGICAL_DNS cluster with more than one endpoint, and a level to fail over to needs a
	// second one.
	if len(b.Endpoints) != 1 {
		v.add(bp.child("endpoints"), "dns.resolution Logical takes exactly one endpoint (the name Envoy connects to), got %d: use Strict, or one backend per name", len(b.Endpoints))
	}
	if len(b.LoadBalancing.ZoneFailover) > 0 {
		v.add(bp.child("loadBalancing").child("zoneFailover"), "not allowed with dns.resolution Logical: its one endpoint has no other zone to fail over to")
	}
}
