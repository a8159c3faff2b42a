package ir

// ZoneAware prefers the Envoy's own zone (Envoy's zone-aware routing with force_local_zone).
type ZoneAware struct {
	// MinEndpoints is how many healthy endpoints the Envoy's zone needs to take all its traffic.
	MinEndpoints uint32 `json:"minEndpoints,omitempty"`
}

// ZoneWeight is one zone's locality weight.
type ZoneWeight struct {
	Zone   string `json:"zone,omitempty"`
	Weight uint32 `json:"weight,omitempty"`
}
