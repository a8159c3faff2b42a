package v1alpha1

import "k8s.io/apimachinery/pkg/util/validation"

// ZoneAware keeps each Envoy's traffic in its own zone (Envoy's zone-aware routing with force_local_zone).
// An Envoy knows its zone only from its bootstrap (`lbctl bootstrap --zone`, the chart's envoy.zone):
// Envoys without one ignore this setting and spread over every zone.
type ZoneAware struct {
	// minEndpoints is the capacity of a zone: while the Envoy's zone has at least this many healthy
	// endpoints, all of that Envoy's requests go to them (still balanced by the algorithm among them).
	// Below it, requests spread over every zone in proportion to its healthy endpoints, as without
	// zone-aware routing. Defaults to 1: the zone serves alone while any of its endpoints is healthy.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MinEndpoints *int32 `json:"minEndpoints,omitempty"`
}

// ZoneWeight is one zone's share of a backend's traffic (Envoy's locality weights).
type ZoneWeight struct {
	// zone as in endpoints[].zone.
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone"`
	// weight is the zone's relative share: zones [a: 80, b: 20] send 80 % of requests to a. A zone's share
	// shrinks as its endpoints become unhealthy (beyond Envoy's overprovisioning factor of 1.4).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Weight int32 `json:"weight"`
}

// DefaultZoneAwareMinEndpoints: the Envoy's zone serves alone while any of its endpoints is healthy.
const DefaultZoneAwareMinEndpoints = 1

func defaultZones(lb *LoadBalancing) {
	if za := lb.ZoneAware; za != nil {
		orDefault(&za.MinEndpoints, int32(DefaultZoneAwareMinEndpoints))
	}
}

// IsZoneName reports whether z can be a zone: a non-empty Kubernetes label value (apimachinery's check),
// as topology.kubernetes.io/zone is. The bootstrap's --zone uses it too, so that every endpoint zone can be
// an Envoy's zone.
func IsZoneName(z string) bool {
	return z != "" && len(validation.IsValidLabelValue(z)) == 0
}
