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
	Groups map[string]*Group
}

// Group is what one proxy group (the Envoys whose node cluster has this name) serves.
type Group struct {
	Name      string
	Listeners []*Listener // sorted by port
	Clusters  []*Cluster  // sorted by name
	Secrets   []*Secret   // sorted by name; delivered over SDS
}

// Secret is TLS material Envoy gets over SDS: a certificate with its key, or a CA bundle.
type Secret struct {
	Name             string
	CertificateChain []byte
	PrivateKey       []byte
	// CA, when set, makes this a validation context instead of a certificate.
	CA []byte
}

// Protocol of a listener.
type Protocol string

const (
	HTTP Protocol = "HTTP"
	TCP  Protocol = "TCP"
)

// Listener is one Envoy listener: one port of one group.
type Listener struct {
	Name     string
	Address  string
	Port     uint32
	Protocol Protocol
	// VirtualHosts (HTTP): one per policy on the port, most specific domains first.
	VirtualHosts []*VirtualHost
	// TCP: the clusters connections are spread over.
	TCP *TCPRoute
	// TLS (HTTPS listeners): one filter chain per certificate, chosen by SNI.
	TLS *ListenerTLS
	// NoRouterDynamicStats turns off the router's per-response upstream stats (upstream_rq_time, per-status
	// counters): about 3 % less Envoy CPU per request, and no latency or error figures per backend.
	NoRouterDynamicStats bool
	// Edge is the listener's hardening against slow, greedy or malformed clients.
	Edge Edge
}

// Edge is a listener's hardening, every value resolved (defaults applied). The HTTP fields are ignored on
// TCP listeners.
type Edge struct {
	// MaxConnections 0 means no per-listener limit (the Envoy-wide one still applies).
	MaxConnections      uint32
	BufferBytes         uint32
	MaxRequestHeadersKB uint32
	MaxHeadersCount     uint32

	RequestHeadersTimeout time.Duration
	StreamIdleTimeout     time.Duration
	ConnectionIdleTimeout time.Duration

	// HTTP2 offers HTTP/2: ALPN h2 on TLS, h2c on plain HTTP.
	HTTP2                        bool
	HTTP2MaxConcurrentStreams    uint32
	HTTP2InitialStreamWindow     uint32
	HTTP2InitialConnectionWindow uint32

	// HeadersWithUnderscores and EscapedSlashes hold Envoy's enum names (REJECT_REQUEST, UNESCAPE_AND_REDIRECT, ...).
	HeadersWithUnderscores string
	NormalizePath          bool
	MergeSlashes           bool
	EscapedSlashes         string
}

// ListenerTLS terminates TLS.
type ListenerTLS struct {
	Chains []TLSChain
	// Default is the chain for clients with no SNI or an unknown name; -1 for none.
	Default    int
	MinVersion string // "TLSv1_2" or "TLSv1_3"
	MaxVersion string
	Ciphers    []string
}

// TLSChain is one certificate and the names it serves.
type TLSChain struct {
	ServerNames []string
	Secret      string
}

// RouteConfigName is the RDS resource an HTTP listener reads.
func (l *Listener) RouteConfigName() string { return l.Name }

// VirtualHost is one policy's share of an HTTP listener.
type VirtualHost struct {
	Name    string
	Source  Source
	Domains []string
	Routes  []*Route
	// UpstreamHostHeader, when set, names a response header that carries the endpoint that served. Left out
	// of the golden IR when empty, so that those files only change for policies that set it.
	UpstreamHostHeader string `json:"UpstreamHostHeader,omitempty"`
}

// PathMatch kinds.
const (
	PathPrefix = "Prefix"
	PathExact  = "Exact"
)

// Route is one HTTP route.
type Route struct {
	Name     string
	Source   Source
	PathType string
	Path     string
	Headers  []HeaderMatch
	Clusters []WeightedCluster
	Timeout  time.Duration
	HashKeys []HashKey
	// IdleTimeout, when set, overrides Envoy's stream idle timeout.
	IdleTimeout *time.Duration
	Retry       *Retry
	Session     *Session
}

// Retry is a route's retry policy.
type Retry struct {
	On                 []string
	StatusCodes        []uint32
	Attempts           uint32
	PerTryTimeout      time.Duration
	BackoffBase        time.Duration
	BackoffMax         time.Duration
	AvoidPreviousHosts bool
}

// Session is stateful session persistence: in a header, or in a cookie.
type Session struct {
	Header string
	Cookie string
	TTL    *time.Duration
	Path   string
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
	Name   string
	Type   string
	Value  string
	Invert bool
}

// WeightedCluster is a route destination.
type WeightedCluster struct {
	Name   string
	Weight uint32
}

// HashKey is one input of a hashing load balancer; exactly one of the inputs is set.
type HashKey struct {
	SourceIP       bool
	Header         string
	QueryParameter string
	Cookie         *CookieKey
	Terminal       bool
}

// CookieKey hashes a cookie; with Generate, Envoy sets it when absent.
type CookieKey struct {
	Name     string
	Generate bool
	TTL      time.Duration
	Path     string
	Secure   bool
	SameSite string
}

// TCPRoute spreads TCP connections over clusters.
type TCPRoute struct {
	Clusters []WeightedCluster
	HashKeys []HashKey
}

// Algorithm is a cluster load-balancing algorithm.
type Algorithm string

const (
	RoundRobin   Algorithm = "RoundRobin"
	LeastRequest Algorithm = "LeastRequest"
	Random       Algorithm = "Random"
	RingHash     Algorithm = "RingHash"
	Maglev       Algorithm = "Maglev"
)

// Cluster is one backend of one policy.
type Cluster struct {
	Name            string
	Source          Source
	Algorithm       Algorithm
	ChoiceCount     uint32
	ConnectTimeout  time.Duration
	CircuitBreakers CircuitBreakers
	Endpoints       []Endpoint

	RingHash        *RingHashSize
	MaglevTableSize uint64
	SlowStart       *SlowStart
	HealthCheck     *HealthCheck
	Outlier         *Outlier
	// PanicThreshold in percent; nil keeps Envoy's default.
	PanicThreshold *float64
	// ZoneFailover orders zones by preference; each becomes a priority level.
	ZoneFailover []string
	HTTP2        bool
	// MaxRequestsPerConnection 0 means no limit.
	MaxRequestsPerConnection uint32
	IdleTimeout              *time.Duration
	TCPKeepalive             *TCPKeepalive
	TLS                      *UpstreamTLS
	// BufferBytes is Envoy's per-connection buffer limit towards the endpoints; 0 keeps Envoy's 1 MiB.
	BufferBytes uint32
}

// RingHashSize bounds the ring.
type RingHashSize struct{ Min, Max uint64 }

// SlowStart ramps new endpoints up.
type SlowStart struct {
	Window           time.Duration
	Aggression       float64
	MinWeightPercent float64
}

// Health check types.
const (
	HealthHTTP = "HTTP"
	HealthTCP  = "TCP"
	HealthGRPC = "GRPC"
)

// HealthCheck is an active health check.
type HealthCheck struct {
	Type               string // HTTP, TCP, GRPC
	Interval, Timeout  time.Duration
	Jitter             time.Duration
	Healthy, Unhealthy uint32
	// HTTP
	Path, Method, Host string
	Statuses           [][2]int64 // half-open [start, end) as Envoy wants them
	Body               string
	// TCP
	Send, Receive string
	// GRPC
	Service string
}

// Outlier is outlier detection; nil detectors are off.
type Outlier struct {
	Consecutive5xx, ConsecutiveGateway, ConsecutiveLocalOrigin *uint32
	SuccessRate                                                *SuccessRate
	FailurePercentage                                          *FailurePercentage
	Interval, BaseEjectionTime                                 time.Duration
	MaxEjectionPercent                                         uint32
}

// SuccessRate ejection; StdevFactor is in thousandths, as Envoy takes it.
type SuccessRate struct{ StdevFactor, MinimumHosts, RequestVolume uint32 }

// FailurePercentage ejection.
type FailurePercentage struct{ Threshold, MinimumHosts, RequestVolume uint32 }

// TCPKeepalive settings; zero values keep the kernel's.
type TCPKeepalive struct {
	Time, Interval time.Duration
	Probes         uint32
}

// UpstreamTLS makes the cluster speak TLS.
type UpstreamTLS struct {
	SNI string
	// CASecret names the validation context secret; empty skips verification.
	CASecret string
}

// CircuitBreakers are the default-priority thresholds.
type CircuitBreakers struct {
	MaxConnections, MaxPendingRequests, MaxRequests, MaxRetries uint32
	// MaxConnectionsPerEndpoint 0 means no per-endpoint cap.
	MaxConnectionsPerEndpoint uint32
	RetryBudget               *RetryBudget
}

// RetryBudget limits retries to a share of active requests.
type RetryBudget struct {
	Percent        float64
	MinConcurrency uint32
}

// Endpoint is one upstream address.
type Endpoint struct {
	Address string
	Port    uint32
	Weight  uint32
	// Draining takes the endpoint out of new traffic; open connections carry on.
	Draining bool
	// HealthCheckPort, when set, is probed instead of Port.
	HealthCheckPort uint32
	// HealthCheckHost, when set, is the Host of HTTP probes of this endpoint.
	HealthCheckHost string
	// Zone is the endpoint's zone (from an EndpointSlice), carried to Envoy as its locality.
	Zone string
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
					checkDest("route "+r.Name, r.Clusters)
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
