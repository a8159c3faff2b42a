package v1alpha1

import (
	"net"
	"time"
)

// DefaultDNSRefreshInterval is Envoy's own default refresh rate.
const DefaultDNSRefreshInterval = 5 * time.Second

// UsesDNS tells whether the backend's endpoints are resolved: at least one endpoint address is a name.
func (b *Backend) UsesDNS() bool {
	for _, e := range b.Endpoints {
		if net.ParseIP(e.Address) == nil {
			return true
		}
	}
	return false
}

// defaultDNS fills the DNS settings of backends with host-name endpoints. TLS to such a backend without an
// sni sends each endpoint's own name and verifies the certificate against it (autoSNI), as a browser or
// curl would: a name-addressed backend is usually a virtual host that needs its name.
func defaultDNS(s *LoadBalancerPolicySpec) {
	for i := range s.Backends {
		b := &s.Backends[i]
		if !b.UsesDNS() {
			continue
		}
		if b.DNS == nil {
			b.DNS = &BackendDNS{}
		}
		if b.DNS.Resolver == "" {
			b.DNS.Resolver = DNSResolverLbplane
		}
		if b.DNS.Resolution == "" {
			b.DNS.Resolution = DNSStrict
		}
		if b.DNS.LookupFamily == "" {
			b.DNS.LookupFamily = DNSV4Preferred
		}
		durationOr(&b.DNS.RefreshInterval, DefaultDNSRefreshInterval)
		if t := b.TLS; t != nil && t.SNI == "" && !t.InsecureSkipVerify {
			t.AutoSNI = true
		}
	}
}
