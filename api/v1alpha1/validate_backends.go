package v1alpha1

// specFeatures validates the backend settings of issue 17: DNS endpoints, backups, zone-aware routing,
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
