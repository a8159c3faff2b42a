package v1alpha1

// backendZones validates zone-aware routing and zone weights (issue 17 item 3). Both act on Envoy's
// priority level 0 only, and are two branches of one oneof (LocalityLbConfig) in Envoy's load-balancing
// policies, so combinations that Envoy would ignore or refuse are refused here with their field path.
func (v *validator) backendZones(p path, b *Backend) {
	lb := &b.LoadBalancing
	lp := p.child("loadBalancing")
	zoned := false
	for _, e := range b.Endpoints {
		zoned = zoned || e.Zone != ""
	}
	if za := lb.ZoneAware; za != nil {
		zp := lp.child("zoneAware")
		switch lb.Algorithm {
		case AlgorithmRoundRobin, AlgorithmLeastRequest, AlgorithmRandom:
		default:
			// Envoy's ring hash, Maglev and client-side weighted round robin have no zone-aware routing.
			v.add(zp, "only allowed with algorithm RoundRobin, LeastRequest or Random, got %q: Envoy has no zone-aware routing for it", lb.Algorithm)
		}
		if len(lb.ZoneFailover) > 0 {
			v.add(zp, "not allowed with zoneFailover: each failover zone is its own priority level, and Envoy routes by zone only within the first")
		}
		if len(lb.ZoneWeights) > 0 {
			v.add(lp.child("zoneWeights"), "not allowed with zoneAware: Envoy either prefers the local zone or follows zone weights")
		}
		if za.MinEndpoints != nil {
			v.intRange(zp.child("minEndpoints"), int64(*za.MinEndpoints), 1, 10000)
		}
		if b.Service == nil && !zoned {
			v.add(zp, "no endpoint has a zone: set endpoints[].zone, or use a Service whose EndpointSlices carry zones")
		}
	}
	if len(lb.ZoneWeights) == 0 {
		return
	}
	wp := lp.child("zoneWeights")
	if lb.Algorithm == AlgorithmBackendUtilization {
		v.add(wp, "not allowed with algorithm BackendUtilization: Envoy's client-side weighted round robin has no zone weights")
	}
	if len(lb.ZoneFailover) > 0 {
		v.add(wp, "not allowed with zoneFailover: each failover zone is its own priority level, so there is nothing to weigh")
	}
	if len(lb.ZoneWeights) > MaxZones {
		v.add(wp, "at most %d zones, got %d", MaxZones, len(lb.ZoneWeights))
		return
	}
	listed := map[string]int{}
	for i, w := range lb.ZoneWeights {
		v.zone(wp.index(i).child("zone"), w.Zone)
		if j, dup := listed[w.Zone]; dup {
			v.add(wp.index(i).child("zone"), "duplicate zone %q (also at index %d)", clip(w.Zone), j)
		}
		listed[w.Zone] = i
		v.intRange(wp.index(i).child("weight"), int64(w.Weight), 1, 1000000)
	}
	// A static endpoint outside the listed zones would never get traffic: most likely a typo.
	for i, e := range b.Endpoints {
		if _, ok := listed[e.Zone]; !ok {
			v.add(p.child("endpoints").index(i).child("zone"), "zone %q is not in loadBalancing.zoneWeights: the endpoint would get no traffic", clip(e.Zone))
		}
	}
}
