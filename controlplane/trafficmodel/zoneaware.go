package trafficmodel

import (
	"cmp"
	"math"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/common/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// zoneRouting is Envoy's zone-aware routing configuration of a cluster (zone_aware_lb_config), with
// Envoy's defaults where it sets nothing: every round robin, least request and random cluster routes by
// zone in an Envoy with a local cluster, within these limits.
type zoneRouting struct {
	// minClusterSize: fewer healthy endpoints at priority 0, and there is no zone routing (6).
	minClusterSize uint64
	// enabled is the percentage of requests that are routed by zone (100).
	enabled uint32
	// forceMinSize, when set, sends every request to the local zone while it has this many healthy
	// endpoints (force_local_zone.min_size, 1 when the message is there without it).
	forceMinSize *uint32
	// byWeight: zones are weighed by their healthy endpoints' weights, not their count (locality_basis).
	byWeight bool
	// failOnPanic: a level in panic takes no traffic (fail_traffic_on_panic).
	failOnPanic bool
}

var defaultZoneRouting = zoneRouting{minClusterSize: 6, enabled: 100}

// zoneRoutingOf reads zone_aware_lb_config as Envoy's ZoneAwareLoadBalancerBase does.
func zoneRoutingOf(z *commonv3.LocalityLbConfig_ZoneAwareLbConfig) zoneRouting {
	out := defaultZoneRouting
	if z == nil {
		return out
	}
	if v := z.GetMinClusterSize(); v != nil {
		out.minClusterSize = v.GetValue()
	}
	if p := z.GetRoutingEnabled(); p != nil {
		out.enabled = percentRounded(p)
	}
	switch {
	case z.GetForceLocalZone() != nil:
		n := uint32(1)
		if v := z.GetForceLocalZone().GetMinSize(); v != nil {
			n = v.GetValue()
		}
		out.forceMinSize = &n
	//lint:ignore SA1019 deprecated for force_local_zone, and still honoured by Envoy as min_size 1
	case z.GetForceLocalityDirectRouting():
		n := uint32(1)
		out.forceMinSize = &n
	}
	out.byWeight = z.GetLocalityBasis() == commonv3.LocalityLbConfig_ZoneAwareLbConfig_HEALTHY_HOSTS_WEIGHT
	out.failOnPanic = z.GetFailTrafficOnPanic()
	return out
}

// legacyZoneRoutingOf reads a cluster's common_lb_config.zone_aware_lb_config (a cluster without a load
// balancing policy) as Envoy does (localityLbConfigFromCommonLbConfig): into a zone-aware config of the
// policies' kind, which it then reads the same way. The legacy message has no force_local_zone.
func legacyZoneRoutingOf(z *clusterv3.Cluster_CommonLbConfig_ZoneAwareLbConfig) zoneRouting {
	if z == nil {
		return defaultZoneRouting
	}
	return zoneRoutingOf(&commonv3.LocalityLbConfig_ZoneAwareLbConfig{RoutingEnabled: z.GetRoutingEnabled(),
		MinClusterSize: z.GetMinClusterSize(), FailTrafficOnPanic: z.GetFailTrafficOnPanic()})
}

// percentRounded is PROTOBUF_PERCENT_TO_ROUNDED_INTEGER_OR_DEFAULT(..., 100, ...): the percentage in
// hundredths, rounded.
func percentRounded(p *typev3.Percent) uint32 {
	return uint32(math.Round(p.GetValue() * 100))
}

// zoneLocality is one locality of priority 0 as Envoy's host set holds it: its endpoints, and the healthy
// ones among them.
type zoneLocality struct {
	zone    string
	healthy []int
}

// zoneRoute follows Envoy's zone-aware routing (source/extensions/load_balancing_policies/common/
// load_balancer_impl.cc: regenerateLocalityRoutingStructures, earlyExitNonLocalityRouting,
// calculateLocalityPercentages, tryChooseLocalLocalityHosts, hostSourceToUse) for level l as the Envoy
// local sees it, and returns each host's share of the level's requests; nil when Envoy does not route
// by zone there (the level's healthy endpoints are balanced, zones aside). A share sum below 1 is
// requests that find no endpoint. Only priority 0 is routed by zone; localities are priority 0's, the
// local one first and the others by zone, each with its healthy endpoints (a locality with none stays).
func (m *Cluster) zoneRoute(l *Level, local *Local) map[int]float64 {
	if local == nil || local.Cluster == "" || l.Priority != 0 || l.Panic || m.Hashing() {
		return nil
	}
	z := m.zoneRouting
	// The localities of the level, the Envoy's own first.
	byZone := map[string]*zoneLocality{}
	for _, i := range l.Hosts {
		h := m.Hosts[i]
		loc := byZone[h.Zone]
		if loc == nil {
			loc = &zoneLocality{zone: h.Zone}
			byZone[h.Zone] = loc
		}
		if h.Healthy {
			loc.healthy = append(loc.healthy, i)
		}
	}
	locs := make([]*zoneLocality, 0, len(byZone))
	for _, loc := range byZone {
		locs = append(locs, loc)
	}
	hasLocal := byZone[local.Zone] != nil
	slices.SortFunc(locs, func(a, b *zoneLocality) int {
		if hasLocal && (a.zone == local.Zone) != (b.zone == local.Zone) {
			if a.zone == local.Zone {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.zone, b.zone)
	})
	// earlyExitNonLocalityRouting.
	healthy := 0
	for _, loc := range locs {
		healthy += len(loc.healthy)
	}
	switch {
	case len(locs) < 2:
		return nil
	case z.forceMinSize == nil && len(local.Hosts) < 2:
		return nil
	case local.Hosts[local.Zone] == 0:
		return nil
	case uint64(healthy) < z.minClusterSize:
		return nil
	}
	// calculateLocalityPercentages, in hundredths of a percent, integer as Envoy's.
	weightOf := func(hosts []int) uint64 {
		if !z.byWeight {
			return uint64(len(hosts))
		}
		var w uint64
		for _, i := range hosts {
			w += uint64(m.Hosts[i].Weight)
		}
		return w
	}
	var upTotal, localTotal uint64
	for _, loc := range locs {
		upTotal += weightOf(loc.healthy)
	}
	localWeight := func(zone string) uint64 {
		if z.byWeight {
			return local.Weights[zone]
		}
		return uint64(local.Hosts[zone])
	}
	for zone := range local.Hosts {
		localTotal += localWeight(zone)
	}
	up, lp := make([]uint64, len(locs)), make([]uint64, len(locs))
	for i, loc := range locs {
		if len(loc.healthy) == 0 {
			continue
		}
		if upTotal > 0 {
			up[i] = 10000 * weightOf(loc.healthy) / upTotal
		}
		if localTotal > 0 {
			lp[i] = 10000 * localWeight(loc.zone) / localTotal
		}
	}
	pick := make([]float64, len(locs)) // each locality's chance when routing by zone
	direct := hasLocal && ((up[0] > 0 && up[0] >= lp[0]) || (z.forceMinSize != nil && uint32(len(locs[0].healthy)) >= *z.forceMinSize))
	if direct {
		pick[0] = 1
	} else {
		var toLocal uint64
		if hasLocal && lp[0] > 0 {
			toLocal = up[0] * 10000 / lp[0]
		}
		stay := float64(min(toLocal, 10000)) / 10000
		if hasLocal {
			pick[0] = stay
		}
		residual := make([]uint64, len(locs))
		var sum uint64
		for i := range locs {
			if (i == 0 && hasLocal) || up[i] <= lp[i] {
				continue
			}
			residual[i] = up[i] - lp[i]
			sum += residual[i]
		}
		for i := range locs {
			if sum == 0 {
				// Rounding left no locality with capacity: Envoy picks one at random.
				pick[i] += (1 - stay) / float64(len(locs))
			} else {
				pick[i] += (1 - stay) * float64(residual[i]) / float64(sum)
			}
		}
	}
	// routing_enabled: the other requests are balanced over the level's healthy endpoints.
	routed := float64(z.enabled) / 100
	out := map[int]float64{}
	if routed < 1 {
		for _, w := range m.spread(l.picked) {
			out[w.host] += (1 - routed) * w.weight
		}
	}
	for i, loc := range locs {
		if pick[i] == 0 {
			continue
		}
		for _, w := range m.spread(loc.healthy) {
			out[w.host] += routed * pick[i] * w.weight
		}
	}
	return out
}
