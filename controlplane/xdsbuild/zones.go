package xdsbuild

import (
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/common/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// localityLbConfig is the zone part of a load-balancing policy: zone-aware routing, or zone weights
// (one or the other: they are a oneof in Envoy). Nil when the backend uses neither.
func localityLbConfig(c *ir.Cluster) *commonv3.LocalityLbConfig {
	switch {
	case c.ZoneAware != nil:
		return &commonv3.LocalityLbConfig{LocalityConfigSpecifier: &commonv3.LocalityLbConfig_ZoneAwareLbConfig_{
			ZoneAwareLbConfig: &commonv3.LocalityLbConfig_ZoneAwareLbConfig{
				// Envoy skips zone-aware routing for backends of fewer than 6 healthy endpoints; the local
				// zone's own minimum (force_local_zone) is the capacity rule users set, so no second one.
				MinClusterSize: wrapperspb.UInt64(1),
				// Without force_local_zone Envoy keeps in its zone only the share that matches the fleet's
				// spread over zones, which it learns from the local cluster; with it, all of it while the
				// zone has MinEndpoints healthy endpoints.
				ForceLocalZone: &commonv3.LocalityLbConfig_ZoneAwareLbConfig_ForceLocalZone{MinSize: wrapperspb.UInt32(c.ZoneAware.MinEndpoints)},
			},
		}}
	case len(c.ZoneWeights) > 0:
		return &commonv3.LocalityLbConfig{LocalityConfigSpecifier: &commonv3.LocalityLbConfig_LocalityWeightedLbConfig_{
			LocalityWeightedLbConfig: &commonv3.LocalityLbConfig_LocalityWeightedLbConfig{},
		}}
	}
	return nil
}

// zoneWeight is the locality weight of a zone's endpoints; nil without zone weights. A zone left out gets
// none, which with locality-weighted balancing means no traffic (Envoy refuses a weight of 0).
func zoneWeight(c *ir.Cluster, zone string) *wrapperspb.UInt32Value {
	for _, w := range c.ZoneWeights {
		if w.Zone == zone {
			return wrapperspb.UInt32(w.Weight)
		}
	}
	return nil
}
