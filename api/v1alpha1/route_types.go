// Routes: matches, backends, timeouts, retries, mirrors, header changes, redirects and direct responses.

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Route sends matching requests to weighted backends.
type Route struct {
	// name identifies the route in status and in the generated Envoy config. Defaults to "route-<index>". Its
	// Envoy route is "<namespace>/<policy>/<name>".
	Name string `json:"name,omitempty"`
	// match selects requests. An empty match selects every request.
	Match RouteMatch `json:"match,omitempty"`
	// backends are the weighted destinations of matching requests; empty only with redirect or
	// directResponse.
	// +kubebuilder:validation:MaxItems=100
	Backends []BackendRef `json:"backends,omitempty"`
	// timeout is the whole-request timeout, from the request's end to the response's end. Defaults to 15s;
	// "0s" disables it.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// idleTimeout closes a request stream (a long poll, a WebSocket) that sends nothing either way for this
	// long. Defaults to Envoy's 5m; "0s" disables it.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`
	// retry retries failed requests on another endpoint. Without a block every route, the implicit one
	// included, retries connect-failure and refused-stream twice on other endpoints, with a 1ms to 10ms
	// back-off: a request that never reached an endpoint is tried on another at once, as nginx's
	// "proxy_next_upstream error" does, safe for every method. attempts: 0 turns it off (with no routes, write
	// the one route to say so).
	Retry *Retry `json:"retry,omitempty"`
	// sessionPersistence keeps a client on the endpoint that served it, even when endpoints are added or
	// removed, as long as that endpoint is there.
	SessionPersistence *SessionPersistence `json:"sessionPersistence,omitempty"`
	// rateLimit caps the requests of this route, with a token bucket per Envoy; requests beyond it get 429.
	// One bucket per route per Envoy.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// mirrors copy a share of the route's requests to other backends of the policy; their answers are dropped,
	// and the client sees only the primary's. A route's own backend cannot be its mirror. The copy's Host gets
	// "-shadow".
	// +kubebuilder:validation:MaxItems=4
	Mirrors []Mirror `json:"mirrors,omitempty"`
	// requestHeaders changes the request's headers before it is sent to a backend.
	RequestHeaders *HeaderModifier `json:"requestHeaders,omitempty"`
	// responseHeaders changes the headers of the response sent to the client: the backend's, or the one
	// Envoy answers with itself (redirect, directResponse). The same names as requestHeaders are refused.
	ResponseHeaders *HeaderModifier `json:"responseHeaders,omitempty"`
	// rewrite changes the request's host name and path before it is sent to a backend; only with backends.
	Rewrite *Rewrite `json:"rewrite,omitempty"`
	// redirect answers matching requests with a redirect instead of sending them to a backend; backends must
	// then be empty.
	Redirect *Redirect `json:"redirect,omitempty"`
	// directResponse answers matching requests with a fixed status (and body) instead of sending them to a
	// backend; backends must then be empty.
	DirectResponse *DirectResponse `json:"directResponse,omitempty"`
	// errorWeight is a share of the route's requests, weighed against the backends' weights, that Envoy
	// answers with 500 Internal Server Error instead: what Gateway API asks for the share of a backend
	// reference that does not resolve.
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

// RedirectPathType says how a redirect or a rewrite changes the path.
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

// RedirectPath changes the path of a redirect or of a rewrite.
type RedirectPath struct {
	// type is ReplaceFullPath or ReplacePrefixMatch.
	Type RedirectPathType `json:"type"`
	// value is the new path or prefix; it starts with "/".
	Value string `json:"value"`
}

// Rewrite changes a request before it is sent to a backend; what it does not set is the request's own.
type Rewrite struct {
	// hostname replaces the request's Host header (HTTP/2 :authority).
	Hostname string `json:"hostname,omitempty"`
	// path changes the path, the query kept: ReplaceFullPath replaces it, ReplacePrefixMatch replaces the
	// prefix the route's path match matched (which must then be a Prefix or SegmentPrefix match). A
	// SegmentPrefix match's prefix is replaced by whole segments, as Gateway API's PathPrefix is: with "/foo"
	// replaced by "/xyz", "/foo/bar" becomes "/xyz/bar" and "/foo" "/xyz"; replaced by "/", "/foo/bar" becomes
	// "/bar" and "/foo" "/". A Prefix match's is replaced as a string.
	Path *RedirectPath `json:"path,omitempty"`
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
	// reads that key as the boolean true.)
	// +kubebuilder:validation:MaxItems=6
	Conditions []RetryOn `json:"conditions,omitempty"`
	// statusCodes are retried when conditions has retriable-status-codes.
	// +kubebuilder:validation:MaxItems=50
	StatusCodes []int32 `json:"statusCodes,omitempty"`
	// attempts is the number of retries after the first try. Defaults to 2.
	Attempts *int32 `json:"attempts,omitempty"`
	// perTryTimeout bounds each try. Defaults to the route timeout.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	PerTryTimeout *metav1.Duration `json:"perTryTimeout,omitempty"`
	// backoff between retries: exponential from base, capped at max. Defaults to 25ms and 10 times base.
	Backoff *Backoff `json:"backoff,omitempty"`
	// avoidPreviousHosts retries on endpoints other than those that already failed. Defaults to true. Up to 5
	// picks are made to find another.
	AvoidPreviousHosts *bool `json:"avoidPreviousHosts,omitempty"`
	// avoidPreviousPriorities retries on the next priority level (zoneFailover zone) rather than the one that
	// failed. Defaults to false.
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

// RouteMatch selects requests by path and headers; all given conditions must hold.
type RouteMatch struct {
	// path matches the request path.
	Path *PathMatch `json:"path,omitempty"`
	// headers must all match.
	// +kubebuilder:validation:MaxItems=32
	Headers []HeaderMatch `json:"headers,omitempty"`
	// method matches the request method.
	// +kubebuilder:validation:Enum=GET;HEAD;POST;PUT;DELETE;CONNECT;OPTIONS;TRACE;PATCH
	Method string `json:"method,omitempty"`
	// queryParams must all match.
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
	// type is Exact (default) or RegularExpression (RE2).
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
	// matches "/foo" and "/foo/bar", not "/foobar").
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

// Mirror copies requests to a backend, fire and forget.
type Mirror struct {
	// backend names a backend of the policy. It cannot be the route's own backend.
	Backend string `json:"backend"`
	// percent of the route's requests copied. Defaults to 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Percent *int32 `json:"percent,omitempty"`
}
