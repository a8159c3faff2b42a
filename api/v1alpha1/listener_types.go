// The listener: where Envoy accepts traffic, and the limits, timeouts and protocols of its connections.

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	// address is the IP address Envoy binds. Defaults to "0.0.0.0".
	Address string `json:"address,omitempty"`
	// port is the TCP port Envoy binds. Policies on one port share one listener.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// protocol is HTTP, HTTPS (with tls) or TCP. HTTP and HTTPS run Envoy's HTTP connection manager, TCP its
	// tcp_proxy.
	Protocol Protocol `json:"protocol"`
	// hostnames (HTTP, HTTPS) are the Host header values this policy answers on its port. Several policies may
	// share a port when their hostnames differ. Empty means every host ("*"). Host is matched without its
	// port.
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
	// Connections beyond the bucket are closed before anything is proxied.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// accessLog says what Envoy writes to its standard output for each request (HTTP, HTTPS) or connection
	// (TCP) of this listener. Unset: lbplane serve --access-log decides (default JSON, every request). Like
	// limits, the oldest policy on a shared port sets it, and a newer one that sets it differently conflicts.
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
	// samplePercent logs this share of the requests (HTTP) or connections (TCP), each picked at random: above
	// 0, at most 100 (the default), to a millionth.
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
	// Envoy-wide limit (lbctl bootstrap --max-connections) applies.
	// +kubebuilder:validation:Minimum=1
	MaxConnections *int32 `json:"maxConnections,omitempty"`
	// connectionBufferBytes is how much Envoy buffers per downstream connection before it stops reading.
	// Defaults to 32768 (Envoy's own default is 1 MiB).
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=16777216
	ConnectionBufferBytes *int32 `json:"connectionBufferBytes,omitempty"`
	// maxRequestHeadersKB (HTTP, HTTPS) is the largest request header block, in KiB; larger gets 431. Defaults
	// to 32 (Envoy's own default: 60; nginx 32, HAProxy 16). 15,000 connections each holding an unterminated
	// 30 KiB header block keep Envoy within the default 1 GiB heap budget (e2e TestAttackOneHostHeaderFlood; at
	// 60 KiB its memory passed 1 GiB).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8192
	MaxRequestHeadersKB *int32 `json:"maxRequestHeadersKB,omitempty"`
	// maxHeadersCount (HTTP, HTTPS) is the most request headers accepted; more gets 431. Defaults to 100.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxHeadersCount *int32 `json:"maxHeadersCount,omitempty"`
}

// ListenerTimeouts close downstream connections and streams that stop making progress.
type ListenerTimeouts struct {
	// requestHeaders is how long a client has to send a request's complete headers from its first byte; then
	// the connection is closed. Against slowloris. Defaults to 10s. (Envoy's own default: none.) The client
	// gets 408.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	RequestHeaders *metav1.Duration `json:"requestHeaders,omitempty"`
	// streamIdle closes a request with no activity in either direction for this long. A route's idleTimeout
	// overrides it. Defaults to 5m.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	StreamIdle *metav1.Duration `json:"streamIdle,omitempty"`
	// connectionIdle closes a downstream connection with no open request for this long. Defaults to 1h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	ConnectionIdle *metav1.Duration `json:"connectionIdle,omitempty"`
}

// ListenerHTTP2 is downstream HTTP/2.
type ListenerHTTP2 struct {
	// enabled offers HTTP/2: by ALPN "h2" on HTTPS, as h2c (prior knowledge) on HTTP. Defaults to true on
	// HTTPS and false on HTTP, where clients that want HTTP/2 without TLS are rare and h2c is easy to abuse.
	// On HTTPS, ALPN offers "h2,http/1.1" (off: "http/1.1"); on HTTP, the codec takes either (off: HTTP/1
	// only).
	Enabled *bool `json:"enabled,omitempty"`
	// maxConcurrentStreams per connection. Defaults to 100.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	MaxConcurrentStreams *int32 `json:"maxConcurrentStreams,omitempty"`
	// initialStreamWindowSize in bytes: what a client may send on one stream before Envoy reads it. Defaults
	// to 65536.
	// +kubebuilder:validation:Minimum=65535
	// +kubebuilder:validation:Maximum=2147483647
	InitialStreamWindowSize *int32 `json:"initialStreamWindowSize,omitempty"`
	// initialConnectionWindowSize in bytes, over all streams of a connection. Defaults to 1048576.
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
	// headersWithUnderscores: Reject (default), Drop or Allow.
	HeadersWithUnderscores HeadersWithUnderscores `json:"headersWithUnderscores,omitempty"`
	// normalizePath resolves "." and ".." segments (RFC 3986) before routing, so /public/../admin is routed as
	// /admin. Defaults to true. The request is also forwarded with the normalised path.
	NormalizePath *bool `json:"normalizePath,omitempty"`
	// mergeSlashes turns "//" into "/" before routing. Defaults to true.
	MergeSlashes *bool `json:"mergeSlashes,omitempty"`
	// escapedSlashes: Keep, Reject, UnescapeAndRedirect (default: the client is redirected to the unescaped
	// path, so routing and the backend see one and the same path) or UnescapeAndForward. With the default,
	// /a%2Fb gets a 307 to /a/b.
	EscapedSlashes EscapedSlashes `json:"escapedSlashes,omitempty"`
}

// ListenerProxyProtocol accepts the PROXY protocol on a listener.
type ListenerProxyProtocol struct {
	// optional also accepts connections that start without a PROXY header (their peer address is used).
	// Defaults to false: a connection without one is closed, so that no client can pass as the balancer in
	// front. Either way only trustedSources may connect.
	Optional bool `json:"optional,omitempty"`
	// trustedSources are the CIDRs of the balancers in front (IPv4 or IPv6, e.g. 198.51.100.0/24): a
	// connection whose peer (the TCP connection's own source, not what a PROXY header claims) is elsewhere is
	// closed, and its header is never believed. Empty: loopback only (127.0.0.0/8, ::1/128), and lbctl lint
	// warns. Per port: policies sharing a port must agree.
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
	// what a PROXY protocol header from a trusted source says).
	PerClient *ClientRateLimit `json:"perClient,omitempty"`
	// headers (routes only) adds x-ratelimit-limit, x-ratelimit-remaining and x-ratelimit-reset to the answers
	// (IETF draft-polli-ratelimit-headers-03), for the bucket closest to empty. Defaults to false.
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
