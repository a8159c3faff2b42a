package lint

import (
	"slices"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// Rules of zone-aware routing and zone weights.
const (
	RuleZoneBelowMinEndpoints  = "zone-below-zone-aware-minimum"
	RuleZoneWeightsWithService = "zone-weights-with-service"
)

func init() {
	Rules = append(Rules,
		struct{ Name, Catches string }{RuleZoneBelowMinEndpoints, "a zone with fewer static endpoints than loadBalancing.zoneAware.minEndpoints: the Envoys in that zone never keep their traffic in it"},
		struct{ Name, Catches string }{RuleZoneWeightsWithService, "loadBalancing.zoneWeights on a Service backend: its endpoints in zones not listed, or without a zone, get no traffic"},
	)
}

func zones(add addFunc, bp string, b *v1alpha1.Backend) {
	lb := &b.LoadBalancing
	if za := lb.ZoneAware; za != nil && za.MinEndpoints != nil {
		count := map[string]int{}
		var names []string
		for _, e := range b.Endpoints {
			if e.Zone == "" || e.Backup || e.State == v1alpha1.EndpointDraining {
				continue
			}
			if count[e.Zone] == 0 {
				names = append(names, e.Zone)
			}
			count[e.Zone]++
		}
		slices.Sort(names)
		for _, z := range names {
			if n := count[z]; n < int(*za.MinEndpoints) {
				add(RuleZoneBelowMinEndpoints, bp+".loadBalancing.zoneAware.minEndpoints",
					"zone %q has %d endpoint(s), fewer than %d: Envoys in %s spread over every zone even when all are healthy; lower minEndpoints or add endpoints there", z, n, *za.MinEndpoints, z)
			}
		}
	}
	if len(lb.ZoneWeights) > 0 && b.Service != nil {
		add(RuleZoneWeightsWithService, bp+".loadBalancing.zoneWeights",
			"the Service's endpoints take their zone from its EndpointSlices: those in a zone not listed here, or without one, get no traffic")
	}
}
