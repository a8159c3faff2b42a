package ir

// Source says which policy, backend and route an IR object came from, so that status, explain and NACK
// attribution can name them without parsing resource names (as Envoy Gateway's ResourceMetadata does).
// Listeners have none: a listener is one port shared by every policy on it; its virtual hosts say whose
// they are.
type Source struct {
	// Namespace and Name are the policy's.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Backend is the spec backend a cluster is made of; empty for a route's session cluster, which merges
	// several.
	Backend string `json:"backend,omitempty"`
	// Route is the index of the route in spec.routes; nil for the default route of a policy without routes,
	// and for what is not a route.
	Route *int `json:"route,omitempty"`
}

// RouteSource returns the source of route index i of the policy s names.
func (s Source) RouteSource(i int) Source {
	s.Backend = ""
	s.Route = &i
	return s
}
