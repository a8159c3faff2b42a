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
)

func ptr[T any](v T) *T { return &v }

// Default fills every optional field that has a default, in place. Call it on a copy.
func Default(p *LoadBalancerPolicy) {
	if p.Namespace == "" {
		p.Namespace = DefaultNamespace
	}
	s := &p.Spec
	if s.ProxyGroup == "" {
		s.ProxyGroup = DefaultProxyGroup
	}
	if s.Listener.Address == "" {
		s.Listener.Address = DefaultListenAddress
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
		for j := range r.Backends {
			if r.Backends[j].Weight == nil {
				r.Backends[j].Weight = ptr(int32(DefaultWeight))
			}
		}
		if r.Timeout == nil {
			r.Timeout = &metav1.Duration{Duration: DefaultRouteTimeout}
		}
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		for j := range b.Endpoints {
			if b.Endpoints[j].Weight == nil {
				b.Endpoints[j].Weight = ptr(int32(DefaultWeight))
			}
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
	}
}
