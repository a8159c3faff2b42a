// Package v1alpha1 holds the LoadBalancerPolicy API (group lbplane.io, version v1alpha1).
//
// The same types serve the Kubernetes CRD and the standalone push API, so that one YAML document works on
// both paths.
//
// +kubebuilder:object:generate=true
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

// Duration fields carry a pattern: a string the schema lets through but Go cannot parse would make every
// lbplane replica fail to list policies, so one bad policy would freeze the updates of all the others.

// LoadBalancerPolicy describes one frontend (a listener) and the backends it balances over, as an nginx
// server + upstream or an HAProxy frontend + backend would.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lbp
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=".spec.listener.protocol"
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=".spec.listener.port"
// +kubebuilder:printcolumn:name="Algorithm",type=string,JSONPath=".status.algorithm"
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=".status.conditions[?(@.type==\"Accepted\")].status"
// +kubebuilder:printcolumn:name="Programmed",type=string,JSONPath=".status.conditions[?(@.type==\"Programmed\")].status"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type LoadBalancerPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LoadBalancerPolicySpec   `json:"spec"`
	Status LoadBalancerPolicyStatus `json:"status,omitempty"`
}

// LoadBalancerPolicyList is a list of policies.
//
// +kubebuilder:object:root=true
type LoadBalancerPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LoadBalancerPolicy `json:"items"`
}

// LoadBalancerPolicySpec is what the user asks for.
type LoadBalancerPolicySpec struct {
	// proxyGroup selects the Envoys that serve this policy: those whose bootstrap node cluster equals it.
	// Defaults to "default". Envoy: node.cluster in the bootstrap (lbctl bootstrap --proxy-group).
	ProxyGroup string `json:"proxyGroup,omitempty"`

	// listener is the frontend: where Envoy accepts traffic.
	Listener Listener `json:"listener"`

	// routes (HTTP listeners only) send matching requests to weighted backends. Routes are tried in order; a
	// policy with no routes sends everything to all of its backends, equally weighted. No routes means one
	// route, prefix "/", to every backend with weight 1.
	// +kubebuilder:validation:MaxItems=1000
	Routes []Route `json:"routes,omitempty"`

	// backends are named sets of endpoints and how to balance over them.
	// +kubebuilder:validation:MaxItems=100
	Backends []Backend `json:"backends"`

	// debugHeaders (HTTP listeners) adds the x-lbplane-upstream response header, the address:port of the
	// endpoint that served the request, to every response of the policy's routes. lbctl trace --live reads
	// it to compare Envoy's pick with its offline answer. Off by default: it tells clients your endpoints'
	// addresses. HTTP and HTTPS only. Envoy: response_headers_to_add "x-lbplane-upstream: %UPSTREAM_HOST%" on
	// the policy's virtual host.
	DebugHeaders bool `json:"debugHeaders,omitempty"`

	// rollout makes a change of this policy reach the group's Envoys in stages, each judged on the Envoys'
	// own numbers and rolled back on a breach (docs/rollouts.md). Unset: a change reaches every Envoy at
	// once, unless the push asks for stages (lbctl push-config --rollout staged) or the server makes every
	// change staged (lbplane serve --rollout-default staged).
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`
}

// UpstreamHostHeader is the response header debugHeaders adds.
const UpstreamHostHeader = "x-lbplane-upstream"

// Protocol is a listener protocol.
// +kubebuilder:validation:Enum=HTTP;HTTPS;TCP
// +kubebuilder:validation:MaxLength=32
type Protocol string

const (
	ProtocolHTTP  Protocol = "HTTP"
	ProtocolHTTPS Protocol = "HTTPS"
	ProtocolTCP   Protocol = "TCP"
)

// Listener is where Envoy accepts traffic for the policy.
//
// +kubebuilder:validation:XValidation:rule="(self.protocol == 'HTTPS') == has(self.tls)",message="tls is required with protocol HTTPS and only allowed with it",fieldPath=".tls"
// +kubebuilder:validation:XValidation:rule="self.protocol != 'TCP' || !has(self.hostnames)",message="hostnames are not allowed on a TCP listener",fieldPath=".hostnames"
type Listener struct {
	// address is the IP address Envoy binds. Defaults to "0.0.0.0". Envoy: Listener.address.
	Address string `json:"address,omitempty"`
	// port is the TCP port Envoy binds. Envoy: Listener.address.port_value; policies on one port share one
	// listener.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// protocol is HTTP, HTTPS (with tls) or TCP. Envoy: the HTTP connection manager (HTTP, HTTPS) or tcp_proxy
	// (TCP).
	Protocol Protocol `json:"protocol"`
	// hostnames (HTTP, HTTPS) are the Host header values this policy answers on its port. Several policies may
	// share a port when their hostnames differ. Empty means every host ("*"). Envoy: VirtualHost.domains; Host
	// is matched without its port (strip_any_host_port).
	// +kubebuilder:validation:MaxItems=100
	Hostnames []string `json:"hostnames,omitempty"`
	// tls terminates TLS (protocol HTTPS).
	TLS *ListenerTLS `json:"tls,omitempty"`
	// limits bound what one client can make Envoy hold. Unset fields keep lbplane's edge defaults; see the
	// reference's "Listener: fixed choices and edge defaults". Policies sharing a port share these and timeouts,
	// http2 and requests: the oldest policy on the port sets them, and a newer one that sets them differently
	// conflicts.
	Limits *ListenerLimits `json:"limits,omitempty"`
	// timeouts (HTTP, HTTPS) close connections and streams that stop making progress.
	Timeouts *ListenerTimeouts `json:"timeouts,omitempty"`
	// http2 (HTTP, HTTPS) turns downstream HTTP/2 on or off and bounds it.
	HTTP2 *ListenerHTTP2 `json:"http2,omitempty"`
	// requests (HTTP, HTTPS) says how Envoy treats header names with underscores and unusual paths.
	Requests *ListenerRequests `json:"requests,omitempty"`
	// proxyProtocol accepts the PROXY protocol (v1 and v2) from a load balancer in front of Envoy, so that
	// Envoy, and the backends after it, see the original client address.
	ProxyProtocol *ListenerProxyProtocol `json:"proxyProtocol,omitempty"`
	// rateLimit (TCP) caps the connections accepted, with a token bucket. HTTP listeners limit per route.
	// Envoy: the network filter envoy.filters.network.local_ratelimit before tcp_proxy; connections beyond the
	// bucket are closed.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// accessLog says what Envoy writes to its standard output for each request (HTTP, HTTPS) or connection
	// (TCP) of this listener. Unset: lbplane serve --access-log decides (default JSON, every request). Like
	// limits, the oldest policy on a shared port sets it, and a newer one that sets it differently
	// conflicts. Envoy: access_log envoy.access_loggers.stdout on the HTTP connection manager or tcp_proxy.
	AccessLog *AccessLog `json:"accessLog,omitempty"`
}

// AccessLogFormat is how Envoy writes an access log line.
// +kubebuilder:validation:Enum=JSON;Text
type AccessLogFormat string

// Access log formats.
const (
	// AccessLogJSON writes one JSON object a line, with the fields docs/operations.md lists.
	AccessLogJSON AccessLogFormat = "JSON"
	// AccessLogText writes Envoy's default text line with lbplane's fields (policy, backend, endpoint) after it.
	AccessLogText AccessLogFormat = "Text"
)

// AccessLog is a listener's access log.
type AccessLog struct {
	// disabled turns the listener's access log off.
	Disabled bool `json:"disabled,omitempty"`
	// format is JSON (default) or Text.
	// +optional
	Format AccessLogFormat `json:"format,omitempty"`
	// samplePercent logs this share of the requests (HTTP) or connections (TCP), each picked at random:
	// above 0, at most 100 (the default), to a millionth. Envoy: an access log runtime_filter.
	// +kubebuilder:validation:ExclusiveMinimum=true
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	SamplePercent *float64 `json:"samplePercent,omitempty"`
}

// ListenerLimits bound a listener's connections and what each may buffer.
type ListenerLimits struct {
	// maxConnections caps the connections open on this listener at once (each certificate's filter chain
	// counts its own); connections beyond it are closed as soon as they are accepted. Unset means only the
	// Envoy-wide limit (lbctl bootstrap --max-connections) applies. Envoy:
	// envoy.filters.network.connection_limit, first in each filter chain.
	// +kubebuilder:validation:Minimum=1
	MaxConnections *int32 `json:"maxConnections,omitempty"`
	// connectionBufferBytes is how much Envoy buffers per downstream connection before it stops reading
	// (per_connection_buffer_limit_bytes). Defaults to 32768 (Envoy's own default is 1 MiB).
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=16777216
	ConnectionBufferBytes *int32 `json:"connectionBufferBytes,omitempty"`
	// maxRequestHeadersKB (HTTP, HTTPS) is the largest request header block, in KiB; larger gets 431. Defaults to
	// 32 (Envoy: 60; nginx 32, HAProxy 16). Envoy: max_request_headers_kb. 15,000 connections each holding an
	// unterminated 30 KiB header block keep Envoy within the default 1 GiB heap budget (e2e
	// TestAttackOneHostHeaderFlood; at 60 KiB its memory passed 1 GiB).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8192
	MaxRequestHeadersKB *int32 `json:"maxRequestHeadersKB,omitempty"`
	// maxHeadersCount (HTTP, HTTPS) is the most request headers accepted; more gets 431. Defaults to 100.
	// Envoy: common_http_protocol_options.max_headers_count.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxHeadersCount *int32 `json:"maxHeadersCount,omitempty"`
}

// ListenerTimeouts close downstream connections and streams that stop making progress.
type ListenerTimeouts struct {
	// requestHeaders is how long a client has to send a request's complete headers from its first byte
	// (request_headers_timeout); then the connection is closed. Against slowloris. Defaults to 10s. (Envoy's
	// own default: none.) The client gets 408.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	RequestHeaders *metav1.Duration `json:"requestHeaders,omitempty"`
	// streamIdle closes a request with no activity in either direction for this long (stream_idle_timeout).
	// A route's idleTimeout overrides it. Defaults to 5m.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	StreamIdle *metav1.Duration `json:"streamIdle,omitempty"`
	// connectionIdle closes a downstream connection with no open request for this long
	// (common_http_protocol_options.idle_timeout). Defaults to 1h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	ConnectionIdle *metav1.Duration `json:"connectionIdle,omitempty"`
}

// ListenerHTTP2 is downstream HTTP/2.
type ListenerHTTP2 struct {
	// enabled offers HTTP/2: by ALPN "h2" on HTTPS, as h2c (prior knowledge) on HTTP. Defaults to true on
	// HTTPS and false on HTTP, where clients that want HTTP/2 without TLS are rare and h2c is easy to abuse.
	// Envoy: on HTTPS, ALPN "h2,http/1.1" (off: "http/1.1" and codec_type HTTP1); on HTTP, codec_type AUTO (off:
	// HTTP1).
	Enabled *bool `json:"enabled,omitempty"`
	// maxConcurrentStreams per connection. Defaults to 100. Envoy:
	// http2_protocol_options.max_concurrent_streams.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	MaxConcurrentStreams *int32 `json:"maxConcurrentStreams,omitempty"`
	// initialStreamWindowSize in bytes: what a client may send on one stream before Envoy reads it.
	// Defaults to 65536. Envoy: http2_protocol_options.initial_stream_window_size.
	// +kubebuilder:validation:Minimum=65535
	// +kubebuilder:validation:Maximum=2147483647
	InitialStreamWindowSize *int32 `json:"initialStreamWindowSize,omitempty"`
	// initialConnectionWindowSize in bytes, over all streams of a connection. Defaults to 1048576. Envoy:
	// http2_protocol_options.initial_connection_window_size.
	// +kubebuilder:validation:Minimum=65535
	// +kubebuilder:validation:Maximum=2147483647
	InitialConnectionWindowSize *int32 `json:"initialConnectionWindowSize,omitempty"`
}

// HeadersWithUnderscores is what happens to a request header whose name has an underscore.
// +kubebuilder:validation:Enum=Reject;Drop;Allow
type HeadersWithUnderscores string

const (
	// UnderscoresReject answers 400: such names can alias dash-named headers in CGI-style backends
	// (X_Auth_User becomes X-Auth-User), so a client could smuggle an identity header past a filter.
	UnderscoresReject HeadersWithUnderscores = "Reject"
	// UnderscoresDrop removes the header and passes the request on.
	UnderscoresDrop HeadersWithUnderscores = "Drop"
	// UnderscoresAllow passes it on unchanged (Envoy's own default).
	UnderscoresAllow HeadersWithUnderscores = "Allow"
)

// EscapedSlashes is what happens to %2F and %5C in a request path.
// +kubebuilder:validation:Enum=Keep;Reject;UnescapeAndRedirect;UnescapeAndForward
type EscapedSlashes string

const (
	EscapedSlashesKeep                EscapedSlashes = "Keep"
	EscapedSlashesReject              EscapedSlashes = "Reject"
	EscapedSlashesUnescapeAndRedirect EscapedSlashes = "UnescapeAndRedirect"
	EscapedSlashesUnescapeAndForward  EscapedSlashes = "UnescapeAndForward"
)

// ListenerRequests says how requests are normalised before routing.
type ListenerRequests struct {
	// headersWithUnderscores: Reject (default), Drop or Allow. Envoy: headers_with_underscores_action
	// (REJECT_REQUEST answers 400, DROP_HEADER, ALLOW).
	HeadersWithUnderscores HeadersWithUnderscores `json:"headersWithUnderscores,omitempty"`
	// normalizePath resolves "." and ".." segments (RFC 3986) before routing, so /public/../admin is routed
	// as /admin. Defaults to true. The request is also forwarded with the normalised path. Envoy:
	// normalize_path.
	NormalizePath *bool `json:"normalizePath,omitempty"`
	// mergeSlashes turns "//" into "/" before routing. Defaults to true. Envoy: merge_slashes.
	MergeSlashes *bool `json:"mergeSlashes,omitempty"`
	// escapedSlashes: Keep, Reject, UnescapeAndRedirect (default: the client is redirected to the unescaped
	// path, so routing and the backend see one and the same path) or UnescapeAndForward. With the default,
	// /a%2Fb gets a 307 to /a/b. Envoy: path_with_escaped_slashes_action.
	EscapedSlashes EscapedSlashes `json:"escapedSlashes,omitempty"`
}

// TLSVersion is a TLS protocol version.
// +kubebuilder:validation:Enum=TLSv1.2;TLSv1.3
// +kubebuilder:validation:MaxLength=32
type TLSVersion string

const (
	TLSv12 TLSVersion = "TLSv1.2"
	TLSv13 TLSVersion = "TLSv1.3"
)

// ListenerTLS terminates TLS on an HTTPS listener.
type ListenerTLS struct {
	// certificates are served by SNI, each to the hostnames it lists. One certificate may list none: it serves
	// the listener's hostnames no other certificate lists, and clients that send no SNI or an unknown name
	// (without one, the first certificate answers those).
	// +kubebuilder:validation:MaxItems=100
	Certificates []Certificate `json:"certificates"`
	// minVersion is the lowest TLS version accepted. Defaults to TLSv1.2. Envoy:
	// TlsParameters.tls_minimum_protocol_version.
	MinVersion TLSVersion `json:"minVersion,omitempty"`
	// maxVersion is the highest TLS version accepted. Defaults to TLSv1.3. Envoy:
	// TlsParameters.tls_maximum_protocol_version.
	MaxVersion TLSVersion `json:"maxVersion,omitempty"`
	// cipherSuites (TLS 1.2 and below; TLS 1.3 suites are not configurable) in OpenSSL names, in order of
	// preference. Empty means Envoy's defaults. Envoy: TlsParameters.cipher_suites (BoringSSL names).
	// +kubebuilder:validation:MaxItems=20
	CipherSuites []string `json:"cipherSuites,omitempty"`
}

// Certificate is a certificate chain and its private key, PEM files read by lbplane (standalone mode) and
// delivered to Envoy over SDS; lbplane re-reads them when they change.
type Certificate struct {
	// certificateFile is the PEM certificate chain. Read by lbplane only under its files roots (lbplane serve
	// --files-root) and re-read every 2s; a half-rotated pair keeps the old one. Envoy: an SDS Secret's
	// tls_certificate.
	CertificateFile string `json:"certificateFile,omitempty"`
	// privateKeyFile is the PEM private key. Required with certificateFile; the same rules.
	PrivateKeyFile string `json:"privateKeyFile,omitempty"`
	// secretName references a Secret of type kubernetes.io/tls (Kubernetes mode only).
	SecretName string `json:"secretName,omitempty"`
	// hostnames this certificate is served for (SNI). Empty: the listener's hostnames no other certificate
	// lists, and clients without SNI. Envoy: FilterChainMatch.server_names. A certificate for every name
	// becomes the default_filter_chain, else the oldest policy's first one.
	Hostnames []string `json:"hostnames,omitempty"`
}

// Route sends matching requests to weighted backends.
type Route struct {
	// name identifies the route in status and in the generated Envoy config. Defaults to "route-<index>".
	// Envoy: Route.name, "<namespace>/<policy>/<name>".
	Name string `json:"name,omitempty"`
	// match selects requests. An empty match selects every request.
	Match RouteMatch `json:"match,omitempty"`
	// backends are the weighted destinations of matching requests; empty only with redirect or
	// directResponse. Envoy: RouteAction.cluster, or weighted_clusters for more than one.
	// +kubebuilder:validation:MaxItems=100
	Backends []BackendRef `json:"backends,omitempty"`
	// timeout is the whole-request timeout, from the request's end to the response's end. Defaults to 15s;
	// "0s" disables it. Envoy: RouteAction.timeout.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// idleTimeout closes a request stream (a long poll, a WebSocket) that sends nothing either way for this
	// long. Defaults to Envoy's 5m; "0s" disables it. Envoy: RouteAction.idle_timeout.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`
	// retry retries failed requests on another endpoint. Without a block every route, the implicit one
	// included, retries connect-failure and refused-stream twice on other endpoints, with a 1ms to 10ms back-off:
	// a request that never reached an endpoint is tried on another at once, as nginx's "proxy_next_upstream error"
	// does, safe for every method. attempts: 0 turns it off (with no routes, write the one route to say so).
	// Envoy: RetryPolicy.
	Retry *Retry `json:"retry,omitempty"`
	// sessionPersistence keeps a client on the endpoint that served it, even when endpoints are added or
	// removed, as long as that endpoint is there. Envoy: envoy.filters.http.stateful_session with cookie or
	// header session state, per route.
	SessionPersistence *SessionPersistence `json:"sessionPersistence,omitempty"`
	// rateLimit caps the requests of this route, with a token bucket per Envoy; requests beyond it get 429.
	// Envoy: envoy.filters.http.local_ratelimit, off in the connection manager and turned on per route
	// (typed_per_filter_config, token_bucket). One bucket per route per Envoy.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// mirrors copy a share of the route's requests to other backends of the policy; their answers are
	// dropped, and the client sees only the primary's. A route's own backend cannot be its mirror. Envoy:
	// RouteAction.request_mirror_policies with runtime_fraction; the copy's Host gets "-shadow".
	// +kubebuilder:validation:MaxItems=4
	Mirrors []Mirror `json:"mirrors,omitempty"`
	// requestHeaders changes the request's headers before it is sent to a backend. Envoy:
	// Route.request_headers_to_add and request_headers_to_remove.
	RequestHeaders *HeaderModifier `json:"requestHeaders,omitempty"`
	// redirect answers matching requests with a redirect instead of sending them to a backend; backends must
	// then be empty. Envoy: Route.redirect.
	Redirect *Redirect `json:"redirect,omitempty"`
	// directResponse answers matching requests with a fixed status (and body) instead of sending them to a
	// backend; backends must then be empty. Envoy: Route.direct_response.
	DirectResponse *DirectResponse `json:"directResponse,omitempty"`
	// errorWeight is a share of the route's requests, weighed against the backends' weights, that Envoy
	// answers with 500 Internal Server Error instead: what Gateway API asks for the share of a backend
	// reference that does not resolve. Envoy: a weighted_clusters entry naming no cluster, with
	// cluster_not_found_response_code INTERNAL_SERVER_ERROR.
	// +kubebuilder:validation:Minimum=0
	ErrorWeight *int32 `json:"errorWeight,omitempty"`
}

// HeaderModifier sets, adds and removes HTTP headers.
type HeaderModifier struct {
	// set replaces the header's value, or adds it when absent.
	// +kubebuilder:validation:MaxItems=16
	Set []HeaderValue `json:"set,omitempty"`
	// add appends a value to the header (a comma-separated list), or adds it when absent.
	// +kubebuilder:validation:MaxItems=16
	Add []HeaderValue `json:"add,omitempty"`
	// remove lists header names to remove, case-insensitive.
	// +kubebuilder:validation:MaxItems=16
	Remove []string `json:"remove,omitempty"`
}

// HeaderValue is one header and its value.
type HeaderValue struct {
	// name is the header name, case-insensitive.
	Name string `json:"name"`
	// value is the header's value.
	Value string `json:"value"`
}

// RedirectPathType says how a redirect rewrites the path.
// +kubebuilder:validation:Enum=ReplaceFullPath;ReplacePrefixMatch
// +kubebuilder:validation:MaxLength=32
type RedirectPathType string

const (
	RedirectReplaceFullPath    RedirectPathType = "ReplaceFullPath"
	RedirectReplacePrefixMatch RedirectPathType = "ReplacePrefixMatch"
)

// Redirect answers a request with a redirect; what it does not set is the request's own.
type Redirect struct {
	// scheme is "http" or "https".
	// +kubebuilder:validation:Enum=http;https
	Scheme string `json:"scheme,omitempty"`
	// hostname replaces the request's host name.
	Hostname string `json:"hostname,omitempty"`
	// port replaces the port; unset, the Location carries the scheme's well-known port implicitly.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`
	// path rewrites the path: ReplaceFullPath replaces it, ReplacePrefixMatch replaces the prefix the
	// route's path match matched (which must then be a Prefix match).
	Path *RedirectPath `json:"path,omitempty"`
	// statusCode is 301, 302 (default), 303, 307 or 308.
	// +kubebuilder:validation:Enum=301;302;303;307;308
	StatusCode *int32 `json:"statusCode,omitempty"`
}

// RedirectPath rewrites the path of a redirect.
type RedirectPath struct {
	// type is ReplaceFullPath or ReplacePrefixMatch.
	Type RedirectPathType `json:"type"`
	// value is the new path or prefix; it starts with "/".
	Value string `json:"value"`
}

// DirectResponse answers a request without a backend.
type DirectResponse struct {
	// status is the HTTP status, 200 to 599.
	// +kubebuilder:validation:Minimum=200
	// +kubebuilder:validation:Maximum=599
	Status int32 `json:"status"`
	// body is the response body; empty: none.
	// +kubebuilder:validation:MaxLength=4096
	Body string `json:"body,omitempty"`
}

// RetryOn is a condition that makes Envoy retry.
// +kubebuilder:validation:Enum=connect-failure;reset;5xx;gateway-error;retriable-status-codes;refused-stream
// +kubebuilder:validation:MaxLength=32
type RetryOn string

const (
	RetryOnConnectFailure  RetryOn = "connect-failure"
	RetryOnReset           RetryOn = "reset"
	RetryOn5xx             RetryOn = "5xx"
	RetryOnGatewayError    RetryOn = "gateway-error"
	RetryOnRetriableStatus RetryOn = "retriable-status-codes"
	RetryOnRefusedStream   RetryOn = "refused-stream"
)

// Retry retries failed requests.
type Retry struct {
	// conditions that trigger a retry. Defaults to [connect-failure, refused-stream, reset]. (Not "on": YAML
	// reads that key as the boolean true.) Envoy: RetryPolicy.retry_on.
	// +kubebuilder:validation:MaxItems=6
	Conditions []RetryOn `json:"conditions,omitempty"`
	// statusCodes are retried when conditions has retriable-status-codes. Envoy:
	// RetryPolicy.retriable_status_codes.
	// +kubebuilder:validation:MaxItems=50
	StatusCodes []int32 `json:"statusCodes,omitempty"`
	// attempts is the number of retries after the first try. Defaults to 2. Envoy: RetryPolicy.num_retries.
	Attempts *int32 `json:"attempts,omitempty"`
	// perTryTimeout bounds each try. Defaults to the route timeout. Envoy: RetryPolicy.per_try_timeout.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	PerTryTimeout *metav1.Duration `json:"perTryTimeout,omitempty"`
	// backoff between retries: exponential from base, capped at max. Defaults to 25ms and 10 times base. Envoy:
	// RetryPolicy.retry_back_off.
	Backoff *Backoff `json:"backoff,omitempty"`
	// avoidPreviousHosts retries on endpoints other than those that already failed. Defaults to true. Envoy:
	// retry_host_predicate previous_hosts, host_selection_retry_max_attempts 5.
	AvoidPreviousHosts *bool `json:"avoidPreviousHosts,omitempty"`
	// avoidPreviousPriorities retries on the next priority level (zoneFailover zone) rather than the one that
	// failed. Defaults to false. Envoy: RetryPolicy.retry_priority envoy.retry_priorities.previous_priorities
	// (update_frequency 1).
	AvoidPreviousPriorities bool `json:"avoidPreviousPriorities,omitempty"`
}

// Backoff is an exponential back-off.
type Backoff struct {
	// base is the first back-off. Defaults to 25ms.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Base *metav1.Duration `json:"base,omitempty"`
	// max caps the back-off. Defaults to 10 times base.
	Max *metav1.Duration `json:"max,omitempty"`
}

// SessionPersistenceType says where the session lives.
// +kubebuilder:validation:Enum=Cookie;Header
// +kubebuilder:validation:MaxLength=32
type SessionPersistenceType string

const (
	SessionCookie SessionPersistenceType = "Cookie"
	SessionHeader SessionPersistenceType = "Header"
)

// SessionPersistence pins a client to an endpoint with Envoy's stateful session filter: the endpoint is
// recorded in a cookie or header that the client sends back. A client without one, or whose endpoint is
// gone, is balanced as usual (and by the backend's hash keys when it hashes).
type SessionPersistence struct {
	// type is Cookie or Header. Defaults to Cookie.
	Type SessionPersistenceType `json:"type,omitempty"`
	// name of the cookie or header. Defaults to "lbplane-session".
	Name string `json:"name,omitempty"`
	// ttl of the cookie; unset makes a session cookie. Envoy: Cookie.ttl. Envoy's session states have an
	// absolute TTL only, no idle timeout (Gateway API's idleTimeout has no equivalent).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	TTL *metav1.Duration `json:"ttl,omitempty"`
	// path of the cookie. Defaults to "/". Envoy: Cookie.path.
	Path string `json:"path,omitempty"`
	// acrossBackends also keeps a client on the same backend of a weighted route, while new clients are still
	// spread by the weights. The route's backends are served as one Envoy cluster (each endpoint weighted by
	// its backend's share) with the first backend's load-balancing, health and connection settings, because
	// Envoy can pin a session only within the cluster its router picked.
	AcrossBackends bool `json:"acrossBackends,omitempty"`
}

// RouteMatch selects requests by path and headers; all given conditions must hold.
type RouteMatch struct {
	// path matches the request path.
	Path *PathMatch `json:"path,omitempty"`
	// headers must all match.
	// +kubebuilder:validation:MaxItems=32
	Headers []HeaderMatch `json:"headers,omitempty"`
	// method matches the request method. Envoy: a HeaderMatcher on ":method".
	// +kubebuilder:validation:Enum=GET;HEAD;POST;PUT;DELETE;CONNECT;OPTIONS;TRACE;PATCH
	Method string `json:"method,omitempty"`
	// queryParams must all match. Envoy: RouteMatch.query_parameters.
	// +kubebuilder:validation:MaxItems=16
	QueryParams []QueryParamMatch `json:"queryParams,omitempty"`
}

// QueryParamMatchType says how a query parameter is compared.
// +kubebuilder:validation:Enum=Exact;RegularExpression
// +kubebuilder:validation:MaxLength=32
type QueryParamMatchType string

const (
	QueryParamMatchExact QueryParamMatchType = "Exact"
	QueryParamMatchRegex QueryParamMatchType = "RegularExpression"
)

// QueryParamMatch matches one query parameter.
type QueryParamMatch struct {
	// name is the parameter name, case-sensitive.
	Name string `json:"name"`
	// type is Exact (default) or RegularExpression (RE2). Envoy: QueryParameterMatcher.string_match.
	Type QueryParamMatchType `json:"type,omitempty"`
	// value is compared with the parameter's value.
	Value string `json:"value"`
}

// PathMatchType says how a path is compared.
// +kubebuilder:validation:Enum=Prefix;SegmentPrefix;Exact;RegularExpression
// +kubebuilder:validation:MaxLength=32
type PathMatchType string

const (
	PathMatchPrefix        PathMatchType = "Prefix"
	PathMatchSegmentPrefix PathMatchType = "SegmentPrefix"
	PathMatchExact         PathMatchType = "Exact"
	PathMatchRegex         PathMatchType = "RegularExpression"
)

// PathMatch matches the request path.
type PathMatch struct {
	// type is Prefix, SegmentPrefix, Exact or RegularExpression (RE2, the whole path). Defaults to Prefix, a
	// plain string prefix; SegmentPrefix matches whole path segments, as Gateway API's PathPrefix does ("/foo"
	// matches "/foo" and "/foo/bar", not "/foobar"). Envoy: RouteMatch.prefix, path_separated_prefix, path or
	// safe_regex.
	Type PathMatchType `json:"type,omitempty"`
	// value is the path or prefix; it starts with "/".
	Value string `json:"value"`
}

// HeaderMatchType says how a header is compared.
// +kubebuilder:validation:Enum=Exact;Prefix;Present;RegularExpression
// +kubebuilder:validation:MaxLength=32
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
	// type is Exact, Prefix, Present or RegularExpression (RE2). Defaults to Exact. Envoy: HeaderMatcher
	// string_match exact, prefix or safe_regex, or present_match.
	Type HeaderMatchType `json:"type,omitempty"`
	// value is compared with the header; not allowed with Present.
	Value string `json:"value,omitempty"`
	// invert selects requests where the header does not match. Envoy: HeaderMatcher.invert_match.
	Invert bool `json:"invert,omitempty"`
}

// BackendRef names a backend of the same policy and its share of the route's traffic.
type BackendRef struct {
	// name of a backend in spec.backends.
	Name string `json:"name"`
	// weight is the relative share of traffic. Defaults to 1; 0 sends it nothing. Envoy: the weighted_clusters
	// weight.
	Weight *int32 `json:"weight,omitempty"`
}

// Backend is a named set of endpoints and how to balance over them.
//
// +kubebuilder:validation:XValidation:rule="has(self.endpoints) != has(self.service)",message="set either endpoints or service"
type Backend struct {
	// name identifies the backend within the policy. Required. Envoy: the cluster
	// "<namespace>/<policy>/<name>", with its endpoints over EDS (ADS).
	Name string `json:"name"`
	// endpoints are static address:port entries. Exactly one of endpoints and service is set.
	// +kubebuilder:validation:MaxItems=10000
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// service references a Kubernetes Service (Kubernetes mode only). Envoy: the Service's EndpointSlices
	// become the cluster's endpoints.
	Service *ServiceRef `json:"service,omitempty"`
	// loadBalancing chooses the algorithm. Defaults to RoundRobin.
	// +kubebuilder:default={}
	LoadBalancing LoadBalancing `json:"loadBalancing,omitempty"`
	// connectTimeout bounds the TCP (and TLS) connect to an endpoint. Defaults to 5s. Envoy:
	// Cluster.connect_timeout.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	ConnectTimeout *metav1.Duration `json:"connectTimeout,omitempty"`
	// circuitBreakers cap concurrent work towards the backend. The defaults are high enough not to throttle
	// (Envoy's own defaults of 1024 would). Envoy: Cluster.circuit_breakers.
	CircuitBreakers *CircuitBreakers `json:"circuitBreakers,omitempty"`
	// healthCheck takes failing endpoints out of rotation: actively (probes) and passively (outlier detection).
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
	// connection tunes the connections Envoy opens to the endpoints.
	Connection *Connection `json:"connection,omitempty"`
	// tls makes Envoy speak TLS to the endpoints.
	TLS *BackendTLS `json:"tls,omitempty"`
	// proxyProtocol sends a PROXY protocol header with the client's address at the start of each upstream
	// connection. Each client connection gets its own upstream connection. Envoy: transport_socket
	// upstream_proxy_protocol around the raw or TLS socket.
	ProxyProtocol *BackendProxyProtocol `json:"proxyProtocol,omitempty"`
	// perEndpointStats has Envoy keep request and connection counters per endpoint, so that Prometheus sees
	// each endpoint (envoy_cluster_endpoint_*). Costs memory per endpoint; off by default. Envoy:
	// Cluster.track_cluster_stats.per_endpoint_stats (series with envoy_endpoint_address on the Prometheus
	// endpoint).
	PerEndpointStats bool `json:"perEndpointStats,omitempty"`
	// dns tunes how the backend's host-name endpoints (an endpoint address that is a DNS name instead of an IP
	// address) are resolved. Only allowed when an endpoint address is a name; defaults apply then. lbplane
	// resolves them and sends the addresses it allows as endpoints (EDS); with dns.resolver Envoy: cluster_type
	// envoy.clusters.dns (DnsCluster), with the endpoints in Cluster.load_assignment instead of EDS.
	DNS *BackendDNS `json:"dns,omitempty"`
	// drainingSessions says where a session (a route's sessionPersistence) pinned to one of the backend's
	// endpoints goes once that endpoint drains (state: Draining, lbctl endpoint drain, a terminating Pod, or
	// its backend at weight 0 in a route with sessionPersistence.acrossBackends). Keep (the default) keeps
	// sending the session to it until it leaves the backend, while new clients go to the others, as
	// HAProxy's drain state and Istio's persistent sessions do; Move moves the session to another endpoint
	// at once. An endpoint that fails its health checks loses its sessions either way. Envoy:
	// Cluster.common_lb_config.override_host_status, which with Keep adds DRAINING to Envoy's default
	// UNKNOWN, HEALTHY and DEGRADED, on backends that a route with sessionPersistence sends to.
	// +kubebuilder:default=Keep
	DrainingSessions DrainingSessions `json:"drainingSessions,omitempty"`
}

// DrainingSessions says what happens to the sessions of a draining endpoint.
// +kubebuilder:validation:Enum=Keep;Move
// +kubebuilder:validation:MaxLength=32
type DrainingSessions string

const (
	DrainingSessionsKeep DrainingSessions = "Keep"
	DrainingSessionsMove DrainingSessions = "Move"
)

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
	// protocol is HTTP1 (default) or HTTP2; HTTP2 without tls is h2c, as gRPC backends need. Envoy:
	// HttpProtocolOptions.explicit_http_config.
	Protocol UpstreamProtocol `json:"protocol,omitempty"`
	// maxRequestsPerConnection closes a connection after this many requests. Unset means no limit. Envoy:
	// common_http_protocol_options.max_requests_per_connection.
	MaxRequestsPerConnection *int32 `json:"maxRequestsPerConnection,omitempty"`
	// idleTimeout closes an upstream connection idle this long. Defaults to Envoy's 1h. Envoy:
	// common_http_protocol_options.idle_timeout.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`
	// tcpKeepalive turns on TCP keepalive probes on upstream connections. Envoy:
	// Cluster.upstream_connection_options.tcp_keepalive; unset keeps the kernel's settings.
	TCPKeepalive *TCPKeepalive `json:"tcpKeepalive,omitempty"`
	// bufferBytes is how much Envoy buffers per upstream connection (per_connection_buffer_limit_bytes).
	// Defaults to 32768 (Envoy's own default is 1 MiB).
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=16777216
	BufferBytes *int32 `json:"bufferBytes,omitempty"`
	// maxConnectionDuration closes an upstream connection this long after it opened (once its requests are
	// done), so that long-lived HTTP/2 and gRPC connections are rebalanced onto new endpoints. Unset: never.
	// (HTTP, HTTPS.) Envoy: common_http_protocol_options.max_connection_duration.
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

// BackendTLS makes Envoy connect to the endpoints over TLS.
type BackendTLS struct {
	// sni is the server name sent and verified. Required unless insecureSkipVerify. The certificate's DNS SAN
	// must equal it. Envoy: UpstreamTlsContext.sni.
	SNI string `json:"sni,omitempty"`
	// caFile is the PEM bundle that must have signed the endpoints' certificates. Required unless
	// insecureSkipVerify. Read and re-read by lbplane, only under its files roots; only its CERTIFICATE PEM blocks
	// are sent, and a file that holds a private key is refused. Envoy: an SDS validation context (trusted_ca).
	CAFile string `json:"caFile,omitempty"`
	// insecureSkipVerify accepts any certificate. For tests only.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	// clientCertificate is presented to endpoints that require one (mutual TLS). Envoy:
	// UpstreamTlsContext.common_tls_context.tls_certificate_sds_secret_configs, the SDS secret
	// "<cluster>/client-certificate", re-read like listener certificates and sent only to the policy's proxy
	// group.
	ClientCertificate *ClientCertificate `json:"clientCertificate,omitempty"`
	// autoSNI sends each endpoint its own hostname as SNI and verifies its certificate against that name,
	// instead of one sni for all; every endpoint needs a hostname. Defaults to false. Instead of sni. Envoy:
	// UpstreamTlsContext.auto_host_sni and auto_sni_san_validation, with each endpoint's hostname in
	// LbEndpoint.endpoint.hostname. A DNS backend without sni defaults to it.
	AutoSNI bool `json:"autoSNI,omitempty"`
}

// HealthCheck takes failing endpoints out of rotation.
type HealthCheck struct {
	// active probes every endpoint on a schedule. Envoy: Cluster.health_checks[0].
	Active *ActiveHealthCheck `json:"active,omitempty"`
	// passive ejects endpoints that fail real traffic (outlier detection). Unset, an endpoint is ejected at
	// its first local-origin failure (a refused or timed-out connect, a reset), at most half of the
	// endpoints at once (with backup endpoints: all the primaries, never the last endpoint): a dead endpoint
	// then costs one retried request, not a retry per request until the active checks notice. Set passive to choose the detectors, or passive.disabled to have none.
	// Envoy: Cluster.outlier_detection; unset, split_external_local_origin_errors with
	// consecutive_local_origin_failure 1 and max_ejection_percent 50 (with backups: 100 x primaries / endpoints,
	// rounded up), every other detector off.
	Passive *PassiveHealthCheck `json:"passive,omitempty"`
	// panicThreshold is the percentage of healthy endpoints under which Envoy stops trusting health and
	// balances over every endpoint. Defaults to Envoy's 50; 0 disables panic mode. Envoy:
	// common_lb_config.healthy_panic_threshold.
	PanicThreshold *int32 `json:"panicThreshold,omitempty"`
}

// HealthCheckType is the kind of active probe.
// +kubebuilder:validation:Enum=HTTP;TCP;GRPC
// +kubebuilder:validation:MaxLength=32
type HealthCheckType string

const (
	HealthCheckHTTP HealthCheckType = "HTTP"
	HealthCheckTCP  HealthCheckType = "TCP"
	HealthCheckGRPC HealthCheckType = "GRPC"
)

// ActiveHealthCheck probes each endpoint.
type ActiveHealthCheck struct {
	// type is HTTP, TCP or GRPC.
	Type HealthCheckType `json:"type"`
	// interval between probes of one endpoint. Defaults to 5s. Envoy: interval and no_traffic_interval.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Interval *metav1.Duration `json:"interval,omitempty"`
	// timeout of one probe. Defaults to 1s. Envoy: timeout.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// jitter adds up to this much random delay to each interval. Defaults to 0. Envoy: interval_jitter.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Jitter *metav1.Duration `json:"jitter,omitempty"`
	// healthyThreshold probes must pass in a row to mark an endpoint healthy. Defaults to 2. Envoy:
	// healthy_threshold.
	HealthyThreshold *int32 `json:"healthyThreshold,omitempty"`
	// unhealthyThreshold probes must fail in a row to mark an endpoint unhealthy. Defaults to 3. Envoy:
	// unhealthy_threshold.
	UnhealthyThreshold *int32 `json:"unhealthyThreshold,omitempty"`
	// port probes this port instead of the endpoint's. Envoy: Endpoint.health_check_config.port_value.
	Port *int32 `json:"port,omitempty"`
	// http settings (type HTTP).
	HTTP *HTTPHealthCheck `json:"http,omitempty"`
	// tcp settings (type TCP).
	TCP *TCPHealthCheck `json:"tcp,omitempty"`
	// grpc settings (type GRPC).
	GRPC *GRPCHealthCheck `json:"grpc,omitempty"`
}

// HTTPHealthCheck is an HTTP probe.
type HTTPHealthCheck struct {
	// path probed. Defaults to "/". Envoy: http_health_check.path.
	Path string `json:"path,omitempty"`
	// method of the probe. Defaults to GET. Envoy: http_health_check.method.
	Method string `json:"method,omitempty"`
	// host sent in the probe's Host header. Defaults to the endpoint's own "address:port", never the
	// hostnames the policy serves: a probe tests the endpoint, not a virtual host. Envoy:
	// http_health_check.host when set, else Endpoint.health_check_config.hostname.
	Host string `json:"host,omitempty"`
	// expectedStatuses are the status ranges that pass. Defaults to 200-399 (inclusive). Envoy:
	// expected_statuses (as half-open ranges).
	// +kubebuilder:validation:MaxItems=20
	ExpectedStatuses []StatusRange `json:"expectedStatuses,omitempty"`
	// expectedBody must appear in the first 1 KiB of the response body. Envoy: http_health_check.receive.
	ExpectedBody string `json:"expectedBody,omitempty"`
}

// StatusRange is an inclusive range of HTTP statuses.
type StatusRange struct {
	// start is the first status of the range.
	Start int32 `json:"start"`
	// end is the last status of the range (inclusive).
	End int32 `json:"end"`
}

// TCPHealthCheck connects, optionally sends a payload and expects one back. Without payloads a completed
// connection passes.
type TCPHealthCheck struct {
	// send is a payload written after connecting (text; sent hex-encoded). Envoy: tcp_health_check.send.
	Send string `json:"send,omitempty"`
	// receive must come back for the probe to pass. Envoy: tcp_health_check.receive.
	Receive string `json:"receive,omitempty"`
}

// GRPCHealthCheck calls grpc.health.v1.Health/Check, with the endpoint's "address:port" as authority.
type GRPCHealthCheck struct {
	// serviceName asked about; empty asks about the server as a whole. Envoy: grpc_health_check.service_name.
	ServiceName string `json:"serviceName,omitempty"`
}

// PassiveHealthCheck ejects endpoints that fail real requests (Envoy outlier detection). Each detector is on
// only when its field is set.
type PassiveHealthCheck struct {
	// consecutive5xx responses (or connection failures) eject an endpoint. Off unless set. Envoy:
	// outlier_detection.consecutive_5xx (enforcing 100).
	Consecutive5xx *int32 `json:"consecutive5xx,omitempty"`
	// consecutiveGatewayErrors (502, 503, 504, connection failures) eject an endpoint. Off unless set. Envoy:
	// consecutive_gateway_failure (enforcing 100).
	ConsecutiveGatewayErrors *int32 `json:"consecutiveGatewayErrors,omitempty"`
	// consecutiveLocalOriginFailures (connect failures, timeouts, resets seen by Envoy itself) eject an
	// endpoint; they then no longer count as 5xx. Off unless set. Envoy: split_external_local_origin_errors,
	// consecutive_local_origin_failure.
	ConsecutiveLocalOriginFailures *int32 `json:"consecutiveLocalOriginFailures,omitempty"`
	// successRate ejects endpoints whose success rate is far below the others'. Off unless set. Envoy:
	// success_rate_stdev_factor (x1000), success_rate_minimum_hosts, success_rate_request_volume.
	SuccessRate *SuccessRateEjection `json:"successRate,omitempty"`
	// failurePercentage ejects endpoints whose failure rate is above a threshold. Off unless set. Envoy:
	// failure_percentage_* (enforcing 100).
	FailurePercentage *FailurePercentageEjection `json:"failurePercentage,omitempty"`
	// interval between ejection sweeps. Defaults to 10s. Envoy: outlier_detection.interval.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Interval *metav1.Duration `json:"interval,omitempty"`
	// baseEjectionTime is how long a first ejection lasts; it grows with each ejection. Defaults to 30s. Envoy:
	// outlier_detection.base_ejection_time.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	BaseEjectionTime *metav1.Duration `json:"baseEjectionTime,omitempty"`
	// maxEjectionPercent caps the share of endpoints ejected at once. Defaults to 10 (at least one endpoint
	// can always be ejected). Envoy: outlier_detection.max_ejection_percent.
	MaxEjectionPercent *int32 `json:"maxEjectionPercent,omitempty"`
	// maxEjectionTime caps how long an ejection lasts as it grows with repeated ejections. Defaults to
	// Envoy's 300s. Not below baseEjectionTime. Envoy: OutlierDetection.max_ejection_time.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	MaxEjectionTime *metav1.Duration `json:"maxEjectionTime,omitempty"`
	// alwaysEjectOneEndpoint ejects a failing endpoint even when maxEjectionPercent of the endpoints is less
	// than one endpoint. Defaults to false. Envoy: OutlierDetection.always_eject_one_host.
	AlwaysEjectOneEndpoint bool `json:"alwaysEjectOneEndpoint,omitempty"`
	// disabled turns outlier detection off, the default ejection of endpoints that refuse connections
	// included. No detector may be set with it. Envoy: no outlier_detection at all.
	Disabled bool `json:"disabled,omitempty"`
}

// SuccessRateEjection ejects endpoints whose success rate is below mean - stdevFactor * stdev.
type SuccessRateEjection struct {
	// stdevFactor, as a decimal string. Defaults to "1.9".
	StdevFactor string `json:"stdevFactor,omitempty"`
	// minimumHosts with enough requests for the detector to run. Defaults to 5.
	MinimumHosts *int32 `json:"minimumHosts,omitempty"`
	// requestVolume an endpoint needs in an interval to be judged. Defaults to 100.
	RequestVolume *int32 `json:"requestVolume,omitempty"`
}

// FailurePercentageEjection ejects endpoints whose failure percentage is at or above threshold.
type FailurePercentageEjection struct {
	// threshold percentage. Defaults to 85.
	Threshold *int32 `json:"threshold,omitempty"`
	// minimumHosts with enough requests for the detector to run. Defaults to 5.
	MinimumHosts *int32 `json:"minimumHosts,omitempty"`
	// requestVolume an endpoint needs in an interval to be judged. Defaults to 50.
	RequestVolume *int32 `json:"requestVolume,omitempty"`
}

// Endpoint is one static backend address.
type Endpoint struct {
	// address is the endpoint's IP address, or a DNS name (see the backend's dns): each address the name
	// resolves to is an endpoint on port, as nginx's "server ... resolve" and HAProxy's server-template do.
	// Loopback, link-local and unspecified addresses (in any IPv6 form that carries them), the Envoy host's
	// own addresses, lbplane's and Envoy's own ports there, and names of the host itself (localhost) are
	// refused unless the server allows them, and so is every address a name resolves to, at every refresh;
	// in Kubernetes mode addresses and names are allowed only where the operator says (backends are Services
	// otherwise). Envoy: LbEndpoint.endpoint.address (a name's addresses, with the name as hostname). In
	// standalone mode lbplane serve
	// --allow-backend-cidrs allows more; in Kubernetes mode --address-backends-namespaces and
	// --address-backends-cidrs (docs/security.md, "What a policy can reach").
	// +kubebuilder:validation:MaxLength=253
	Address string `json:"address"`
	// port is the endpoint's TCP port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// weight is the endpoint's relative share for weighted algorithms. Defaults to 1. Envoy:
	// LbEndpoint.load_balancing_weight.
	Weight *int32 `json:"weight,omitempty"`
	// state Draining takes the endpoint out of new traffic while its open connections carry on.
	// Defaults to Active. Envoy: LbEndpoint.health_status DRAINING.
	State EndpointState `json:"state,omitempty"`
	// zone is where the endpoint runs (Envoy's locality zone), for loadBalancing.zoneFailover. Service
	// endpoints take theirs from the EndpointSlice. Envoy: LocalityLbEndpoints.locality.zone.
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone,omitempty"`
	// hostname is the endpoint's DNS name: with tls.autoSNI it is the SNI sent to it and the name its
	// certificate must carry. Envoy: LbEndpoint.endpoint.hostname.
	// +kubebuilder:validation:MaxLength=253
	Hostname string `json:"hostname,omitempty"`
	// backup endpoints get no traffic while the others can serve it: they take it as the others fail health
	// checks (see loadBalancing.failoverThreshold), as nginx's and HAProxy's "backup" servers do. At least
	// one endpoint of a backend is not a backup. Defaults to false. Envoy: the endpoint's
	// LocalityLbEndpoints.priority is one past every other level (after zoneFailover's).
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

// Algorithm is a load-balancing algorithm.
// +kubebuilder:validation:Enum=RoundRobin;LeastRequest;Random;RingHash;Maglev;BackendUtilization
// +kubebuilder:validation:MaxLength=32
type Algorithm string

const (
	AlgorithmRoundRobin   Algorithm = "RoundRobin"
	AlgorithmLeastRequest Algorithm = "LeastRequest"
	AlgorithmRandom       Algorithm = "Random"
	AlgorithmRingHash     Algorithm = "RingHash"
	AlgorithmMaglev       Algorithm = "Maglev"
	// AlgorithmBackendUtilization weighs endpoints by the load they report (ORCA), see BackendUtilization.
	AlgorithmBackendUtilization Algorithm = "BackendUtilization"
)

// LoadBalancing chooses how requests (or connections, on TCP listeners) are spread over endpoints.
//
// +kubebuilder:validation:XValidation:rule="!has(self.slowStart) || !has(self.algorithm) || self.algorithm in ['RoundRobin', 'LeastRequest']",message="slowStart is only allowed with algorithm RoundRobin or LeastRequest",fieldPath=".slowStart"
// +kubebuilder:validation:XValidation:rule="!has(self.hashKeys) || size(self.hashKeys) == 0 || (has(self.algorithm) && self.algorithm in ['RingHash', 'Maglev'])",message="hashKeys are only allowed with algorithm RingHash or Maglev",fieldPath=".hashKeys"
// +kubebuilder:validation:XValidation:rule="!has(self.leastRequest) || (has(self.algorithm) && self.algorithm == 'LeastRequest')",message="leastRequest is only allowed with algorithm LeastRequest",fieldPath=".leastRequest"
// +kubebuilder:validation:XValidation:rule="!has(self.zoneAware) || !has(self.algorithm) || self.algorithm in ['RoundRobin', 'LeastRequest', 'Random']",message="zoneAware is only allowed with algorithm RoundRobin, LeastRequest or Random",fieldPath=".zoneAware"
// +kubebuilder:validation:XValidation:rule="!has(self.zoneAware) || !has(self.zoneFailover) || size(self.zoneFailover) == 0",message="zoneAware is not allowed with zoneFailover",fieldPath=".zoneAware"
// +kubebuilder:validation:XValidation:rule="!has(self.zoneWeights) || size(self.zoneWeights) == 0 || (!has(self.zoneAware) && (!has(self.zoneFailover) || size(self.zoneFailover) == 0) && (!has(self.algorithm) || self.algorithm != 'BackendUtilization'))",message="zoneWeights is not allowed with zoneAware, zoneFailover or algorithm BackendUtilization",fieldPath=".zoneWeights"
type LoadBalancing struct {
	// algorithm is RoundRobin (weighted), LeastRequest, Random, RingHash, Maglev or BackendUtilization. Defaults
	// to RoundRobin. Envoy: Cluster.load_balancing_policy round_robin, least_request, random, ring_hash, maglev
	// or client_side_weighted_round_robin.
	// +kubebuilder:default=RoundRobin
	Algorithm Algorithm `json:"algorithm,omitempty"`
	// leastRequest tunes LeastRequest.
	LeastRequest *LeastRequest `json:"leastRequest,omitempty"`
	// ringHash tunes RingHash.
	RingHash *RingHash `json:"ringHash,omitempty"`
	// maglev tunes Maglev.
	Maglev *Maglev `json:"maglev,omitempty"`
	// hashKeys (RingHash, Maglev) are what a request is hashed on, tried in order; the hashes of the keys a
	// request has are combined. Defaults to the client's address. Envoy: RouteAction.hash_policy (and
	// TcpProxy.hash_policy for the source IP on TCP listeners).
	// +kubebuilder:validation:MaxItems=8
	HashKeys []HashKey `json:"hashKeys,omitempty"`
	// slowStart (RoundRobin, LeastRequest) ramps a new endpoint's share up over a window. Envoy:
	// slow_start_config of round_robin or least_request.
	SlowStart *SlowStart `json:"slowStart,omitempty"`
	// zoneFailover lists zones in order of preference: all traffic goes to the endpoints of the first zone
	// that has any, and spills to the next as the first one's healthy share drops below about 71 % (Envoy's
	// priority levels with its default overprovisioning factor of 1.4). Endpoints of unlisted zones come last.
	// Failover needs to know what is unhealthy: pair it with healthCheck.passive (outlier detection) and,
	// ideally, healthCheck.active. Envoy: LocalityLbEndpoints.priority, listed zones 0, 1, ... in order,
	// unlisted zones last, without gaps.
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	ZoneFailover []string `json:"zoneFailover,omitempty"`
	// backendUtilization tunes BackendUtilization. Envoy:
	// envoy.load_balancing_policies.client_side_weighted_round_robin.
	BackendUtilization *BackendUtilization `json:"backendUtilization,omitempty"`
	// hashBalanceFactor (RingHash, Maglev) bounds the load of any endpoint to this percentage of the mean,
	// plus one request, since Envoy still picks an endpoint that is exactly full (consistent hashing with
	// bounded loads): a request whose endpoint already has more requests in flight goes to the next one on
	// the ring, so one hot key cannot overload one endpoint. 150 allows 1.5 times the
	// mean; the lower, the more keys move under load. Unset: no bound (Envoy's and nginx's default; HAProxy's
	// hash-balance-factor). Envoy: consistent_hashing_lb_config.hash_balance_factor of ring_hash or maglev.
	// Measured (e2e/boundedload_test.go): one hot user among 24, busiest endpoint 3.1 times the mean without, 1.6
	// times with 150.
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=10000
	HashBalanceFactor *int32 `json:"hashBalanceFactor,omitempty"`
	// failoverThreshold is the percentage of healthy endpoints in a priority level (the non-backup endpoints,
	// then the backups; or the zones of zoneFailover) below which traffic starts to spill to the next level,
	// in proportion. 100 spills as soon as one endpoint is unhealthy. Defaults to Envoy's 71 (an
	// overprovisioning factor of 1.4). Needs backup endpoints or zoneFailover. Envoy:
	// ClusterLoadAssignment.policy.overprovisioning_factor = 10000 / threshold.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	FailoverThreshold *int32 `json:"failoverThreshold,omitempty"`
	// zoneAware (RoundRobin, LeastRequest, Random) keeps an Envoy's requests in its own zone while that
	// zone has capacity (see ZoneAware), as Envoy Gateway's zoneAware.preferLocal and Istio's locality
	// failover do. Needs endpoints with a zone and Envoys bootstrapped with one. Envoy:
	// locality_lb_config.zone_aware_lb_config of the algorithm's policy, with force_local_zone.min_size =
	// minEndpoints and min_cluster_size 1.
	ZoneAware *ZoneAware `json:"zoneAware,omitempty"`
	// zoneWeights splits the backend's traffic over zones by weight, whatever the Envoy's own zone (Istio's
	// localityLbSetting.distribute). Endpoints of zones not listed, and endpoints without a zone, get no
	// traffic. Not with zoneAware, zoneFailover or algorithm BackendUtilization. Envoy:
	// locality_lb_config.locality_weighted_lb_config and LocalityLbEndpoints.load_balancing_weight per zone.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=zone
	ZoneWeights []ZoneWeight `json:"zoneWeights,omitempty"`
}

// LeastRequest tunes the LeastRequest algorithm (power of N choices).
type LeastRequest struct {
	// choiceCount is how many random endpoints are compared per pick. Defaults to 2. Envoy:
	// LeastRequest.choice_count.
	ChoiceCount *int32 `json:"choiceCount,omitempty"`
	// activeRequestBias, a decimal string, is how strongly endpoints with more requests in flight are
	// avoided when endpoints have different weights: 0 ignores the requests (weighted round robin), 1 divides
	// the weight by the requests in flight. Defaults to "1.0". Envoy: LeastRequest.active_request_bias.
	ActiveRequestBias string `json:"activeRequestBias,omitempty"`
}

// RingHash tunes the ring (Ketama) consistent hash. Leave it unset unless you need Envoy's own sizing: by
// default every endpoint gets 160 ring entries per unit of weight (as nginx and ketama do), so that removing
// one of N endpoints remaps only its 1/N of the keys. Envoy divides a fixed ring among the endpoints instead,
// which moves about half as many keys again (measured: 32 % instead of 20 % when 1 of 5 leaves). The price of
// the default: the ring size, and so the cluster, changes with the number of endpoints.
type RingHash struct {
	// minimumRingSize in entries. Defaults to 1024 when ringHash is set. Envoy: RingHash.minimum_ring_size.
	MinimumRingSize *int64 `json:"minimumRingSize,omitempty"`
	// maximumRingSize in entries. Defaults to 8388608. Envoy: RingHash.maximum_ring_size.
	MaximumRingSize *int64 `json:"maximumRingSize,omitempty"`
}

// Maglev tunes the Maglev consistent hash.
type Maglev struct {
	// tableSize, a prime. Defaults to 65537. Envoy: Maglev.table_size.
	TableSize *int64 `json:"tableSize,omitempty"`
}

// HashKey is one input of a consistent hash. Exactly one of header, cookie, sourceIP, queryParameter, path
// and host.
//
// +kubebuilder:validation:XValidation:rule="(has(self.header) ? 1 : 0) + (has(self.cookie) ? 1 : 0) + (has(self.sourceIP) ? 1 : 0) + (has(self.queryParameter) ? 1 : 0) + (has(self.path) ? 1 : 0) + (has(self.host) ? 1 : 0) == 1",message="set exactly one of header, cookie, sourceIP, queryParameter, path and host"
type HashKey struct {
	// header hashes a request header. Envoy: hash_policy.header.
	Header *HeaderHashKey `json:"header,omitempty"`
	// cookie hashes a cookie, which Envoy can set. Envoy: hash_policy.cookie.
	Cookie *CookieHashKey `json:"cookie,omitempty"`
	// sourceIP hashes the client's address. Envoy: hash_policy.connection_properties.source_ip.
	SourceIP *SourceIPHashKey `json:"sourceIP,omitempty"`
	// queryParameter hashes a query parameter. Envoy: hash_policy.query_parameter.
	QueryParameter *QueryParameterHashKey `json:"queryParameter,omitempty"`
	// terminal stops at this key when the request has it: later keys are not hashed. Defaults to false. Envoy:
	// hash_policy.terminal.
	Terminal bool `json:"terminal,omitempty"`
	// path (HTTP) hashes the request path, as HAProxy's "balance uri" and nginx's "hash $uri consistent" do:
	// a cache per path. Envoy: hash_policy.header ":path", with a regex_rewrite of "\?.*" to nothing unless
	// withQuery.
	Path *PathHashKey `json:"path,omitempty"`
	// host (HTTP) hashes the Host header (:authority), as HAProxy's "balance hdr(host)" does. Envoy:
	// hash_policy.header ":authority".
	Host *HostHashKey `json:"host,omitempty"`
}

// PathHashKey hashes the request path.
type PathHashKey struct {
	// withQuery also hashes the query string (nginx's $request_uri). Defaults to false: /a?x=1 and /a?x=2
	// land on the same endpoint.
	WithQuery bool `json:"withQuery,omitempty"`
}

// HostHashKey hashes the Host header.
type HostHashKey struct{}

// HeaderHashKey hashes a request header.
type HeaderHashKey struct {
	// name of the header.
	Name string `json:"name"`
}

// QueryParameterHashKey hashes a query parameter.
type QueryParameterHashKey struct {
	// name of the query parameter.
	Name string `json:"name"`
}

// SourceIPHashKey hashes the client's address.
type SourceIPHashKey struct{}

// SameSite is a cookie's SameSite attribute.
// +kubebuilder:validation:Enum=Strict;Lax;None
// +kubebuilder:validation:MaxLength=32
type SameSite string

const (
	SameSiteStrict SameSite = "Strict"
	SameSiteLax    SameSite = "Lax"
	SameSiteNone   SameSite = "None"
)

// CookieHashKey hashes a cookie, and can have Envoy set it when the request has none.
type CookieHashKey struct {
	// name of the cookie.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// generate has Envoy set the cookie on responses to requests that lack it. Envoy: hash_policy.cookie ttl,
	// path and attributes (Envoy always adds HttpOnly).
	Generate *GeneratedCookie `json:"generate,omitempty"`
}

// GeneratedCookie says how Envoy sets a hash cookie. Envoy derives the value from the client's IP address, so
// new clients behind one NAT or proxy start on the same endpoint; session persistence does not have this
// limit.
type GeneratedCookie struct {
	// ttl of the cookie; "0s" makes a session cookie. Defaults to 0s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	TTL *metav1.Duration `json:"ttl,omitempty"`
	// path of the cookie. Defaults to "/".
	Path string `json:"path,omitempty"`
	// secure sends the cookie over HTTPS only. Defaults to false.
	Secure bool `json:"secure,omitempty"`
	// sameSite is Strict, Lax or None (None needs secure). Defaults to Lax.
	SameSite SameSite `json:"sameSite,omitempty"`
}

// SlowStart ramps a new endpoint's share of traffic up over a window, so that a cold cache or JIT is not
// hit with a full share at once.
type SlowStart struct {
	// window over which the share ramps up. Envoy: slow_start_config.slow_start_window.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Window metav1.Duration `json:"window"`
	// aggression, a decimal string: 1.0 ramps linearly, more is faster at first. Defaults to "1.0". Envoy:
	// slow_start_config.aggression.
	Aggression string `json:"aggression,omitempty"`
	// minWeightPercent is the share an endpoint starts with. Defaults to 10. Envoy:
	// slow_start_config.min_weight_percent.
	MinWeightPercent *int32 `json:"minWeightPercent,omitempty"`
}

// CircuitBreakers cap concurrent work towards a backend; past a cap Envoy answers 503 at once.
type CircuitBreakers struct {
	// maxConnections to all endpoints of the backend. Defaults to 1048576 (Envoy's 1024 would throttle load
	// tests). Envoy: circuit_breakers.thresholds.max_connections.
	MaxConnections *int32 `json:"maxConnections,omitempty"`
	// maxPendingRequests waiting for a connection. Defaults to 1048576. Envoy: thresholds.max_pending_requests.
	MaxPendingRequests *int32 `json:"maxPendingRequests,omitempty"`
	// maxRequests in flight. Defaults to 1048576. Envoy: thresholds.max_requests.
	MaxRequests *int32 `json:"maxRequests,omitempty"`
	// maxRetries in flight. Defaults to 1024. Envoy: thresholds.max_retries.
	MaxRetries *int32 `json:"maxRetries,omitempty"`
	// maxConnectionsPerEndpoint caps connections to any one endpoint. Unset means no per-endpoint cap. Envoy:
	// circuit_breakers.per_host_thresholds.max_connections.
	MaxConnectionsPerEndpoint *int32 `json:"maxConnectionsPerEndpoint,omitempty"`
	// retryBudget caps retries as a share of active requests, instead of maxRetries. Envoy:
	// thresholds.retry_budget.
	RetryBudget *RetryBudget `json:"retryBudget,omitempty"`
}

// RetryBudget limits retries to a percentage of requests in flight.
type RetryBudget struct {
	// percent of active requests that may be retries. Defaults to 20.
	Percent *int32 `json:"percent,omitempty"`
	// minConcurrency of retries allowed whatever the percentage. Defaults to 3.
	MinConcurrency *int32 `json:"minConcurrency,omitempty"`
}

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

// ListenerProxyProtocol accepts the PROXY protocol on a listener.
type ListenerProxyProtocol struct {
	// optional also accepts connections that start without a PROXY header (their peer address is used).
	// Defaults to false: a connection without one is closed, so that no client can pass as the balancer in
	// front. Either way only trustedSources may connect. Envoy: the listener filter
	// envoy.filters.listener.proxy_protocol, first, with allow_requests_without_proxy_protocol.
	Optional bool `json:"optional,omitempty"`
	// trustedSources are the CIDRs of the balancers in front (IPv4 or IPv6, e.g. 198.51.100.0/24): a
	// connection whose peer (the TCP connection's own source, not what a PROXY header claims) is elsewhere is
	// closed, and its header is never believed. Empty: loopback only (127.0.0.0/8, ::1/128), and lbctl lint
	// warns. Envoy: every filter chain matches direct_source_prefix_ranges = trustedSources and there is no
	// default filter chain. Per port: policies sharing a port must agree.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	TrustedSources []string `json:"trustedSources,omitempty"`
}

// RateLimit is a token bucket: it holds burst tokens, refilled with requests tokens every interval; each
// request (on TCP listeners, each connection) takes one, and none left means 429 (TCP: the connection is
// closed). The bucket is per Envoy: n Envoys admit n times as much.
type RateLimit struct {
	// requests admitted per interval.
	// +kubebuilder:validation:Minimum=1
	Requests int32 `json:"requests"`
	// interval of the refill. Defaults to 1s; at least 50ms.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Interval *metav1.Duration `json:"interval,omitempty"`
	// burst is the bucket's size: how many may pass at once after a quiet spell. Defaults to requests.
	// +kubebuilder:validation:Minimum=1
	Burst *int32 `json:"burst,omitempty"`
	// perClient (routes only) gives each client address a bucket of its own as well: a request takes a token
	// from its client's bucket and from the route's, and is refused (429) when either is empty, so one client
	// that drains its own bucket does not starve the others. The client address is the connection's peer (or
	// what a PROXY protocol header from a trusted source says). Envoy: the same filter's rate_limits (action
	// remote_address) and a wildcard descriptor {key: remote_address} with its own token_bucket, kept for the
	// maxClients most recently seen addresses; always_consume_default_token_bucket.
	PerClient *ClientRateLimit `json:"perClient,omitempty"`
	// headers (routes only) adds x-ratelimit-limit, x-ratelimit-remaining and x-ratelimit-reset to the
	// answers (IETF draft-polli-ratelimit-headers-03), for the bucket closest to empty. Defaults to false.
	// Envoy: enable_x_ratelimit_headers DRAFT_VERSION_03.
	Headers bool `json:"headers,omitempty"`
}

// ClientRateLimit is a token bucket per client address.
type ClientRateLimit struct {
	// requests admitted per interval, per client address.
	// +kubebuilder:validation:Minimum=1
	Requests int32 `json:"requests"`
	// interval of the refill. Defaults to 1s; at least 50ms.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Interval *metav1.Duration `json:"interval,omitempty"`
	// burst is each client's bucket size. Defaults to requests.
	// +kubebuilder:validation:Minimum=1
	Burst *int32 `json:"burst,omitempty"`
	// maxClients is how many client addresses each Envoy keeps a bucket for, per route: beyond, the least
	// recently seen is forgotten (and starts again with a full bucket). Bounds the memory a spread of
	// addresses can take. Defaults to 10000; at most 1000000.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MaxClients *int32 `json:"maxClients,omitempty"`
}

// Mirror copies requests to a backend, fire and forget.
type Mirror struct {
	// backend names a backend of the policy. It cannot be the route's own backend.
	Backend string `json:"backend"`
	// percent of the route's requests copied. Defaults to 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Percent *int32 `json:"percent,omitempty"`
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

// ClientCertificate is the certificate Envoy presents to TLS endpoints: PEM files read by lbplane
// (standalone mode) or a kubernetes.io/tls Secret (Kubernetes mode), delivered to Envoy over SDS.
type ClientCertificate struct {
	// certificateFile is the PEM certificate chain.
	CertificateFile string `json:"certificateFile,omitempty"`
	// privateKeyFile is the PEM private key.
	PrivateKeyFile string `json:"privateKeyFile,omitempty"`
	// secretName references a Secret of type kubernetes.io/tls in the policy's namespace.
	SecretName string `json:"secretName,omitempty"`
}

// BackendUtilization weighs each endpoint by the load it reports in its responses (ORCA: the
// endpoint-load-metrics header): weight = requests per second / utilization, so busier endpoints get less.
// Endpoints that report nothing get the mean weight.
type BackendUtilization struct {
	// blackoutPeriod is how long an endpoint's reports are ignored after it starts reporting, so that a
	// new endpoint is not flooded on its first low figures. Defaults to 10s. Envoy: blackout_period.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	BlackoutPeriod *metav1.Duration `json:"blackoutPeriod,omitempty"`
	// weightUpdatePeriod is how often weights are recomputed. Defaults to 1s; at least 100ms. Envoy:
	// weight_update_period.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	WeightUpdatePeriod *metav1.Duration `json:"weightUpdatePeriod,omitempty"`
	// weightExpirationPeriod drops the weight of an endpoint that has not reported for this long.
	// Defaults to 3m. Envoy: weight_expiration_period.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	WeightExpirationPeriod *metav1.Duration `json:"weightExpirationPeriod,omitempty"`
	// errorUtilizationPenalty, a decimal string, counts errors per second as extra utilization.
	// Defaults to "1.0". Envoy: error_utilization_penalty.
	ErrorUtilizationPenalty string `json:"errorUtilizationPenalty,omitempty"`
}

// DNSResolution says what the addresses a name resolves to become.
// +kubebuilder:validation:Enum=Strict;Logical
// +kubebuilder:validation:MaxLength=32
type DNSResolution string

const (
	// DNSStrict: every address of every answer is an endpoint, balanced like static ones (Envoy STRICT_DNS,
	// nginx "resolve", HAProxy server-template). Addresses gone from the answer leave the backend.
	DNSStrict DNSResolution = "Strict"
	// DNSLogical: the name is one endpoint; new connections go to the first address of the latest answer
	// (Envoy LOGICAL_DNS). For large external names (CDNs, cloud APIs) whose answers rotate through many
	// addresses, where one endpoint per address would churn connection pools.
	DNSLogical DNSResolution = "Logical"
)

// DNSLookupFamily says which address records Envoy asks for.
// +kubebuilder:validation:Enum=V4Preferred;V4;V6;Auto;All
// +kubebuilder:validation:MaxLength=32
type DNSLookupFamily string

const (
	// DNSV4Preferred: A records, and AAAA only when the name has no A record.
	DNSV4Preferred DNSLookupFamily = "V4Preferred"
	// DNSV4: A records only.
	DNSV4 DNSLookupFamily = "V4"
	// DNSV6: AAAA records only.
	DNSV6 DNSLookupFamily = "V6"
	// DNSAuto: AAAA records, and A only when the name has no AAAA record (Envoy's own default).
	DNSAuto DNSLookupFamily = "Auto"
	// DNSAll: A and AAAA records both.
	DNSAll DNSLookupFamily = "All"
)

// DNSResolver says who resolves a backend's host names.
// +kubebuilder:validation:Enum=Lbplane;Envoy
// +kubebuilder:validation:MaxLength=32
type DNSResolver string

const (
	// DNSResolverLbplane: lbplane resolves the names (its /etc/hosts, then lbplane serve --dns-resolver or
	// its /etc/resolv.conf), checks every address of every answer against the server's backend address
	// rules, and sends the Envoys the addresses it allowed as endpoints (EDS). A name that later answers a
	// forbidden address (DNS rebinding) never reaches the Envoys.
	DNSResolverLbplane DNSResolver = "Lbplane"
	// DNSResolverEnvoy: each Envoy resolves the names itself (Envoy's DNS cluster), with its own resolver;
	// lbplane never sees the addresses, so nothing checks them. Allowed only where the operator opts in
	// (lbplane serve --allow-envoy-dns), for Envoys whose resolver sees other answers than lbplane's.
	DNSResolverEnvoy DNSResolver = "Envoy"
)

// BackendDNS tunes the resolution of a backend's host-name endpoints. lbplane resolves them by default
// (resolver), with the operator's resolvers: an operator's choice, so that a policy means the same on every
// proxy group.
type BackendDNS struct {
	// resolver is Lbplane (the default: lbplane resolves the names, checks every answer against the
	// server's backend address rules and sends the allowed addresses as endpoints) or Envoy (each Envoy
	// resolves them with its own resolver and nothing checks the answers; refused unless lbplane serve
	// --allow-envoy-dns). Envoy: an EDS cluster, or with Envoy a DnsCluster.
	Resolver DNSResolver `json:"resolver,omitempty"`
	// resolution is Strict (each address is an endpoint) or Logical (the name is one endpoint; exactly one
	// endpoint allowed). Defaults to Strict. Envoy: DnsCluster; Logical sets all_addresses_in_single_endpoint.
	Resolution DNSResolution `json:"resolution,omitempty"`
	// refreshInterval is how often the names are resolved again; traffic follows a changed answer within
	// it. Defaults to 5s. At least 100ms. Envoy: DnsCluster.dns_refresh_rate.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`
	// respectTTL resolves again when the answer's TTL runs out instead of every refreshInterval (as nginx
	// does without valid=), no sooner than 5s (or refreshInterval when shorter) and no later than an hour.
	// Defaults to false. Envoy: DnsCluster.respect_dns_ttl.
	RespectTTL bool `json:"respectTTL,omitempty"`
	// lookupFamily is V4Preferred, V4, V6, Auto (IPv6 first) or All. Defaults to V4Preferred: a name with
	// both records is reached over IPv4, which every host can route. Envoy: DnsCluster.dns_lookup_family
	// (V4_PREFERRED, V4_ONLY, V6_ONLY, AUTO, ALL).
	LookupFamily DNSLookupFamily `json:"lookupFamily,omitempty"`
}
