package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of the features a policy turns on (rate limits, mirrors, PROXY protocol, utilization-aware
// balancing).
const (
	DefaultRateLimitInterval = time.Second
	// DefaultRateLimitMaxClients is how many client addresses a route's per-client rate limit tracks.
	DefaultRateLimitMaxClients     = 10000
	DefaultMirrorPercent           = 100
	DefaultProxyProtocolVersion    = ProxyProtocolV2
	DefaultBlackoutPeriod          = 10 * time.Second
	DefaultWeightUpdatePeriod      = time.Second
	DefaultWeightExpirationPeriod  = 3 * time.Minute
	DefaultErrorUtilizationPenalty = "1.0"
	// MinRateLimitInterval is the shortest refill Envoy's token bucket accepts.
	MinRateLimitInterval = 50 * time.Millisecond
	// MinWeightUpdatePeriod is the shortest weight update period Envoy applies.
	MinWeightUpdatePeriod = 100 * time.Millisecond
)

// defaultOptIns fills the defaults of the features a policy turns on. A field left unset never changes the generated
// config: only what a policy turns on gets defaults.
func defaultOptIns(s *LoadBalancerPolicySpec) {
	defaultRateLimit(s.Listener.RateLimit)
	for i := range s.Routes {
		r := &s.Routes[i]
		defaultRateLimit(r.RateLimit)
		for j := range r.Mirrors {
			orDefault(&r.Mirrors[j].Percent, int32(DefaultMirrorPercent))
		}
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		if pp := b.ProxyProtocol; pp != nil && pp.Version == "" {
			pp.Version = DefaultProxyProtocolVersion
		}
		lb := &b.LoadBalancing
		if lb.Algorithm == AlgorithmBackendUtilization {
			if lb.BackendUtilization == nil {
				lb.BackendUtilization = &BackendUtilization{}
			}
			bu := lb.BackendUtilization
			durationOr(&bu.BlackoutPeriod, DefaultBlackoutPeriod)
			durationOr(&bu.WeightUpdatePeriod, DefaultWeightUpdatePeriod)
			durationOr(&bu.WeightExpirationPeriod, DefaultWeightExpirationPeriod)
			if bu.ErrorUtilizationPenalty == "" {
				bu.ErrorUtilizationPenalty = DefaultErrorUtilizationPenalty
			}
		}
	}
}

func defaultRateLimit(rl *RateLimit) {
	if rl == nil {
		return
	}
	if rl.Interval == nil {
		rl.Interval = &metav1.Duration{Duration: DefaultRateLimitInterval}
	}
	if rl.Burst == nil {
		rl.Burst = ptr(rl.Requests)
	}
	if c := rl.PerClient; c != nil {
		if c.Interval == nil {
			c.Interval = &metav1.Duration{Duration: DefaultRateLimitInterval}
		}
		if c.Burst == nil {
			c.Burst = ptr(c.Requests)
		}
		if c.MaxClients == nil {
			c.MaxClients = ptr(int32(DefaultRateLimitMaxClients))
		}
	}
}
