// Package v1alpha1 holds the LoadBalancerPolicy API (group lbplane.io, version v1alpha1).
//
// The same types serve the Kubernetes CRD and the standalone push API, so that one YAML document works on
// both paths.
//
// +groupName=lbplane.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	Group   = "lbplane.io"
	Version = "v1alpha1"
	Kind    = "LoadBalancerPolicy"
)

// APIVersion is the apiVersion every document must carry.
var APIVersion = Group + "/" + Version

// LoadBalancerPolicy describes one frontend (a listener) and the backends it balances over, as an nginx
// server + upstream or an HAProxy frontend + backend would.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lbp
type LoadBalancerPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LoadBalancerPolicySpec   `json:"spec"`
	Status LoadBalancerPolicyStatus `json:"status,omitempty"`
}

// LoadBalancerPolicyList is a list of policies.
type LoadBalancerPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LoadBalancerPolicy `json:"items"`
}

// LoadBalancerPolicySpec is what the user asks for.
type LoadBalancerPolicySpec struct {
	// proxyGroup selects the Envoys that serve this policy: those whose bootstrap node cluster equals it.
	// Defaults to "default".
	ProxyGroup string `json:"proxyGroup,omitempty"`

	// listener is the frontend: where Envoy accepts traffic.
	Listener Listener `json:"listener"`

	// routes (HTTP listeners only) send matching requests to weighted backends. Routes are tried in order; a
	// policy with no routes sends everything to all of its backends, equally weighted.
	Routes []Route `json:"routes,omitempty"`

	// backends are named sets of endpoints and how to balance over them.
	Backends []Backend `json:"backends"`
}

// Protocol is a listener protocol.
// +kubebuilder:validation:Enum=HTTP;HTTPS;TCP
type Protocol string

const (
	ProtocolHTTP  Protocol = "HTTP"
	ProtocolHTTPS Protocol = "HTTPS"
	ProtocolTCP   Protocol = "TCP"
)

// Listener is where Envoy accepts traffic for the policy.
type Listener struct {
	// address is the IP address Envoy binds. Defaults to "0.0.0.0".
	Address string `json:"address,omitempty"`
	// port is the TCP port Envoy binds.
	Port int32 `json:"port"`
	// protocol is HTTP or TCP (HTTPS arrives with TLS support).
	Protocol Protocol `json:"protocol"`
	// hostnames (HTTP) are the Host header values this policy answers on its port. Several HTTP policies may
	// share a port when their hostnames differ. Empty means every host ("*").
	Hostnames []string `json:"hostnames,omitempty"`
}

// Route sends matching requests to weighted backends.
type Route struct {
	// name identifies the route in status and in the generated Envoy config. Defaults to "route-<index>".
	Name string `json:"name,omitempty"`
	// match selects requests. An empty match selects every request.
	Match RouteMatch `json:"match,omitempty"`
	// backends are the weighted destinations of matching requests.
	Backends []BackendRef `json:"backends"`
	// timeout is the whole-request timeout, from the request's end to the response's end. Defaults to 15s;
	// "0s" disables it.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// RouteMatch selects requests by path and headers; all given conditions must hold.
type RouteMatch struct {
	// path matches the request path.
	Path *PathMatch `json:"path,omitempty"`
	// headers must all match.
	Headers []HeaderMatch `json:"headers,omitempty"`
}

// PathMatchType says how a path is compared.
// +kubebuilder:validation:Enum=Prefix;Exact
type PathMatchType string

const (
	PathMatchPrefix PathMatchType = "Prefix"
	PathMatchExact  PathMatchType = "Exact"
)

// PathMatch matches the request path.
type PathMatch struct {
	// type is Prefix or Exact. Defaults to Prefix.
	Type PathMatchType `json:"type,omitempty"`
	// value is the path or prefix; it starts with "/".
	Value string `json:"value"`
}

// HeaderMatchType says how a header is compared.
// +kubebuilder:validation:Enum=Exact;Prefix;Present;RegularExpression
type HeaderMatchType string

const (
	HeaderMatchExact   HeaderMatchType = "Exact"
	HeaderMatchPrefix  HeaderMatchType = "Prefix"
	HeaderMatchPresent HeaderMatchType = "Present"
	HeaderMatchRegex   HeaderMatchType = "RegularExpression"
)

// HeaderMatch matches one request header.
type HeaderMatch struct {
	// name is the header name, case-insensitive.
	Name string `json:"name"`
	// type is Exact, Prefix, Present or RegularExpression (RE2). Defaults to Exact.
	Type HeaderMatchType `json:"type,omitempty"`
	// value is compared with the header; not allowed with Present.
	Value string `json:"value,omitempty"`
	// invert selects requests where the header does not match.
	Invert bool `json:"invert,omitempty"`
}

// BackendRef names a backend of the same policy and its share of the route's traffic.
type BackendRef struct {
	// name of a backend in spec.backends.
	Name string `json:"name"`
	// weight is the relative share of traffic. Defaults to 1; 0 sends it nothing.
	Weight *int32 `json:"weight,omitempty"`
}

// Backend is a named set of endpoints and how to balance over them.
type Backend struct {
	// name identifies the backend within the policy.
	Name string `json:"name"`
	// endpoints are static address:port entries. Exactly one of endpoints and service is set.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// service references a Kubernetes Service (Kubernetes mode only).
	Service *ServiceRef `json:"service,omitempty"`
	// loadBalancing chooses the algorithm. Defaults to RoundRobin.
	LoadBalancing LoadBalancing `json:"loadBalancing,omitempty"`
	// connectTimeout bounds the TCP (and TLS) connect to an endpoint. Defaults to 5s.
	ConnectTimeout *metav1.Duration `json:"connectTimeout,omitempty"`
	// circuitBreakers cap concurrent work towards the backend. The defaults are high enough not to throttle
	// (Envoy's own defaults of 1024 would).
	CircuitBreakers *CircuitBreakers `json:"circuitBreakers,omitempty"`
}

// Endpoint is one static backend address.
type Endpoint struct {
	// address is the endpoint's IP address.
	Address string `json:"address"`
	// port is the endpoint's TCP port.
	Port int32 `json:"port"`
	// weight is the endpoint's relative share for weighted algorithms. Defaults to 1.
	Weight *int32 `json:"weight,omitempty"`
}

// ServiceRef references a Kubernetes Service and one of its ports.
type ServiceRef struct {
	// name of the Service.
	Name string `json:"name"`
	// namespace of the Service; defaults to the policy's namespace.
	Namespace string `json:"namespace,omitempty"`
	// port is the Service port number.
	Port int32 `json:"port,omitempty"`
	// portName is the Service port name; use it or port.
	PortName string `json:"portName,omitempty"`
}

// Algorithm is a load-balancing algorithm.
// +kubebuilder:validation:Enum=RoundRobin;LeastRequest;Random;RingHash;Maglev
type Algorithm string

const (
	AlgorithmRoundRobin   Algorithm = "RoundRobin"
	AlgorithmLeastRequest Algorithm = "LeastRequest"
	AlgorithmRandom       Algorithm = "Random"
	AlgorithmRingHash     Algorithm = "RingHash"
	AlgorithmMaglev       Algorithm = "Maglev"
)

// LoadBalancing chooses how requests (or connections, on TCP listeners) are spread over endpoints.
type LoadBalancing struct {
	// algorithm is RoundRobin (weighted), LeastRequest, Random, RingHash or Maglev. Defaults to RoundRobin.
	Algorithm Algorithm `json:"algorithm,omitempty"`
	// leastRequest tunes LeastRequest.
	LeastRequest *LeastRequest `json:"leastRequest,omitempty"`
}

// LeastRequest tunes the LeastRequest algorithm (power of N choices).
type LeastRequest struct {
	// choiceCount is how many random endpoints are compared per pick. Defaults to 2.
	ChoiceCount *int32 `json:"choiceCount,omitempty"`
}

// CircuitBreakers cap concurrent work towards a backend; past a cap Envoy answers 503 at once.
type CircuitBreakers struct {
	// maxConnections to all endpoints of the backend.
	MaxConnections *int32 `json:"maxConnections,omitempty"`
	// maxPendingRequests waiting for a connection.
	MaxPendingRequests *int32 `json:"maxPendingRequests,omitempty"`
	// maxRequests in flight.
	MaxRequests *int32 `json:"maxRequests,omitempty"`
	// maxRetries in flight.
	MaxRetries *int32 `json:"maxRetries,omitempty"`
}

// Condition types.
const (
	ConditionAccepted     = "Accepted"
	ConditionResolvedRefs = "ResolvedRefs"
	ConditionProgrammed   = "Programmed"
)

// LoadBalancerPolicyStatus is what lbplane observed.
type LoadBalancerPolicyStatus struct {
	// observedGeneration is the generation the conditions describe.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Accepted, ResolvedRefs, Programmed.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// endpoints counts the policy's endpoints.
	Endpoints EndpointCounts `json:"endpoints,omitempty"`
	// proxies counts the Envoys of the policy's proxy group.
	Proxies ProxyCounts `json:"proxies,omitempty"`
}

// EndpointCounts counts endpoints.
type EndpointCounts struct {
	Total   int32 `json:"total"`
	Healthy int32 `json:"healthy"`
}

// ProxyCounts counts proxies.
type ProxyCounts struct {
	Connected int32 `json:"connected"`
	Synced    int32 `json:"synced"`
}
