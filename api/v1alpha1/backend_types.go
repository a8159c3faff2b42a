// Backends: endpoints or a Service, and the connections Envoy opens to them.

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Backend is a named set of endpoints and how to balance over them.
//
// +kubebuilder:validation:XValidation:rule="has(self.endpoints) != has(self.service)",message="set either endpoints or service"
type Backend struct {
	// name identifies the backend within the policy. Required. Its Envoy cluster is
	// "<namespace>/<policy>/<name>", with its endpoints over EDS (ADS).
	Name string `json:"name"`
	// endpoints are static address:port entries. Exactly one of endpoints and service is set.
	// +kubebuilder:validation:MaxItems=10000
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// service references a Kubernetes Service (Kubernetes mode only). The Service's EndpointSlices become the
	// cluster's endpoints.
	Service *ServiceRef `json:"service,omitempty"`
	// dns tunes how the backend's host-name endpoints (an endpoint address that is a DNS name instead of an IP
	// address) are resolved. Only allowed when an endpoint address is a name; defaults apply then. lbplane
	// resolves them and sends the addresses it allows as endpoints (EDS); with dns.resolver Envoy, each Envoy
	// resolves them itself, in a DNS cluster that carries its endpoints instead of EDS.
	DNS *BackendDNS `json:"dns,omitempty"`
	// The fields below say how Envoy balances over the endpoints and connects to them. A
	// BackendLoadBalancerPolicy says the same of a Service that Gateway API routes send to.
	BackendSettings `json:",inline"`
}

// BackendSettings are how Envoy balances over a backend's endpoints and connects to them: the part of a
// LoadBalancerPolicy backend that a BackendLoadBalancerPolicy also carries.
type BackendSettings struct {
	// loadBalancing chooses the algorithm. Defaults to RoundRobin.
	// +kubebuilder:default={}
	LoadBalancing LoadBalancing `json:"loadBalancing,omitempty"`
	// connectTimeout bounds the TCP (and TLS) connect to an endpoint. Defaults to 5s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	ConnectTimeout *metav1.Duration `json:"connectTimeout,omitempty"`
	// circuitBreakers cap concurrent work towards the backend. The defaults are high enough not to throttle
	// (Envoy's own defaults of 1024 would).
	CircuitBreakers *CircuitBreakers `json:"circuitBreakers,omitempty"`
	// healthCheck takes failing endpoints out of rotation: actively (probes) and passively (outlier detection).
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
	// connection tunes the connections Envoy opens to the endpoints.
	Connection *Connection `json:"connection,omitempty"`
	// tls makes Envoy speak TLS to the endpoints.
	TLS *BackendTLS `json:"tls,omitempty"`
	// proxyProtocol sends a PROXY protocol header with the client's address at the start of each upstream
	// connection. Each client connection gets its own upstream connection. The header comes first on the
	// connection, before TLS.
	ProxyProtocol *BackendProxyProtocol `json:"proxyProtocol,omitempty"`
	// perEndpointStats has Envoy keep request and connection counters per endpoint, so that Prometheus sees
	// each endpoint (envoy_cluster_endpoint_*). Costs memory per endpoint; off by default. The series carry
	// envoy_endpoint_address on the Prometheus endpoint.
	PerEndpointStats bool `json:"perEndpointStats,omitempty"`
	// drainingSessions says where a session (a route's sessionPersistence) pinned to one of the backend's
	// endpoints goes once that endpoint drains (state: Draining, lbctl endpoint drain, a terminating Pod, or
	// its backend at weight 0 in a route with sessionPersistence.acrossBackends). Keep (the default) keeps
	// sending the session to it until it leaves the backend, while new clients go to the others, as HAProxy's
	// drain state and Istio's persistent sessions do; Move moves the session to another endpoint at once. An
	// endpoint that fails its health checks loses its sessions either way. Keep adds DRAINING to the endpoint
	// states a session may still reach in Envoy (by default UNKNOWN, HEALTHY and DEGRADED), on backends that a
	// route with sessionPersistence sends to.
	// +kubebuilder:default=Keep
	DrainingSessions DrainingSessions `json:"drainingSessions,omitempty"`
}

// UpstreamProtocol is the protocol Envoy speaks to endpoints.
// +kubebuilder:validation:Enum=HTTP1;HTTP2
// +kubebuilder:validation:MaxLength=32
type UpstreamProtocol string

const (
	UpstreamHTTP1 UpstreamProtocol = "HTTP1"
	UpstreamHTTP2 UpstreamProtocol = "HTTP2"
)

// Connection tunes upstream connections.
type Connection struct {
	// protocol is HTTP1 (default) or HTTP2; HTTP2 without tls is h2c, as gRPC backends need.
	Protocol UpstreamProtocol `json:"protocol,omitempty"`
	// maxRequestsPerConnection closes a connection after this many requests. Unset means no limit.
	MaxRequestsPerConnection *int32 `json:"maxRequestsPerConnection,omitempty"`
	// idleTimeout closes an upstream connection idle this long. Defaults to Envoy's 1h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`
	// tcpKeepalive turns on TCP keepalive probes on upstream connections. Unset keeps the kernel's settings.
	TCPKeepalive *TCPKeepalive `json:"tcpKeepalive,omitempty"`
	// bufferBytes is how much Envoy buffers per upstream connection. Defaults to 32768 (Envoy's own default is
	// 1 MiB).
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=16777216
	BufferBytes *int32 `json:"bufferBytes,omitempty"`
	// maxConnectionDuration closes an upstream connection this long after it opened (once its requests are
	// done), so that long-lived HTTP/2 and gRPC connections are rebalanced onto new endpoints. Unset: never.
	// (HTTP, HTTPS.)
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	MaxConnectionDuration *metav1.Duration `json:"maxConnectionDuration,omitempty"`
}

// TCPKeepalive sets the kernel's keepalive probes.
type TCPKeepalive struct {
	// time idle before the first probe. Defaults to 2h (the kernel's default).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Time *metav1.Duration `json:"time,omitempty"`
	// interval between probes. Defaults to 75s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Interval *metav1.Duration `json:"interval,omitempty"`
	// probes unanswered before the connection is dropped. Defaults to 9.
	Probes *int32 `json:"probes,omitempty"`
}

// Endpoint is one static backend address.
type Endpoint struct {
	// address is the endpoint's IP address, or a DNS name (see the backend's dns): each address the name
	// resolves to is an endpoint on port, as nginx's "server ... resolve" and HAProxy's server-template do.
	// Loopback, link-local and unspecified addresses (in any IPv6 form that carries them), the Envoy host's
	// own addresses, lbplane's and Envoy's own ports there, and names of the host itself (localhost) are
	// refused unless the server allows them, and so is every address a name resolves to, at every refresh; in
	// Kubernetes mode addresses and names are allowed only where the operator says (backends are Services
	// otherwise). Each of a name's addresses carries the name as its hostname. In standalone mode lbplane
	// serve --allow-backend-cidrs allows more; in Kubernetes mode --address-backends-namespaces and
	// --address-backends-cidrs (docs/security.md, "What a policy can reach").
	// +kubebuilder:validation:MaxLength=253
	Address string `json:"address"`
	// port is the endpoint's TCP port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// weight is the endpoint's relative share for weighted algorithms. Defaults to 1.
	Weight *int32 `json:"weight,omitempty"`
	// state Draining takes the endpoint out of new traffic while its open connections carry on. Defaults to
	// Active.
	State EndpointState `json:"state,omitempty"`
	// zone is where the endpoint runs (Envoy's locality zone), for loadBalancing.zoneFailover. Service
	// endpoints take theirs from the EndpointSlice.
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone,omitempty"`
	// hostname is the endpoint's DNS name: with tls.autoSNI it is the SNI sent to it and the name its
	// certificate must carry.
	// +kubebuilder:validation:MaxLength=253
	Hostname string `json:"hostname,omitempty"`
	// backup endpoints get no traffic while the others can serve it: they take it as the others fail health
	// checks (see loadBalancing.failoverThreshold), as nginx's and HAProxy's "backup" servers do. At least one
	// endpoint of a backend is not a backup. Defaults to false. Backups are the priority level after every
	// other one (after zoneFailover's).
	Backup bool `json:"backup,omitempty"`
}

// EndpointState is an endpoint's administrative state.
// +kubebuilder:validation:Enum=Active;Draining
// +kubebuilder:validation:MaxLength=32
type EndpointState string

const (
	EndpointActive   EndpointState = "Active"
	EndpointDraining EndpointState = "Draining"
)

// ServiceRef references a Kubernetes Service and one of its ports.
type ServiceRef struct {
	// name of the Service.
	Name string `json:"name"`
	// namespace of the Service; defaults to the policy's namespace. Another namespace's Service is used only
	// when its annotation lbplane.io/allow-policies-from names the policy's namespace (or "*"), or when the
	// server allows every reference across namespaces.
	Namespace string `json:"namespace,omitempty"`
	// port is the Service port number.
	Port int32 `json:"port,omitempty"`
	// portName is the Service port name; use it or port.
	PortName string `json:"portName,omitempty"`
}

// CircuitBreakers cap concurrent work towards a backend; past a cap Envoy answers 503 at once.
type CircuitBreakers struct {
	// maxConnections to all endpoints of the backend. Defaults to 1048576 (Envoy's 1024 would throttle load
	// tests).
	MaxConnections *int32 `json:"maxConnections,omitempty"`
	// maxPendingRequests waiting for a connection. Defaults to 1048576.
	MaxPendingRequests *int32 `json:"maxPendingRequests,omitempty"`
	// maxRequests in flight. Defaults to 1048576.
	MaxRequests *int32 `json:"maxRequests,omitempty"`
	// maxRetries in flight. Defaults to 1024.
	MaxRetries *int32 `json:"maxRetries,omitempty"`
	// maxConnectionsPerEndpoint caps connections to any one endpoint. Unset means no per-endpoint cap.
	MaxConnectionsPerEndpoint *int32 `json:"maxConnectionsPerEndpoint,omitempty"`
	// retryBudget caps retries as a share of active requests, instead of maxRetries.
	RetryBudget *RetryBudget `json:"retryBudget,omitempty"`
}

// RetryBudget limits retries to a percentage of requests in flight.
type RetryBudget struct {
	// percent of active requests that may be retries. Defaults to 20.
	Percent *int32 `json:"percent,omitempty"`
	// minConcurrency of retries allowed whatever the percentage. Defaults to 3.
	MinConcurrency *int32 `json:"minConcurrency,omitempty"`
}

// ProxyProtocolVersion is a PROXY protocol version.
// +kubebuilder:validation:Enum=V1;V2
// +kubebuilder:validation:MaxLength=32
type ProxyProtocolVersion string

const (
	ProxyProtocolV1 ProxyProtocolVersion = "V1"
	ProxyProtocolV2 ProxyProtocolVersion = "V2"
)

// BackendProxyProtocol sends the PROXY protocol to the endpoints.
type BackendProxyProtocol struct {
	// version is V1 (text) or V2 (binary). Defaults to V2.
	Version ProxyProtocolVersion `json:"version,omitempty"`
}
