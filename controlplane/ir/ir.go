// Package ir is the intermediate model between policies and Envoy resources: plain values that say what each
// proxy group must serve, with every default already applied and every conflict already resolved. The xDS
// builders read it and nothing else, so they never see a user error.
package ir

import (
	"errors"
	"fmt"
	"time"
)

// Config is everything every proxy group serves.
type Config struct {
	// Groups by proxy group name.
	Groups map[string]*Group `json:"groups,omitempty"`
}

// Group is what one proxy group (the Envoys whose node cluster has this name) serves.
type Group struct {
	Name      string      `json:"name,omitempty"`
	Listeners []*Listener `json:"listeners,omitempty"` // sorted by port
	Clusters  []*Cluster  `json:"clusters,omitempty"`  // sorted by name
	Secrets   []*Secret   `json:"secrets,omitempty"`   // sorted by name; delivered over SDS
	// Shared are the sources of the clusters that policies share, by cluster name: the backend of each
	// policy that uses it, sorted. Such a cluster's own Source names only the backend, the same in each, so
	// that nothing Envoy is sent depends on which policies use it (see Cluster.IsShared).
	Shared map[string][]Source `json:"shared,omitempty"`
}

// Secret is TLS material Envoy gets over SDS: a certificate with its key, or a CA bundle.
type Secret struct {
	Name             string `json:"name,omitempty"`
	CertificateChain []byte `json:"certificateChain,omitempty"`
	PrivateKey       []byte `json:"privateKey,omitempty"`
	// CA, when set, makes this a validation context instead of a certificate.
	CA []byte `json:"ca,omitempty"`
}

// Protocol of a listener.
type Protocol string

const (
	HTTP Protocol = "HTTP"
	TCP  Protocol = "TCP"
)

// Listener is one Envoy listener: one port of one group.
type Listener struct {
	Name     string   `json:"name,omitempty"`
	Address  string   `json:"address,omitempty"`
	Port     uint32   `json:"port,omitempty"`
	Protocol Protocol `json:"protocol,omitempty"`
	// VirtualHosts (HTTP): one per policy on the port, most specific domains first.
	VirtualHosts []*VirtualHost `json:"virtualHosts,omitempty"`
	// TCP: the clusters connections are spread over.
	TCP *TCPRoute `json:"tcp,omitempty"`
	// TLS (HTTPS listeners): one filter chain per certificate, chosen by SNI.
	TLS *ListenerTLS `json:"tls,omitempty"`
	// NoRouterDynamicStats turns off the router's per-response upstream stats (upstream_rq_time, per-status
	// counters): about 3 % less Envoy CPU per request, and no latency or error figures per backend.
	NoRouterDynamicStats bool `json:"noRouterDynamicStats,omitempty"`
	// Edge is the listener's hardening against slow, greedy or malformed clients.
	Edge Edge `json:"edge,omitempty"`
	// AccessLog is what Envoy logs of the listener's requests (HTTP) or connections (TCP): the owner's
	// Edge.AccessLog, or the server's default when the owner sets none. Format "" or AccessLogOff: nothing.
	AccessLog AccessLog `json:"accessLog,omitzero"`
}

// Access log formats (AccessLog.Format).
const (
	AccessLogJSON = "JSON"
	AccessLogText = "Text"
	AccessLogOff  = "Off"
)

// AccessLog is what Envoy writes to its standard output for each request or connection of a listener.
type AccessLog struct {
	// Format is AccessLogJSON, AccessLogText or AccessLogOff.
	Format string `json:"format,omitempty"`
	// SamplePerMillion is the share of requests (connections) logged, in millionths; 0 logs every one.
	SamplePerMillion uint32 `json:"samplePerMillion,omitempty"`
}

// Logs tells whether a writes anything.
func (a AccessLog) Logs() bool { return a.Format != "" && a.Format != AccessLogOff }

// Edge is a listener's hardening, every value resolved (defaults applied). The HTTP fields are ignored on
// TCP listeners.
type Edge struct {
	// MaxConnections 0 means no per-listener limit (the Envoy-wide one still applies).
	MaxConnections      uint32 `json:"maxConnections,omitempty"`
	BufferBytes         uint32 `json:"bufferBytes,omitempty"`
	MaxRequestHeadersKB uint32 `json:"maxRequestHeadersKB,omitempty"`
	MaxHeadersCount     uint32 `json:"maxHeadersCount,omitempty"`

	RequestHeadersTimeout time.Duration `json:"requestHeadersTimeout,omitempty"`
	StreamIdleTimeout     time.Duration `json:"streamIdleTimeout,omitempty"`
	ConnectionIdleTimeout time.Duration `json:"connectionIdleTimeout,omitempty"`

	// HTTP2 offers HTTP/2: ALPN h2 on TLS, h2c on plain HTTP.
	HTTP2                        bool   `json:"http2,omitempty"`
	HTTP2MaxConcurrentStreams    uint32 `json:"http2MaxConcurrentStreams,omitempty"`
	HTTP2InitialStreamWindow     uint32 `json:"http2InitialStreamWindow,omitempty"`
	HTTP2InitialConnectionWindow uint32 `json:"http2InitialConnectionWindow,omitempty"`

	// HeadersWithUnderscores and EscapedSlashes hold Envoy's enum names (REJECT_REQUEST, UNESCAPE_AND_REDIRECT, ...).
	HeadersWithUnderscores string `json:"headersWithUnderscores,omitempty"`
	NormalizePath          bool   `json:"normalizePath,omitempty"`
	MergeSlashes           bool   `json:"mergeSlashes,omitempty"`
	EscapedSlashes         string `json:"escapedSlashes,omitempty"`

	// AcceptProxyProtocol reads a PROXY protocol header first; ProxyProtocolOptional lets connections
	// without one through.
	AcceptProxyProtocol   bool `json:"acceptProxyProtocol,omitempty"`
	ProxyProtocolOptional bool `json:"proxyProtocolOptional,omitempty"`
	// ProxyProtocolTrusted are the network prefixes (CIDRs, comma-separated: Edge stays comparable) whose
	// connections may send a PROXY header: with AcceptProxyProtocol, a connection whose direct peer is
	// elsewhere is closed.
	ProxyProtocolTrusted string `json:"proxyProtocolTrusted,omitempty"`
	// ConnectionRateLimit (TCP) caps new connections; zero is off.
	ConnectionRateLimit RateLimit `json:"connectionRateLimit,omitzero"`
	// AccessLog is the policy's spec.listener.accessLog; zero when it sets none (the listener then gets the
	// server's default, Listener.AccessLog).
	AccessLog AccessLog `json:"accessLog,omitzero"`
}

// ListenerTLS terminates TLS.
type ListenerTLS struct {
	Chains []TLSChain `json:"chains,omitempty"`
	// Default is the chain for clients with no SNI or an unknown name; -1 for none.
	Default    int      `json:"default,omitempty"`
	MinVersion string   `json:"minVersion,omitempty"` // "TLSv1_2" or "TLSv1_3"
	MaxVersion string   `json:"maxVersion,omitempty"`
	Ciphers    []string `json:"ciphers,omitempty"`
}

// TLSChain is one certificate and the names it serves.
type TLSChain struct {
	ServerNames []string `json:"serverNames,omitempty"`
	Secret      string   `json:"secret,omitempty"`
}

// RouteConfigName is the RDS resource an HTTP listener reads.
func (l *Listener) RouteConfigName() string { return l.Name }

// VirtualHost is one policy's share of an HTTP listener.
type VirtualHost struct {
	Name    string   `json:"name,omitempty"`
	Source  Source   `json:"source,omitempty"`
	Domains []string `json:"domains,omitempty"`
	Routes  []*Route `json:"routes,omitempty"`
	// UpstreamHostHeader, when set, names a response header that carries the endpoint that served.
	UpstreamHostHeader string `json:"upstreamHostHeader,omitempty"`
}

// PathMatch kinds.
const (
	PathPrefix        = "Prefix"
	PathSegmentPrefix = "SegmentPrefix"
	PathExact         = "Exact"
	PathRegex         = "RegularExpression"
)

// Route is one HTTP route.
type Route struct {
	Name     string            `json:"name,omitempty"`
	Source   Source            `json:"source,omitempty"`
	PathType string            `json:"pathType,omitempty"`
	Path     string            `json:"path,omitempty"`
	Headers  []HeaderMatch     `json:"headers,omitempty"`
	Clusters []WeightedCluster `json:"clusters,omitempty"`
	Timeout  time.Duration     `json:"timeout,omitempty"`
	HashKeys []HashKey         `json:"hashKeys,omitempty"`
	// IdleTimeout, when set, overrides Envoy's stream idle timeout.
	IdleTimeout *time.Duration `json:"idleTimeout,omitempty"`
	Retry       *Retry         `json:"retry,omitempty"`
	Session     *Session       `json:"session,omitempty"`
	// RateLimit, when set, caps the route's requests (429 beyond).
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// ClientRateLimit, when set (with RateLimit), caps each client address's requests on the route as well.
	ClientRateLimit *ClientRateLimit `json:"clientRateLimit,omitempty"`
	Mirrors         []Mirror         `json:"mirrors,omitempty"`
	// Method, when set, is the request method the route matches.
	Method      string            `json:"method,omitempty"`
	QueryParams []QueryParamMatch `json:"queryParams,omitempty"`
	// RequestHeaders changes the request's headers before it goes upstream.
	RequestHeaders *HeaderChanges `json:"requestHeaders,omitempty"`
	// ResponseHeaders changes the response's headers before it goes to the client (Envoy's own answers too).
	ResponseHeaders *HeaderChanges `json:"responseHeaders,omitempty"`
	// Rewrite, when set, changes the request's host name and path before it goes upstream (with Clusters).
	Rewrite *Rewrite `json:"rewrite,omitempty"`
	// Redirect or DirectResponse, when set, answer the request instead of Clusters (then empty).
	Redirect       *Redirect       `json:"redirect,omitempty"`
	DirectResponse *DirectResponse `json:"directResponse,omitempty"`
	// ErrorWeight is a share of the requests, against the clusters' weights, answered with 500.
	ErrorWeight uint32 `json:"errorWeight,omitempty"`
}

// ErrorCluster is the name a route's ErrorWeight share is sent to: no cluster has it, and Envoy answers a
// request for a missing cluster with 500 (cluster_not_found_response_code).
const ErrorCluster = "lbplane.invalid-backend"

// QueryParamMatch matches one query parameter (Type HeaderExact or HeaderRegex).
type QueryParamMatch struct {
	Name  string `json:"name,omitempty"`
	Type  string `json:"type,omitempty"`
	Value string `json:"value,omitempty"`
}

// HeaderChanges sets, adds and removes headers.
type HeaderChanges struct {
	Set    []HeaderValue `json:"set,omitempty"`
	Add    []HeaderValue `json:"add,omitempty"`
	Remove []string      `json:"remove,omitempty"`
}

// HeaderValue is a header and its value.
type HeaderValue struct {
	Name  string `json:"name,omitempty"`
	Value string `json:"value,omitempty"`
}

// Redirect answers with a redirect; empty fields keep the request's.
type Redirect struct {
	Scheme     string `json:"scheme,omitempty"`
	Hostname   string `json:"hostname,omitempty"`
	Port       uint32 `json:"port,omitempty"`
	PathChange        // its fields inline
	StatusCode uint32 `json:"statusCode,omitempty"`
}

// Rewrite changes a request before it goes upstream; empty fields keep the request's.
type Rewrite struct {
	Hostname   string `json:"hostname,omitempty"`
	PathChange        // its fields inline
}

// PathChange is how a redirect or a rewrite changes the path: FullPath replaces it; PrefixRewrite replaces the
// prefix the route's path match matched (whole segments with a PathSegmentPrefix match), HasPrefix saying so.
// One of the two, or neither.
type PathChange struct {
	FullPath      string `json:"fullPath,omitempty"`
	PrefixRewrite string `json:"prefixRewrite,omitempty"`
	HasPrefix     bool   `json:"hasPrefix,omitempty"`
}

// DirectResponse answers with a fixed status and body.
type DirectResponse struct {
	Status uint32 `json:"status,omitempty"`
	Body   string `json:"body,omitempty"`
}

// Retry is a route's retry policy.
type Retry struct {
	On                 []string      `json:"on,omitempty"`
	StatusCodes        []uint32      `json:"statusCodes,omitempty"`
	Attempts           uint32        `json:"attempts,omitempty"`
	PerTryTimeout      time.Duration `json:"perTryTimeout,omitempty"`
	BackoffBase        time.Duration `json:"backoffBase,omitempty"`
	BackoffMax         time.Duration `json:"backoffMax,omitempty"`
	AvoidPreviousHosts bool          `json:"avoidPreviousHosts,omitempty"`
	// AvoidPreviousPriorities moves retries to other priority levels.
	AvoidPreviousPriorities bool `json:"avoidPreviousPriorities,omitempty"`
}

// Session is stateful session persistence: in a header, or in a cookie.
type Session struct {
	Header string         `json:"header,omitempty"`
	Cookie string         `json:"cookie,omitempty"`
	TTL    *time.Duration `json:"ttl,omitempty"`
	Path   string         `json:"path,omitempty"`
}

// HeaderMatch kinds.
const (
	HeaderExact   = "Exact"
	HeaderPrefix  = "Prefix"
	HeaderPresent = "Present"
	HeaderRegex   = "RegularExpression"
)

// HeaderMatch matches one request header.
type HeaderMatch struct {
	Name   string `json:"name,omitempty"`
	Type   string `json:"type,omitempty"`
	Value  string `json:"value,omitempty"`
	Invert bool   `json:"invert,omitempty"`
}

// WeightedCluster is a route destination.
type WeightedCluster struct {
	Name   string `json:"name,omitempty"`
	Weight uint32 `json:"weight,omitempty"`
}

// HashKey is one input of a hashing load balancer; exactly one of the inputs is set.
type HashKey struct {
	SourceIP       bool       `json:"sourceIP,omitempty"`
	Header         string     `json:"header,omitempty"`
	QueryParameter string     `json:"queryParameter,omitempty"`
	Cookie         *CookieKey `json:"cookie,omitempty"`
	Terminal       bool       `json:"terminal,omitempty"`
	// StripQuery hashes Header (":path") without its query string.
	StripQuery bool `json:"stripQuery,omitempty"`
}

// CookieKey hashes a cookie; with Generate, Envoy sets it when absent.
type CookieKey struct {
	Name     string        `json:"name,omitempty"`
	Generate bool          `json:"generate,omitempty"`
	TTL      time.Duration `json:"ttl,omitempty"`
	Path     string        `json:"path,omitempty"`
	Secure   bool          `json:"secure,omitempty"`
	SameSite string        `json:"sameSite,omitempty"`
}

// TCPRoute spreads TCP connections over clusters.
type TCPRoute struct {
	Clusters []WeightedCluster `json:"clusters,omitempty"`
	HashKeys []HashKey         `json:"hashKeys,omitempty"`
}

// Algorithm is a cluster load-balancing algorithm.
type Algorithm string

const (
	RoundRobin   Algorithm = "RoundRobin"
	LeastRequest Algorithm = "LeastRequest"
	Random       Algorithm = "Random"
	RingHash     Algorithm = "RingHash"
	Maglev       Algorithm = "Maglev"
	// BackendUtilization is client-side weighted round robin (see Utilization).
	BackendUtilization Algorithm = "BackendUtilization"
)

// Cluster is one backend of one policy.
//
// The 4-byte and 1-byte fields are paired (BufferBytes beside ChoiceCount, PerEndpointStats and Resolved beside HTTP2)
// so that no padding is left: 352 bytes, a size class, against 368 in the 384 class. There is one per
// backend of every policy.
type Cluster struct {
	Name string `json:"name,omitempty"`
	// Source of a cluster policies share names its backend alone (see Group.Shared).
	Source      Source    `json:"source,omitempty"`
	Algorithm   Algorithm `json:"algorithm,omitempty"`
	ChoiceCount uint32    `json:"choiceCount,omitempty"`
	// BufferBytes is Envoy's per-connection buffer limit towards the endpoints; 0 keeps Envoy's 1 MiB.
	BufferBytes     uint32          `json:"bufferBytes,omitempty"`
	ConnectTimeout  time.Duration   `json:"connectTimeout,omitempty"`
	CircuitBreakers CircuitBreakers `json:"circuitBreakers,omitempty"`
	Endpoints       []Endpoint      `json:"endpoints,omitempty"`

	RingHash        *RingHashSize `json:"ringHash,omitempty"`
	MaglevTableSize uint64        `json:"maglevTableSize,omitempty"`
	SlowStart       *SlowStart    `json:"slowStart,omitempty"`
	HealthCheck     *HealthCheck  `json:"healthCheck,omitempty"`
	Outlier         *Outlier      `json:"outlier,omitempty"`
	// PanicThreshold in percent; nil keeps Envoy's default.
	PanicThreshold *float64 `json:"panicThreshold,omitempty"`
	// ZoneFailover orders zones by preference; each becomes a priority level.
	ZoneFailover     []string `json:"zoneFailover,omitempty"`
	HTTP2            bool     `json:"http2,omitempty"`
	PerEndpointStats bool     `json:"perEndpointStats,omitempty"`
	// Resolved says the endpoints are the addresses lbplane resolved host names to: one that leaves the
	// answer leaves the cluster at once, as from Envoy's own DNS cluster.
	Resolved bool `json:"resolved,omitempty"`
	// KeepDrainingSessions: a route keeps sessions on this cluster and its backend keeps them on draining
	// (and retired) endpoints: Envoy's override_host_status includes DRAINING.
	KeepDrainingSessions bool `json:"keepDrainingSessions,omitempty"`
	// MaxRequestsPerConnection 0 means no limit.
	MaxRequestsPerConnection uint32         `json:"maxRequestsPerConnection,omitempty"`
	IdleTimeout              *time.Duration `json:"idleTimeout,omitempty"`
	TCPKeepalive             *TCPKeepalive  `json:"tcpKeepalive,omitempty"`
	TLS                      *UpstreamTLS   `json:"tls,omitempty"`

	// ProxyProtocol is "V1" or "V2" to send a PROXY header on each upstream connection; empty: none.
	ProxyProtocol string `json:"proxyProtocol,omitempty"`
	// MaxConnectionDuration, when set, closes upstream connections this long after they opened.
	MaxConnectionDuration *time.Duration `json:"maxConnectionDuration,omitempty"`
	// ActiveRequestBias (LeastRequest), when set, overrides Envoy's 1.0.
	ActiveRequestBias *float64 `json:"activeRequestBias,omitempty"`
	// Utilization (algorithm BackendUtilization) weighs endpoints by the load they report (ORCA).
	Utilization *Utilization `json:"utilization,omitempty"`
	// HashBalanceFactor (RingHash, Maglev) bounds an endpoint's load to this percentage of the mean; 0: none.
	HashBalanceFactor uint32 `json:"hashBalanceFactor,omitempty"`
	// OverprovisioningFactor is Envoy's, in percent; 0 keeps Envoy's 140.
	OverprovisioningFactor uint32 `json:"overprovisioningFactor,omitempty"`
	// ZoneAware, when set, keeps an Envoy's requests in its own zone (RoundRobin, LeastRequest, Random).
	ZoneAware *ZoneAware `json:"zoneAware,omitempty"`
	// ZoneWeights, when set, are the locality weights of the zones; unlisted zones get no traffic.
	ZoneWeights []ZoneWeight `json:"zoneWeights,omitempty"`
	// DNS, when set, makes Envoy resolve the endpoint addresses (host names): the endpoints travel inside the
	// cluster, and there is no EDS resource for it.
	DNS *DNS `json:"dns,omitempty"`
}

// RingHashSize bounds the ring.
type RingHashSize struct{ Min, Max uint64 }

// SlowStart ramps new endpoints up.
type SlowStart struct {
	Window           time.Duration `json:"window,omitempty"`
	Aggression       float64       `json:"aggression,omitempty"`
	MinWeightPercent float64       `json:"minWeightPercent,omitempty"`
}

// Health check types.
const (
	HealthHTTP = "HTTP"
	HealthTCP  = "TCP"
	HealthGRPC = "GRPC"
)

// HealthCheck is an active health check.
type HealthCheck struct {
	Type               string `json:"type,omitempty"` // HTTP, TCP, GRPC
	Interval, Timeout  time.Duration
	Jitter             time.Duration `json:"jitter,omitempty"`
	Healthy, Unhealthy uint32
	// HTTP
	Path, Method, Host string
	Statuses           [][2]int64 `json:"statuses,omitempty"` // half-open [start, end) as Envoy wants them
	Body               string     `json:"body,omitempty"`
	// TCP
	Send, Receive string
	// GRPC
	Service string `json:"service,omitempty"`
}

// Outlier is outlier detection; nil detectors are off.
type Outlier struct {
	Consecutive5xx, ConsecutiveGateway, ConsecutiveLocalOrigin *uint32
	SuccessRate                                                *SuccessRate       `json:"successRate,omitempty"`
	FailurePercentage                                          *FailurePercentage `json:"failurePercentage,omitempty"`
	Interval, BaseEjectionTime                                 time.Duration
	MaxEjectionPercent                                         uint32 `json:"maxEjectionPercent,omitempty"`
	// MaxEjectionTime 0 keeps Envoy's 300s.
	MaxEjectionTime time.Duration `json:"maxEjectionTime,omitempty"`
	AlwaysEjectOne  bool          `json:"alwaysEjectOne,omitempty"`
}

// SuccessRate ejection; StdevFactor is in thousandths, as Envoy takes it.
type SuccessRate struct{ StdevFactor, MinimumHosts, RequestVolume uint32 }

// FailurePercentage ejection.
type FailurePercentage struct{ Threshold, MinimumHosts, RequestVolume uint32 }

// TCPKeepalive settings; zero values keep the kernel's.
type TCPKeepalive struct {
	Time, Interval time.Duration
	Probes         uint32 `json:"probes,omitempty"`
}

// UpstreamTLS makes the cluster speak TLS.
type UpstreamTLS struct {
	SNI string `json:"sni,omitempty"`
	// CASecret names the validation context secret; empty skips verification.
	CASecret string `json:"caSecret,omitempty"`
	// ClientCertSecret names the client certificate secret presented to the endpoints; empty: none.
	ClientCertSecret string `json:"clientCertSecret,omitempty"`
	// AutoSNI sends each endpoint's Hostname as SNI and verifies the certificate against it.
	AutoSNI bool `json:"autoSNI,omitempty"`
}

// CircuitBreakers are the default-priority thresholds.
type CircuitBreakers struct {
	MaxConnections, MaxPendingRequests, MaxRequests, MaxRetries uint32
	// MaxConnectionsPerEndpoint 0 means no per-endpoint cap.
	MaxConnectionsPerEndpoint uint32       `json:"maxConnectionsPerEndpoint,omitempty"`
	RetryBudget               *RetryBudget `json:"retryBudget,omitempty"`
}

// RetryBudget limits retries to a share of active requests.
type RetryBudget struct {
	Percent        float64 `json:"percent,omitempty"`
	MinConcurrency uint32  `json:"minConcurrency,omitempty"`
}

// Endpoint is one upstream address.
//
// Backup sits beside Draining: at the end it took 8 bytes of padding (88 bytes, the 96 class; 80 now).
type Endpoint struct {
	Address string `json:"address,omitempty"`
	Port    uint32 `json:"port,omitempty"`
	Weight  uint32 `json:"weight,omitempty"`
	// Draining takes the endpoint out of new traffic; open connections carry on.
	Draining bool `json:"draining,omitempty"`
	// Backup endpoints form the priority level after every other one.
	Backup bool `json:"backup,omitempty"`
	// Retired endpoints are those of a backend at weight 0 in a cluster merged for sessions across
	// backends: draining, in a priority level after every other (backups included), so that they keep
	// their sessions, take no new client and do not count in the other levels' panic threshold.
	Retired bool `json:"retired,omitempty"`
	// HealthCheckPort, when set, is probed instead of Port.
	HealthCheckPort uint32 `json:"healthCheckPort,omitempty"`
	// HealthCheckHost, when set, is the Host of HTTP probes of this endpoint.
	HealthCheckHost string `json:"healthCheckHost,omitempty"`
	// Zone is the endpoint's zone (from an EndpointSlice), carried to Envoy as its locality.
	Zone string `json:"zone,omitempty"`
	// Hostname is the endpoint's DNS name (Endpoint.hostname), the SNI of UpstreamTLS.AutoSNI.
	Hostname string `json:"hostname,omitempty"`
}

// Errors returned by Validate, so that callers and tests can tell them apart.
var (
	ErrNoName          = errors.New("missing name")
	ErrDuplicateName   = errors.New("duplicate name")
	ErrUnknownCluster  = errors.New("reference to an unknown cluster")
	ErrInvalidPort     = errors.New("invalid port")
	ErrNoDestinations  = errors.New("no destinations")
	ErrInvalidWeight   = errors.New("invalid weight")
	ErrInvalidProtocol = errors.New("invalid protocol")
)

// Validate checks the invariants the builders rely on. A failure here is a bug in translation, not a user
// error: translation reports user errors on the policy instead of emitting them.
func (c *Config) Validate() error {
	var errs []error
	for name, g := range c.Groups {
		if name != g.Name {
			errs = append(errs, fmt.Errorf("group %q stored under %q: %w", g.Name, name, ErrDuplicateName))
		}
		errs = append(errs, g.validate())
	}
	return errors.Join(errs...)
}

func (g *Group) validate() error {
	var errs []error
	clusters := map[string]bool{}
	for _, c := range g.Clusters {
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("group %s cluster: %w", g.Name, ErrNoName))
		}
		if clusters[c.Name] {
			errs = append(errs, fmt.Errorf("group %s cluster %s: %w", g.Name, c.Name, ErrDuplicateName))
		}
		clusters[c.Name] = true
		for _, e := range c.Endpoints {
			if e.Port == 0 || e.Port > 65535 {
				errs = append(errs, fmt.Errorf("cluster %s endpoint %s:%d: %w", c.Name, e.Address, e.Port, ErrInvalidPort))
			}
			if e.Weight == 0 {
				errs = append(errs, fmt.Errorf("cluster %s endpoint %s:%d: %w", c.Name, e.Address, e.Port, ErrInvalidWeight))
			}
		}
	}
	checkDest := func(where string, wcs []WeightedCluster) {
		if len(wcs) == 0 {
			errs = append(errs, fmt.Errorf("%s: %w", where, ErrNoDestinations))
		}
		for _, wc := range wcs {
			if !clusters[wc.Name] {
				errs = append(errs, fmt.Errorf("%s -> %s: %w", where, wc.Name, ErrUnknownCluster))
			}
		}
	}
	listeners := map[string]bool{}
	for _, l := range g.Listeners {
		if listeners[l.Name] {
			errs = append(errs, fmt.Errorf("group %s listener %s: %w", g.Name, l.Name, ErrDuplicateName))
		}
		listeners[l.Name] = true
		if l.Port == 0 || l.Port > 65535 {
			errs = append(errs, fmt.Errorf("listener %s: %w", l.Name, ErrInvalidPort))
		}
		switch l.Protocol {
		case HTTP:
			for _, vh := range l.VirtualHosts {
				for _, r := range vh.Routes {
					if r.Redirect == nil && r.DirectResponse == nil {
						checkDest("route "+r.Name, r.Clusters)
					}
				}
			}
		case TCP:
			if l.TCP == nil {
				errs = append(errs, fmt.Errorf("listener %s: %w", l.Name, ErrNoDestinations))
			} else {
				checkDest("listener "+l.Name, l.TCP.Clusters)
			}
		default:
			errs = append(errs, fmt.Errorf("listener %s protocol %q: %w", l.Name, l.Protocol, ErrInvalidProtocol))
		}
	}
	return errors.Join(errs...)
}

// Utilization is client-side weighted round robin fed by ORCA load reports.
type Utilization struct {
	BlackoutPeriod          time.Duration `json:"blackoutPeriod,omitempty"`
	WeightUpdatePeriod      time.Duration `json:"weightUpdatePeriod,omitempty"`
	WeightExpirationPeriod  time.Duration `json:"weightExpirationPeriod,omitempty"`
	ErrorUtilizationPenalty float64       `json:"errorUtilizationPenalty,omitempty"`
}

// RateLimit is a token bucket: MaxTokens, refilled with Tokens every Interval.
type RateLimit struct {
	Tokens    uint32        `json:"tokens,omitempty"`
	MaxTokens uint32        `json:"maxTokens,omitempty"`
	Interval  time.Duration `json:"interval,omitempty"`
	// Headers adds the x-ratelimit-* headers to answers (routes).
	Headers bool `json:"headers,omitempty"`
}

// ClientRateLimit is a token bucket per client address, for up to MaxClients addresses (least recently seen
// forgotten first).
type ClientRateLimit struct {
	Bucket     RateLimit `json:"bucket"`
	MaxClients uint32    `json:"maxClients,omitempty"`
}

// Mirror copies a share of a route's requests to a cluster.
type Mirror struct {
	Cluster string `json:"cluster,omitempty"`
	Percent uint32 `json:"percent,omitempty"`
}

// DNS is how Envoy resolves a cluster's host-name endpoints.
type DNS struct {
	// Logical makes the name one endpoint (LOGICAL_DNS); otherwise every address is one (STRICT_DNS).
	Logical         bool          `json:"logical,omitempty"`
	RefreshInterval time.Duration `json:"refreshInterval,omitempty"`
	RespectTTL      bool          `json:"respectTTL,omitempty"`
	// LookupFamily holds the API's value: V4Preferred, V4, V6, Auto or All.
	LookupFamily string `json:"lookupFamily,omitempty"`
}
