package v1alpha1

import (
	"math"
	"net"
	"net/netip"
	"strconv"
)

var supportedProxyProtocolVersions = []ProxyProtocolVersion{ProxyProtocolV1, ProxyProtocolV2}

// traffic validates the traffic features: rate limits, mirrors, PROXY protocol, upstream client
// certificates, utilization-aware balancing and the smaller balancing knobs.
func (v *validator) traffic(spec path, s *LoadBalancerPolicySpec, backends map[string]bool) {
	lp := spec.child("listener")
	if rl := s.Listener.RateLimit; rl != nil {
		if s.Listener.Protocol != ProtocolTCP {
			v.add(lp.child("rateLimit"), "only allowed on a TCP listener, where it limits connections; HTTP listeners limit per route (routes[].rateLimit)")
		} else {
			v.rateLimit(lp.child("rateLimit"), rl)
			if rl.PerClient != nil {
				v.add(lp.child("rateLimit").child("perClient"), "only allowed on routes (routes[].rateLimit.perClient): a TCP listener's limit counts connections")
			}
			if rl.Headers {
				v.add(lp.child("rateLimit").child("headers"), "only allowed on routes: a TCP listener has no headers to add")
			}
		}
	}
	if pp := s.Listener.ProxyProtocol; pp != nil {
		v.trustedSources(lp.child("proxyProtocol").child("trustedSources"), pp.TrustedSources)
	}
	for i := range s.Routes {
		r := &s.Routes[i]
		rp := spec.child("routes").index(i)
		if r.RateLimit != nil {
			v.rateLimit(rp.child("rateLimit"), r.RateLimit)
		}
		seen := map[string]int{}
		for j, m := range r.Mirrors {
			mp := rp.child("mirrors").index(j)
			switch {
			case !backends[m.Backend]:
				v.add(mp.child("backend"), "must name a backend of spec.backends, got %q", clip(m.Backend))
			default:
				if k, dup := seen[m.Backend]; dup {
					v.add(mp.child("backend"), "duplicate mirror of %q (also at index %d)", m.Backend, k)
				}
				seen[m.Backend] = j
				for _, ref := range r.Backends {
					if ref.Name == m.Backend && *ref.Weight > 0 {
						// The backend would get both the request and its copy: side effects happen twice.
						v.add(mp.child("backend"), "%q already serves this route; a mirror must be another backend", m.Backend)
					}
				}
			}
			v.intRange(mp.child("percent"), int64(*m.Percent), 0, 100)
		}
		if rt := r.Retry; rt != nil && rt.AvoidPreviousPriorities && *rt.Attempts == 0 {
			v.add(rp.child("retry").child("avoidPreviousPriorities"), "needs attempts greater than 0")
		}
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		bp := spec.child("backends").index(i)
		if pp := b.ProxyProtocol; pp != nil && !oneOf(pp.Version, supportedProxyProtocolVersions) {
			v.add(bp.child("proxyProtocol").child("version"), "%s", unsupported(pp.Version, supportedProxyProtocolVersions))
		}
		if t := b.TLS; t != nil && t.ClientCertificate != nil {
			c := t.ClientCertificate
			cp := bp.child("tls").child("clientCertificate")
			files := c.CertificateFile != "" || c.PrivateKeyFile != ""
			switch {
			case files && c.SecretName != "":
				v.add(cp, "set certificateFile and privateKeyFile, or secretName, not both")
			case !files && c.SecretName == "":
				v.add(cp, "set certificateFile and privateKeyFile, or secretName")
			case files && (c.CertificateFile == "" || c.PrivateKeyFile == ""):
				v.add(cp, "certificateFile and privateKeyFile go together")
			}
			if c.SecretName != "" && !isDNSSubdomain(c.SecretName) {
				v.add(cp.child("secretName"), "must be a Secret name (DNS subdomain), got %q", clip(c.SecretName))
			}
			v.filePath(cp.child("certificateFile"), c.CertificateFile)
			v.filePath(cp.child("privateKeyFile"), c.PrivateKeyFile)
		}
		v.autoSNI(bp, b)
		if c := b.Connection; c != nil && c.MaxConnectionDuration != nil {
			v.duration(bp.child("connection").child("maxConnectionDuration"), c.MaxConnectionDuration.Duration, false)
			if s.Listener.Protocol == ProtocolTCP {
				v.add(bp.child("connection").child("maxConnectionDuration"), "not allowed on a TCP listener: it closes HTTP connections between requests")
			}
		}
		if hc := b.HealthCheck; hc != nil && hc.Passive != nil && hc.Passive.MaxEjectionTime != nil {
			pp := bp.child("healthCheck").child("passive")
			d := hc.Passive.MaxEjectionTime.Duration
			v.duration(pp.child("maxEjectionTime"), d, false)
			if base := hc.Passive.BaseEjectionTime; base != nil && d > 0 && d < base.Duration {
				// Envoy refuses the cluster when the cap is below the first ejection's length.
				v.add(pp.child("maxEjectionTime"), "must not be shorter than baseEjectionTime (%s), got %s", base.Duration, d)
			}
		}
		lb := &b.LoadBalancing
		lbp := bp.child("loadBalancing")
		if lr := lb.LeastRequest; lr != nil && lr.ActiveRequestBias != "" {
			v.nonNegativeDecimal(lbp.child("leastRequest").child("activeRequestBias"), lr.ActiveRequestBias, 100)
		}
		if bu := lb.BackendUtilization; bu != nil {
			bup := lbp.child("backendUtilization")
			if lb.Algorithm != AlgorithmBackendUtilization {
				v.add(bup, "only allowed with algorithm BackendUtilization, got %q", lb.Algorithm)
			} else {
				v.duration(bup.child("blackoutPeriod"), bu.BlackoutPeriod.Duration, true)
				v.duration(bup.child("weightUpdatePeriod"), bu.WeightUpdatePeriod.Duration, false)
				if d := bu.WeightUpdatePeriod.Duration; d > 0 && d < MinWeightUpdatePeriod {
					v.add(bup.child("weightUpdatePeriod"), "must be at least %s (Envoy's shortest), got %s", MinWeightUpdatePeriod, d)
				}
				v.duration(bup.child("weightExpirationPeriod"), bu.WeightExpirationPeriod.Duration, false)
				v.nonNegativeDecimal(bup.child("errorUtilizationPenalty"), bu.ErrorUtilizationPenalty, 1000)
			}
		}
	}
}

func (v *validator) rateLimit(p path, rl *RateLimit) {
	v.intRange(p.child("requests"), int64(rl.Requests), 1, 1<<30)
	v.intRange(p.child("burst"), int64(*rl.Burst), 1, 1<<30)
	d := rl.Interval.Duration
	v.duration(p.child("interval"), d, false)
	if d > 0 && d < MinRateLimitInterval {
		v.add(p.child("interval"), "must be at least %s (Envoy's shortest refill), got %s", MinRateLimitInterval, d)
	}
	if c := rl.PerClient; c != nil {
		cp := p.child("perClient")
		v.rateLimit(cp, &RateLimit{Requests: c.Requests, Interval: c.Interval, Burst: c.Burst})
		v.intRange(cp.child("maxClients"), int64(*c.MaxClients), 1, 1000000)
	}
}

// trustedSources accepts network prefixes with no host bits set.
func (v *validator) trustedSources(p path, cidrs []string) {
	if len(cidrs) > 64 {
		v.add(p, "at most 64 entries, got %d", len(cidrs))
		return
	}
	for i, c := range cidrs {
		pfx, err := netip.ParsePrefix(c)
		switch {
		case err != nil:
			v.add(p.index(i), "must be a CIDR such as 198.51.100.0/24 or 2001:db8::/32, got %q", clip(c))
		case pfx != pfx.Masked():
			v.add(p.index(i), "has host bits set: the network is %s, got %q", pfx.Masked(), clip(c))
		}
	}
}

// nonNegativeDecimal accepts a decimal string from 0 to hi.
func (v *validator) nonNegativeDecimal(p path, s string, hi float64) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > hi || math.IsNaN(f) {
		v.add(p, "must be a decimal number from 0 to %g, such as \"0.5\", got %q", hi, clip(s))
	}
}

// autoSNI checks endpoint host names and that autoSNI has one for every endpoint.
func (v *validator) autoSNI(bp path, b *Backend) {
	for i, e := range b.Endpoints {
		if e.Hostname != "" && !isDNSSubdomain(e.Hostname) {
			v.add(bp.child("endpoints").index(i).child("hostname"), "must be a lowercase DNS name, got %q", clip(e.Hostname))
		}
	}
	t := b.TLS
	if t == nil || !t.AutoSNI {
		return
	}
	tp := bp.child("tls").child("autoSNI")
	switch {
	case t.SNI != "":
		v.add(tp, "set sni or autoSNI, not both")
	case b.Service != nil:
		v.add(tp, "needs endpoints with a hostname; Service endpoints have none")
	}
	for i, e := range b.Endpoints {
		// A host-name address is its own name (Envoy takes it as the host's name).
		if e.Hostname == "" && net.ParseIP(e.Address) != nil {
			v.add(bp.child("endpoints").index(i).child("hostname"), "required with tls.autoSNI: it is the name sent and verified")
		}
	}
}
