package v1alpha1_test

import (
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func zoned(p *v1alpha1.LoadBalancerPolicy) *v1alpha1.Backend {
	b := &p.Spec.Backends[0]
	b.Endpoints = []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80, Zone: "zone-a"}, {Address: "10.0.0.2", Port: 80, Zone: "zone-b"}}
	return b
}

func TestValidateZoneAware(t *testing.T) {
	runCases(t, map[string]validateCase{
		"round robin": {func(p *v1alpha1.LoadBalancerPolicy) {
			zoned(p).LoadBalancing.ZoneAware = &v1alpha1.ZoneAware{MinEndpoints: i32(2)}
		}, nil},
		"least request, default minimum": {func(p *v1alpha1.LoadBalancerPolicy) {
			zoned(p).LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmLeastRequest, ZoneAware: &v1alpha1.ZoneAware{}}
		}, nil},
		"with a Service": {func(p *v1alpha1.LoadBalancerPolicy) {
			b := &p.Spec.Backends[0]
			b.Endpoints, b.Service = nil, &v1alpha1.ServiceRef{Name: "app", Port: 80}
			b.LoadBalancing.ZoneAware = &v1alpha1.ZoneAware{}
		}, nil},
		"Maglev hashes": {func(p *v1alpha1.LoadBalancerPolicy) {
			zoned(p).LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev, ZoneAware: &v1alpha1.ZoneAware{}}
		}, []string{`spec.backends[0].loadBalancing.zoneAware: only allowed with algorithm RoundRobin, LeastRequest or Random, got "Maglev": Envoy has no zone-aware routing for it`}},
		"with zoneFailover": {func(p *v1alpha1.LoadBalancerPolicy) {
			zoned(p).LoadBalancing = v1alpha1.LoadBalancing{ZoneFailover: []string{"zone-a"}, ZoneAware: &v1alpha1.ZoneAware{}}
		}, []string{`spec.backends[0].loadBalancing.zoneAware: not allowed with zoneFailover: each failover zone is its own priority level, and Envoy routes by zone only within the first`}},
		"with zoneWeights": {func(p *v1alpha1.LoadBalancerPolicy) {
			zoned(p).LoadBalancing = v1alpha1.LoadBalancing{ZoneAware: &v1alpha1.ZoneAware{},
				ZoneWeights: []v1alpha1.ZoneWeight{{Zone: "zone-a", Weight: 1}, {Zone: "zone-b", Weight: 1}}}
		}, []string{`spec.backends[0].loadBalancing.zoneWeights: not allowed with zoneAware: Envoy either prefers the local zone or follows zone weights`}},
		"minimum out of range": {func(p *v1alpha1.LoadBalancerPolicy) {
			zoned(p).LoadBalancing.ZoneAware = &v1alpha1.ZoneAware{MinEndpoints: i32(0)}
		}, []string{`spec.backends[0].loadBalancing.zoneAware.minEndpoints: must be between 1 and 10000, got 0`}},
		"no zones": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing.ZoneAware = &v1alpha1.ZoneAware{}
		}, []string{`spec.backends[0].loadBalancing.zoneAware: no endpoint has a zone: set endpoints[].zone, or use a Service whose EndpointSlices carry zones`}},
	})
}

func TestValidateZoneWeights(t *testing.T) {
	weights := func(w ...v1alpha1.ZoneWeight) []v1alpha1.ZoneWeight { return w }
	runCases(t, map[string]validateCase{
		"80/20": {func(p *v1alpha1.LoadBalancerPolicy) {
			zoned(p).LoadBalancing.ZoneWeights = weights(v1alpha1.ZoneWeight{Zone: "zone-a", Weight: 80}, v1alpha1.ZoneWeight{Zone: "zone-b", Weight: 20})
		}, nil},
		"Maglev keeps zone weights": {func(p *v1alpha1.LoadBalancerPolicy) {
			zoned(p).LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev,
				ZoneWeights: weights(v1alpha1.ZoneWeight{Zone: "zone-a", Weight: 80}, v1alpha1.ZoneWeight{Zone: "zone-b", Weight: 20})}
		}, nil},
		"an endpoint's zone unlisted": {func(p *v1alpha1.LoadBalancerPolicy) {
			zoned(p).LoadBalancing.ZoneWeights = weights(v1alpha1.ZoneWeight{Zone: "zone-a", Weight: 80})
		}, []string{`spec.backends[0].endpoints[1].zone: zone "zone-b" is not in loadBalancing.zoneWeights: the endpoint would get no traffic`}},
		"duplicate, bad name, zero weight": {func(p *v1alpha1.LoadBalancerPolicy) {
			zoned(p).LoadBalancing.ZoneWeights = weights(v1alpha1.ZoneWeight{Zone: "zone-a", Weight: 80}, v1alpha1.ZoneWeight{Zone: "zone-a", Weight: 0},
				v1alpha1.ZoneWeight{Zone: "zone b", Weight: 1}, v1alpha1.ZoneWeight{Zone: "zone-b", Weight: 1})
		}, []string{
			`spec.backends[0].loadBalancing.zoneWeights[1].zone: duplicate zone "zone-a" (also at index 0)`,
			`spec.backends[0].loadBalancing.zoneWeights[1].weight: must be between 1 and 1000000, got 0`,
			`spec.backends[0].loadBalancing.zoneWeights[2].zone: must be a zone name (letters, digits, '-', '_', '.'; at most 63), got "zone b"`,
		}},
		"with zoneFailover": {func(p *v1alpha1.LoadBalancerPolicy) {
			zoned(p).LoadBalancing = v1alpha1.LoadBalancing{ZoneFailover: []string{"zone-a", "zone-b"},
				ZoneWeights: weights(v1alpha1.ZoneWeight{Zone: "zone-a", Weight: 80}, v1alpha1.ZoneWeight{Zone: "zone-b", Weight: 20})}
		}, []string{`spec.backends[0].loadBalancing.zoneWeights: not allowed with zoneFailover: each failover zone is its own priority level, so there is nothing to weigh`}},
		"with BackendUtilization": {func(p *v1alpha1.LoadBalancerPolicy) {
			zoned(p).LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmBackendUtilization,
				ZoneWeights: weights(v1alpha1.ZoneWeight{Zone: "zone-a", Weight: 80}, v1alpha1.ZoneWeight{Zone: "zone-b", Weight: 20})}
		}, []string{`spec.backends[0].loadBalancing.zoneWeights: not allowed with algorithm BackendUtilization: Envoy's client-side weighted round robin has no zone weights`}},
	})
}
