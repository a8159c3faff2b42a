package v1alpha1

import (
	"math"
	"net"
	"strconv"
)

// specFeatures validates the backends' endpoint settings: DNS endpoints, backups, zone-aware routing,
// bounded-load hashing, path and host hash keys, and the outlier-detection opt-out.
func (v *validator) specFeatures(spec path, s *LoadBalancerPolicySpec) {
	for i := range s.Backends {
		v.backendFeatures(spec.child("backends").index(i), &s.Backends[i], s.Listener.Protocol)
	}
	v.dnsBackends(spec, s)
}

func (v *validator) backendFeatures(p path, b *Backend, protocol Protocol) {
	v.backendZones(p, b)
	if hc := b.HealthCheck; hc != nil && hc.Passive != nil && hc.Passive.Disabled {
		ps := hc.Passive
		if ps.Consecutive5xx != nil || ps.ConsecutiveGatewayErrors != nil || ps.ConsecutiveLocalOriginFailures != nil ||
			ps.SuccessRate != nil || ps.FailurePercentage != nil {
			v.add(p.child("healthCheck").child("passive").child("disabled"), "no detector may be set with disabled: true")
		}
	}
	lb := p.child("loadBalancing")
	backups := 0
	for _, e := range b.Endpoints {
		if e.Backup {
			backups++
		}
	}
	if backups > 0 && backups == len(b.Endpoints) {
		v.add(p.child("endpoints"), "every endpoint is a backup: at least one must not be, or nothing is preferred")
	}
	if f := b.LoadBalancing.FailoverThreshold; f != nil {
		v.intRange(lb.child("failoverThreshold"), int64(*f), 1, 100)
		if backups == 0 && len(b.LoadBalancing.ZoneFailover) == 0 {
			v.add(lb.child("failoverThreshold"), "only allowed with backup endpoints or zoneFailover: without them there is no next level to fail over to")
		}
	}
	if f := b.LoadBalancing.HashBalanceFactor; f != nil {
		if a := b.LoadBalancing.Algorithm; a != AlgorithmRingHash && a != AlgorithmMaglev {
			v.add(lb.child("hashBalanceFactor"), "only allowed with algorithm RingHash or Maglev, got %q: other algorithms do not hash", a)
		}
		v.intRange(lb.child("hashBalanceFactor"), int64(*f), 100, 10000)
	}
	for i, k := range b.LoadBalancing.HashKeys {
		if protocol == ProtocolTCP && (k.Path != nil || k.Host != nil) {
			v.add(lb.child("hashKeys").index(i), "path and host are HTTP keys: a TCP listener can hash only sourceIP")
		}
	}
}

var supportedProxyProtocolVersions = []ProxyProtocolVersion{ProxyProtocolV1, ProxyProtocolV2}

// backendConnections validates each backend's PROXY protocol, client certificate, SNI, connection lifetime,
// ejection cap and the knobs of its algorithm (a least-request bias, utilization-aware balancing).
func (v *validator) backendConnections(spec path, s *LoadBalancerPolicySpec) {
	for i := range s.Backends {
		b := &s.Backends[i]
		bp := spec.child("backends").index(i)
		if pp := b.ProxyProtocol; pp != nil && !oneOf(pp.Version, supportedProxyProtocolVersions) {
			v.add(bp.child("proxyProtocol").child("version"), "%s", unsupported(pp.Version, supportedProxyProtocolVersions))
		}
		if t := b.TLS; t != nil && t.ClientCertificate != nil {
			c := t.ClientCertificate
			cp := bp.child("tls").child("clientCertificate")
			v.keyPairSource(cp, c.CertificateFile, c.PrivateKeyFile, c.SecretName)
			if c.SecretName != "" && !isDNSSubdomain(c.SecretName) {
				v.add(cp.child("secretName"), "must be a Secret name (DNS subdomain), got %q", clip(c.SecretName))
			}
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
