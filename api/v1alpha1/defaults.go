package v1alpha1

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The defaults live here and nowhere else: translation only ever sees a policy that went through Default.
const (
	DefaultNamespace      = "default"
	DefaultProxyGroup     = "default"
	DefaultListenAddress  = "0.0.0.0"
	DefaultRouteTimeout   = 15 * time.Second
	DefaultConnectTimeout = 5 * time.Second
	DefaultChoiceCount    = 2
	DefaultWeight         = 1
	// Envoy's own circuit-breaker defaults (1024 connections, 1024 pending, 1024 requests, 3 retries) throttle
	// an ordinary load test; these are high enough never to be the bottleneck unless the user asks.
	DefaultMaxConnections     = 1 << 20
	DefaultMaxPendingRequests = 1 << 20
	DefaultMaxRequests        = 1 << 20
	DefaultMaxRetries         = 1 << 10

	DefaultRetryAttempts        = 2
	DefaultRetryBackoffBase     = 25 * time.Millisecond
	DefaultSessionName          = "lbplane-session"
	DefaultHealthInterval       = 5 * time.Second
	DefaultHealthTimeout        = time.Second
	DefaultHealthyThreshold     = 2
	DefaultUnhealthyThreshold   = 3
	DefaultOutlierInterval      = 10 * time.Second
	DefaultBaseEjectionTime     = 30 * time.Second
	DefaultMaxEjectionPercent   = 10
	DefaultStdevFactor          = "1.9"
	DefaultSuccessRateHosts     = 5
	DefaultSuccessRateVolume    = 100
	DefaultFailurePercent       = 85
	DefaultFailurePercentHosts  = 5
	DefaultFailurePercentVolume = 50
	DefaultMinRingSize          = 1024
	// RingEntriesPerWeight is how many ring entries each unit of endpoint weight gets when the ring size is
	// not set: nginx's and ketama's 160 points per server.
	RingEntriesPerWeight       = 160
	DefaultMaxRingSize         = 8388608
	DefaultMaglevTableSize     = 65537
	DefaultSlowStartAggression = "1.0"
	DefaultSlowStartMinPercent = 10
	DefaultRetryBudgetPercent  = 20
	DefaultRetryBudgetMinConc  = 3
)

func ptr[T any](v T) *T { return &v }

// Edge defaults, after Envoy's "Configuring Envoy as an edge proxy".
const (
	DefaultConnectionBufferBytes        = 32 * 1024
	DefaultMaxRequestHeadersKB          = 32
	DefaultMaxHeadersCount              = 100
	DefaultRequestHeadersTimeout        = 10 * time.Second
	DefaultStreamIdleTimeout            = 5 * time.Minute
	DefaultConnectionIdleTimeout        = time.Hour
	DefaultHTTP2MaxConcurrentStreams    = 100
	DefaultHTTP2InitialStreamWindow     = 64 * 1024
	DefaultHTTP2InitialConnectionWindow = 1024 * 1024
)

func orDefault[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

func durationOr(p **metav1.Duration, d time.Duration) {
	if *p == nil {
		*p = &metav1.Duration{Duration: d}
	}
}

// Default fills every optional field that has a default, in place. Call it on a copy.
func Default(p *LoadBalancerPolicy) {
	if p.Namespace == "" {
		p.Namespace = DefaultNamespace
	}
	s := &p.Spec
	s.ProxyGroup = s.ProxyGroupOrDefault()
	if s.Listener.Address == "" {
		s.Listener.Address = DefaultListenAddress
	}
	if t := s.Listener.TLS; t != nil {
		if t.MinVersion == "" {
			t.MinVersion = TLSv12
		}
		if t.MaxVersion == "" {
			t.MaxVersion = TLSv13
		}
	}
	for i := range s.Routes {
		r := &s.Routes[i]
		if r.Name == "" {
			r.Name = fmt.Sprintf("route-%d", i)
		}
		if r.Match.Path != nil && r.Match.Path.Type == "" {
			r.Match.Path.Type = PathMatchPrefix
		}
		for j := range r.Match.Headers {
			if r.Match.Headers[j].Type == "" {
				r.Match.Headers[j].Type = HeaderMatchExact
			}
		}
		for j := range r.Match.QueryParams {
			if r.Match.QueryParams[j].Type == "" {
				r.Match.QueryParams[j].Type = QueryParamMatchExact
			}
		}
		for j := range r.Backends {
			if r.Backends[j].Weight == nil {
				r.Backends[j].Weight = ptr(int32(DefaultWeight))
			}
		}
		if r.Timeout == nil {
			r.Timeout = &metav1.Duration{Duration: DefaultRouteTimeout}
		}
		if rt := r.Retry; rt != nil {
			if len(rt.Conditions) == 0 {
				rt.Conditions = []RetryOn{RetryOnConnectFailure, RetryOnRefusedStream, RetryOnReset}
			}
			orDefault(&rt.Attempts, int32(DefaultRetryAttempts))
			orDefault(&rt.AvoidPreviousHosts, true)
			if rt.Backoff == nil {
				rt.Backoff = &Backoff{}
			}
			durationOr(&rt.Backoff.Base, DefaultRetryBackoffBase)
			durationOr(&rt.Backoff.Max, 10*rt.Backoff.Base.Duration)
		}
		if sp := r.SessionPersistence; sp != nil {
			if sp.Type == "" {
				sp.Type = SessionCookie
			}
			if sp.Name == "" {
				sp.Name = DefaultSessionName
			}
			if sp.Path == "" && sp.Type == SessionCookie {
				sp.Path = "/"
			}
		}
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		for j := range b.Endpoints {
			if b.Endpoints[j].Weight == nil {
				b.Endpoints[j].Weight = ptr(int32(DefaultWeight))
			}
			if b.Endpoints[j].State == "" {
				b.Endpoints[j].State = EndpointActive
			}
		}
		defaultLoadBalancing(&b.LoadBalancing)
		defaultHealthCheck(b.HealthCheck)
		if b.DrainingSessions == "" {
			b.DrainingSessions = DrainingSessionsKeep
		}
		if b.LoadBalancing.Algorithm == "" {
			b.LoadBalancing.Algorithm = AlgorithmRoundRobin
		}
		if b.LoadBalancing.Algorithm == AlgorithmLeastRequest {
			if b.LoadBalancing.LeastRequest == nil {
				b.LoadBalancing.LeastRequest = &LeastRequest{}
			}
			if b.LoadBalancing.LeastRequest.ChoiceCount == nil {
				b.LoadBalancing.LeastRequest.ChoiceCount = ptr(int32(DefaultChoiceCount))
			}
		}
		if b.ConnectTimeout == nil {
			b.ConnectTimeout = &metav1.Duration{Duration: DefaultConnectTimeout}
		}
		if b.CircuitBreakers == nil {
			b.CircuitBreakers = &CircuitBreakers{}
		}
		cb := b.CircuitBreakers
		if cb.MaxConnections == nil {
			cb.MaxConnections = ptr(int32(DefaultMaxConnections))
		}
		if cb.MaxPendingRequests == nil {
			cb.MaxPendingRequests = ptr(int32(DefaultMaxPendingRequests))
		}
		if cb.MaxRequests == nil {
			cb.MaxRequests = ptr(int32(DefaultMaxRequests))
		}
		if cb.MaxRetries == nil {
			cb.MaxRetries = ptr(int32(DefaultMaxRetries))
		}
		if rb := cb.RetryBudget; rb != nil {
			orDefault(&rb.Percent, int32(DefaultRetryBudgetPercent))
			orDefault(&rb.MinConcurrency, int32(DefaultRetryBudgetMinConc))
		}
		if c := b.Connection; c != nil && c.Protocol == "" {
			c.Protocol = UpstreamHTTP1
		}
	}
	defaultOptIns(s)
	defaultDNS(s)
}

func defaultLoadBalancing(lb *LoadBalancing) {
	switch lb.Algorithm {
	case AlgorithmRingHash:
		// Without sizes, translation gives every endpoint a fixed number of ring entries (see
		// RingEntriesPerWeight), so that removing one of N endpoints moves only its own 1/N of the keys.
		if lb.RingHash != nil {
			orDefault(&lb.RingHash.MinimumRingSize, int64(DefaultMinRingSize))
			orDefault(&lb.RingHash.MaximumRingSize, int64(DefaultMaxRingSize))
		}
	case AlgorithmMaglev:
		if lb.Maglev == nil {
			lb.Maglev = &Maglev{}
		}
		orDefault(&lb.Maglev.TableSize, int64(DefaultMaglevTableSize))
	}
	if (lb.Algorithm == AlgorithmRingHash || lb.Algorithm == AlgorithmMaglev) && len(lb.HashKeys) == 0 {
		lb.HashKeys = []HashKey{{SourceIP: &SourceIPHashKey{}}}
	}
	for i := range lb.HashKeys {
		if c := lb.HashKeys[i].Cookie; c != nil && c.Generate != nil {
			g := c.Generate
			durationOr(&g.TTL, 0)
			if g.Path == "" {
				g.Path = "/"
			}
			if g.SameSite == "" {
				g.SameSite = SameSiteLax
			}
		}
	}
	if ss := lb.SlowStart; ss != nil {
		if ss.Aggression == "" {
			ss.Aggression = DefaultSlowStartAggression
		}
		orDefault(&ss.MinWeightPercent, int32(DefaultSlowStartMinPercent))
	}
	defaultZones(lb)
}

func defaultHealthCheck(hc *HealthCheck) {
	if hc == nil {
		return
	}
	if a := hc.Active; a != nil {
		durationOr(&a.Interval, DefaultHealthInterval)
		durationOr(&a.Timeout, DefaultHealthTimeout)
		durationOr(&a.Jitter, 0)
		orDefault(&a.HealthyThreshold, int32(DefaultHealthyThreshold))
		orDefault(&a.UnhealthyThreshold, int32(DefaultUnhealthyThreshold))
		if a.Type == HealthCheckHTTP {
			if a.HTTP == nil {
				a.HTTP = &HTTPHealthCheck{}
			}
			if a.HTTP.Path == "" {
				a.HTTP.Path = "/"
			}
			if a.HTTP.Method == "" {
				a.HTTP.Method = "GET"
			}
			if len(a.HTTP.ExpectedStatuses) == 0 {
				a.HTTP.ExpectedStatuses = []StatusRange{{Start: 200, End: 399}}
			}
		}
	}
	if p := hc.Passive; p != nil {
		durationOr(&p.Interval, DefaultOutlierInterval)
		durationOr(&p.BaseEjectionTime, DefaultBaseEjectionTime)
		orDefault(&p.MaxEjectionPercent, int32(DefaultMaxEjectionPercent))
		if sr := p.SuccessRate; sr != nil {
			if sr.StdevFactor == "" {
				sr.StdevFactor = DefaultStdevFactor
			}
			orDefault(&sr.MinimumHosts, int32(DefaultSuccessRateHosts))
			orDefault(&sr.RequestVolume, int32(DefaultSuccessRateVolume))
		}
		if fp := p.FailurePercentage; fp != nil {
			orDefault(&fp.Threshold, int32(DefaultFailurePercent))
			orDefault(&fp.MinimumHosts, int32(DefaultFailurePercentHosts))
			orDefault(&fp.RequestVolume, int32(DefaultFailurePercentVolume))
		}
	}
}

// CertificateNames returns the SNI names each certificate serves: its own hostnames, or, for the one
// certificate without any, the listener hostnames no other certificate lists. An empty list means the
// certificate only answers clients without SNI or with an unknown name.
func (t *ListenerTLS) CertificateNames(listenerHostnames []string) [][]string {
	listed := map[string]bool{}
	for _, c := range t.Certificates {
		for _, h := range c.Hostnames {
			listed[h] = true
		}
	}
	out := make([][]string, len(t.Certificates))
	for i, c := range t.Certificates {
		if len(c.Hostnames) > 0 {
			out[i] = c.Hostnames
			continue
		}
		for _, h := range listenerHostnames {
			if !listed[h] {
				out[i] = append(out[i], h)
			}
		}
	}
	return out
}

// The tail while an endpoint is dead: without these, every request balanced to an endpoint that refuses
// connections waited out a retry back-off (p99 0.8 ms → 25 ms in the health benchmark) until the active
// checks took it out, several seconds later.
const (
	// DefaultLocalOriginFailures ejects an endpoint at its first local-origin failure when healthCheck.passive
	// is unset. A refused connect says more about an endpoint than a 5xx does: nothing answered at all.
	DefaultLocalOriginFailures = 1
	// DefaultLocalOriginMaxEjectionPercent keeps at least half of the endpoints in rotation whatever the
	// default ejection decides: Envoy ejects only while the ejected share, the new one included, stays within
	// it, so with 2 to 3 endpoints one can go, and never the last. A backend with backup endpoints gets the
	// primaries' share instead (translate's defaultEjectionCap), as Envoy counts the backups too.
	DefaultLocalOriginMaxEjectionPercent = 50
	// DefaultConnectRetryBackoffBase is the back-off of the implicit route retry, which retries only requests
	// that never reached an endpoint: a refused connect costs the endpoint nothing, so the retry on another
	// one goes out at once (Envoy's jittered wait is 0 to 1 ms, never more than 10).
	DefaultConnectRetryBackoffBase = time.Millisecond
)

// ImplicitRetry is the retry block a route without one behaves as: a request that never reached an endpoint
// (it refused the connection or the stream) is tried again on another. That is safe for every method, since
// nothing was sent, and it is what nginx does by default (proxy_next_upstream error). Without it, every
// request balanced to a dead endpoint failed until health checking took the endpoint out: 599 failed
// requests in 15 s at 200 requests/s with lbplane's default checks, in the health benchmark, against none
// through nginx. A retry block with attempts: 0 turns it off. Its back-off is short (see
// DefaultConnectRetryBackoffBase): with 25 ms, every retried request paid up to 25 ms.
func ImplicitRetry() *Retry {
	return &Retry{Conditions: []RetryOn{RetryOnConnectFailure, RetryOnRefusedStream}, Attempts: ptr(int32(DefaultRetryAttempts)),
		AvoidPreviousHosts: ptr(true), Backoff: &Backoff{Base: &metav1.Duration{Duration: DefaultConnectRetryBackoffBase},
			Max: &metav1.Duration{Duration: 10 * DefaultConnectRetryBackoffBase}}}
}

// DefaultPassive is the outlier detection of a backend whose healthCheck.passive is unset (see
// DefaultLocalOriginFailures).
func DefaultPassive() *PassiveHealthCheck {
	return &PassiveHealthCheck{
		ConsecutiveLocalOriginFailures: ptr(int32(DefaultLocalOriginFailures)),
		Interval:                       &metav1.Duration{Duration: DefaultOutlierInterval},
		BaseEjectionTime:               &metav1.Duration{Duration: DefaultBaseEjectionTime},
		MaxEjectionPercent:             ptr(int32(DefaultLocalOriginMaxEjectionPercent)),
	}
}

// ProxyGroupOrDefault is the proxy group the policy is served to: spec.proxyGroup, or DefaultProxyGroup when it
// names none, as Default sets it.
func (s *LoadBalancerPolicySpec) ProxyGroupOrDefault() string {
	if s.ProxyGroup == "" {
		return DefaultProxyGroup
	}
	return s.ProxyGroup
}
