// Status: what lbplane observed of a policy, its conditions and its backends' endpoints.

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Condition types.
const (
	ConditionAccepted     = "Accepted"
	ConditionResolvedRefs = "ResolvedRefs"
	// ConditionProgrammed is True when every connected Envoy of the policy's group runs its config, and the
	// policy is served (accepted, and its certificates and files usable).
	ConditionProgrammed = "Programmed"
	// ConditionReady is True when the policy is Programmed and every connected Envoy of its group reports,
	// for each of its backends, at least one endpoint that takes traffic (passed its health checks, not
	// ejected, not draining): a request sent now is answered by a backend.
	ConditionReady = "Ready"
)

// LoadBalancerPolicyStatus is what lbplane observed.
type LoadBalancerPolicyStatus struct {
	// observedGeneration is the generation the conditions describe.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// algorithm is the load-balancing algorithm of the first backend as lbplane serves it, defaults applied
	// (RoundRobin when spec.backends[0].loadBalancing.algorithm is left out); empty when the policy has no
	// backend or names an algorithm lbplane does not know. The Algorithm column of kubectl get and lbctl get
	// shows it.
	// +optional
	Algorithm Algorithm `json:"algorithm,omitempty"`
	// proxyGroup is the proxy group serving the policy, defaults applied (spec.proxyGroup, or "default").
	// +optional
	ProxyGroup string `json:"proxyGroup,omitempty"`
	// conditions: Accepted, ResolvedRefs, Programmed (every Envoy of the group runs the policy, which is
	// served), Ready (and each backend has a healthy endpoint on every Envoy), and RolledBack after a staged
	// rollout's verdict.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// endpoints counts the policy's endpoints.
	Endpoints EndpointCounts `json:"endpoints,omitempty"`
	// proxies counts the Envoys of the policy's proxy group.
	Proxies ProxyCounts `json:"proxies,omitempty"`
	// backends is what the group's Envoys report of each backend: endpoint health and the last minute's load.
	// Empty until a proxy with a stats port (lbctl bootstrap --stats-port) has been read.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Backends []BackendStatus `json:"backends,omitempty"`
	// warnings are lint findings: valid settings that probably do not do what is meant (lbctl lint explains).
	// +kubebuilder:validation:MaxItems=64
	Warnings []string `json:"warnings,omitempty"`
	// rollout is where the policy's last staged rollout stands (see spec.rollout).
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
	// endpointOverrides are the operator's drain and maintenance overrides in force on the policy's
	// endpoints (lbctl endpoint drain|maintenance|ready), kept by lbplane outside the spec.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	EndpointOverrides []EndpointOverrideStatus `json:"endpointOverrides,omitempty"`
}

// BackendStatus is one backend as the proxies see it.
type BackendStatus struct {
	// name of the backend (spec.backends[].name; a merged session cluster is named after its route).
	Name string `json:"name"`
	// proxies is how many Envoys reported on this backend.
	Proxies int32 `json:"proxies"`
	// endpoints counts the endpoints the Envoys have. An endpoint counts as ejected (failed health check,
	// outlier detection, draining, ...) only when more than half of the Envoys that have it take no traffic
	// to it, so that one Envoy, or one stolen certificate, cannot take endpoints out for everyone; mismatched
	// counts the endpoints the Envoys disagree on.
	Endpoints BackendEndpointCounts `json:"endpoints"`
	// ejected lists the endpoints counted as ejected and why (at most 20).
	// +kubebuilder:validation:MaxItems=20
	Ejected []EjectedEndpoint `json:"ejected,omitempty"`
	// mismatches lists the endpoints some Envoys take no traffic to while others do (at most 20): which
	// Envoys say what. An ejection on a minority of Envoys is shown here, not counted.
	// +kubebuilder:validation:MaxItems=20
	Mismatches []EndpointMismatch `json:"mismatches,omitempty"`
	// perProxy is each Envoy's own view of the backend's endpoints (at most 32 Envoys, those that disagree
	// with the counted view first).
	// +kubebuilder:validation:MaxItems=32
	PerProxy []ProxyBackendHealth `json:"perProxy,omitempty"`
	// requests, errors (5xx responses and connection failures) and latencyP99Ms cover windowSeconds, at most
	// the last minute, summed over the proxies.
	Requests int64 `json:"requests"`
	// errors counts 5xx responses and connection failures over windowSeconds.
	Errors int64 `json:"errors"`
	// latencyP99Ms is the 99th percentile of upstream request time over windowSeconds, in milliseconds
	// (estimated within Envoy's histogram buckets; unset without requests).
	LatencyP99Ms *float64 `json:"latencyP99Ms,omitempty"`
	// windowSeconds is how many seconds requests, errors and latencyP99Ms cover.
	WindowSeconds int32 `json:"windowSeconds,omitempty"`
	// responses counts the responses Envoy sent clients for the backend over windowSeconds, by status
	// class; unset without responses (a TCP listener, or the router's dynamic stats off).
	// +optional
	Responses *ResponseCounts `json:"responses,omitempty"`
	// clientErrorRate is the share of those responses that were 5xx, what the backend's clients saw (Envoy's
	// own 503 and 504 included, a request it retried counted once per answer), a fraction from 0 to 1;
	// unset without responses.
	// +optional
	ClientErrorRate *float64 `json:"clientErrorRate,omitempty"`
	// noHealthyEndpoint counts the requests and connections Envoy had no healthy endpoint for over
	// windowSeconds (upstream_cx_none_healthy).
	// +optional
	NoHealthyEndpoint int64 `json:"noHealthyEndpoint,omitempty"`
	// connections to the backend's endpoints: open now, opened and failed over windowSeconds.
	// +optional
	Connections *ConnectionCounts `json:"connections,omitempty"`
	// bytes received from and sent to the endpoints over windowSeconds; unset until the stats were read.
	// +optional
	Bytes *ByteCounts `json:"bytes,omitempty"`
	// perEndpoint is the load on each endpoint, summed over the proxies: the busiest ones by requests, plus
	// every endpoint that is not taking traffic on some proxy (at most 30). (status.backends[].endpoints
	// already holds the counts.)
	// +kubebuilder:validation:MaxItems=30
	PerEndpoint []EndpointStatus `json:"perEndpoint,omitempty"`
	// skew is the coefficient of variation of the endpoints' observed share of requests relative to their
	// expected share (0 is a spread exactly as expected), over the healthy endpoints and windowSeconds; unset
	// without requests. With a hash algorithm a high skew means a few keys carry most of the traffic.
	Skew *float64 `json:"skew,omitempty"`
	// expectedCaveats are what the expected shares leave out: Envoy behaviour that turns on what only Envoy
	// knows at run time (least request and bounded load under concurrent requests, slow start, reported
	// utilization), and for zone-aware routing whose Envoys the shares are (the zones of the group's
	// Envoys, each taken to send as many requests). The same text as lbctl trace, whatif and diff --traffic.
	// +kubebuilder:validation:MaxItems=8
	ExpectedCaveats []string `json:"expectedCaveats,omitempty"`
}

// EndpointStatus is one endpoint's load, as the proxies report it. Envoy 1.40 keeps no latency per
// endpoint (per-host stats are counters and gauges), so latency stays per backend (latencyP99Ms).
type EndpointStatus struct {
	// address is ip:port.
	Address string `json:"address"`
	// weight is the load balancing weight the proxies hold for it.
	Weight int32 `json:"weight,omitempty"`
	// requests and errors (5xx and connection failures) cover the backend's windowSeconds.
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
	// requestsPerSecond is over the last reading of the proxies' stats (--proxy-stats-interval), e.g. 12.5.
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	// activeRequests is in flight at the last reading.
	ActiveRequests int64 `json:"activeRequests"`
	// errorRate is errors/requests, a fraction from 0 to 1 (0.004 is 0.4 %); unset without requests.
	ErrorRate *float64 `json:"errorRate,omitempty"`
	// connectionsActive are open to it at the last reading (cx_active).
	ConnectionsActive int64 `json:"connectionsActive,omitempty"`
	// connections were opened to it over the backend's windowSeconds (cx_total).
	Connections int64 `json:"connections,omitempty"`
	// connectFailures are connections to it that failed over the backend's windowSeconds (cx_connect_fail).
	ConnectFailures int64 `json:"connectFailures,omitempty"`
	// timeouts counts its requests that timed out over windowSeconds (rq_timeout).
	Timeouts int64 `json:"timeouts,omitempty"`
	// zone is the endpoint's zone (its locality), priority its priority level (0 is used first) and backup
	// marks a backup endpoint (a level after every other one).
	Zone     string `json:"zone,omitempty"`
	Priority int32  `json:"priority,omitempty"`
	Backup   bool   `json:"backup,omitempty"`
	// expectedShare is the share of the backend's requests lbplane's traffic model predicts for it from the
	// config Envoy runs and the endpoints not taking traffic (priority levels, overprovisioning, zone weights,
	// zone-aware routing for the zones of the group's Envoys, the algorithm's spread): a fraction from 0 to
	// 1 (0.333 is a third). The backend's expectedCaveats say what it leaves out.
	ExpectedShare float64 `json:"expectedShare"`
	// observedShare is its part of the backend's requests over windowSeconds, a fraction from 0 to 1; unset
	// while the backend has no requests.
	ObservedShare *float64 `json:"observedShare,omitempty"`
	// reasons it takes no new traffic on some proxy, empty when it is healthy everywhere.
	Reasons []string `json:"reasons,omitempty"`
	// ejectedOn is on how many of the reporting proxies it takes no new traffic, of reportedBy.
	EjectedOn int32 `json:"ejectedOn,omitempty"`
	// reportedBy is how many proxies have the endpoint.
	ReportedBy int32 `json:"reportedBy,omitempty"`
	// health is the counted view: Healthy, or Ejected when a majority of the proxies that have it take no
	// traffic to it.
	Health EndpointHealth `json:"health,omitempty"`
	// unknownSince is when its health became Unknown.
	UnknownSince *metav1.Time `json:"unknownSince,omitempty"`
	// warmingPercent is set while the endpoint is inside its backend's slow-start window
	// (loadBalancing.slowStart): the percentage of its weight Envoy gives it now, rounded down (40: "warming,
	// 40 % of full weight"), the lowest over the Envoys that report when they started its ramp. An Envoy
	// starts it when it adds the endpoint, or, with active health checks, when the endpoint passes a check
	// after failing or waiting for its first; lbplane takes that time from the Envoy's stats, as the middle
	// of the two reads between which the endpoint appeared or turned healthy, so to within half the time
	// between reads (--proxy-stats-interval). Unset once the window has passed, without slow start, and on
	// an Envoy where lbplane did not see the ramp start (the endpoint was there at its first read of it).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=99
	WarmingPercent *int32 `json:"warmingPercent,omitempty"`
}

// EndpointHealth is an endpoint's health as status counts it.
// +kubebuilder:validation:Enum=Healthy;Ejected;Unknown
type EndpointHealth string

// Endpoint health values.
const (
	EndpointHealthy EndpointHealth = "Healthy"
	EndpointEjected EndpointHealth = "Ejected"
	// EndpointUnknown: nothing says whether it would answer (passive checks only, and no recent traffic
	// to it since it was last ejected).
	EndpointUnknown EndpointHealth = "Unknown"
)

// BackendEndpointCounts counts a backend's endpoints.
type BackendEndpointCounts struct {
	Total   int32 `json:"total"`
	Healthy int32 `json:"healthy"`
	Ejected int32 `json:"ejected"`
	// mismatched counts the endpoints the Envoys disagree on (ejected on some, taking traffic on others).
	Mismatched int32 `json:"mismatched,omitempty"`
	// unknown counts the endpoints whose outlier ejection lapsed, with passive checks only, and that have not
	// answered a request since: nothing shows they are up, so they are not counted healthy.
	Unknown int32 `json:"unknown,omitempty"`
}

// EndpointMismatch is an endpoint the Envoys disagree on.
type EndpointMismatch struct {
	// address is ip:port.
	Address string `json:"address"`
	// ejectedOn names the Envoys (node ids) that take no traffic to it (at most 16).
	// +kubebuilder:validation:MaxItems=16
	EjectedOn []string `json:"ejectedOn"`
	// healthyOn names the Envoys that send it traffic (at most 16).
	// +kubebuilder:validation:MaxItems=16
	HealthyOn []string `json:"healthyOn"`
	// reasons the ejecting Envoys give.
	Reasons []string `json:"reasons,omitempty"`
	// counted tells which view the backend's counts take: true when a majority ejects it.
	Counted bool `json:"counted"`
}

// ProxyBackendHealth is one Envoy's own view of a backend's endpoints.
type ProxyBackendHealth struct {
	// node is the Envoy's node id.
	Node string `json:"node"`
	// endpoints as this Envoy has them; its ejections count here, for everyone only with a majority.
	Endpoints BackendEndpointCounts `json:"endpoints"`
	// mismatch is true when this Envoy's view of some endpoint differs from the counted one.
	Mismatch bool `json:"mismatch,omitempty"`
}

// EjectedEndpoint is an endpoint that does not receive traffic.
type EjectedEndpoint struct {
	// address is ip:port.
	Address string `json:"address"`
	// reasons, e.g. "active health check failed", "outlier detection: consecutive 5xx".
	Reasons []string `json:"reasons"`
	// proxies is on how many of the reporting Envoys it is ejected.
	Proxies int32 `json:"proxies"`
	// nodes names them (at most 16).
	// +kubebuilder:validation:MaxItems=16
	Nodes []string `json:"nodes,omitempty"`
}

// EndpointCounts counts endpoints.
type EndpointCounts struct {
	Total   int32 `json:"total"`
	Healthy int32 `json:"healthy"`
	// mismatched counts the endpoints the group's Envoys disagree on (status.backends[].mismatches).
	Mismatched int32 `json:"mismatched,omitempty"`
}

// ProxyCounts counts proxies.
type ProxyCounts struct {
	Connected int32 `json:"connected"`
	Synced    int32 `json:"synced"`
}

// ResponseCounts counts the responses Envoy sent clients for a backend, by status class, over the backend's
// windowSeconds: the backend's own and Envoy's for it (503 with no healthy endpoint or past a circuit
// breaker, 504 on a timeout). Envoy: cluster.<name>.upstream_rq_<n>xx.
type ResponseCounts struct {
	Informational int64 `json:"1xx,omitempty"`
	Success       int64 `json:"2xx"`
	Redirection   int64 `json:"3xx"`
	ClientError   int64 `json:"4xx"`
	ServerError   int64 `json:"5xx"`
}

// Total is every response counted.
func (r *ResponseCounts) Total() int64 {
	return r.Informational + r.Success + r.Redirection + r.ClientError + r.ServerError
}

// ConnectionCounts are a backend's connections to its endpoints, summed over the proxies.
type ConnectionCounts struct {
	// active are open at the last reading (cx_active).
	Active int64 `json:"active"`
	// opened over windowSeconds (cx_total).
	Opened int64 `json:"opened"`
	// connectFailures over windowSeconds: connections an endpoint refused or did not answer in time
	// (cx_connect_fail).
	ConnectFailures int64 `json:"connectFailures,omitempty"`
}

// ByteCounts are the bytes Envoy exchanged with a backend's endpoints over windowSeconds.
type ByteCounts struct {
	// received from the endpoints (upstream_cx_rx_bytes_total).
	Received int64 `json:"received"`
	// sent to the endpoints (upstream_cx_tx_bytes_total).
	Sent int64 `json:"sent"`
}
