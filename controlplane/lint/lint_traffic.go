package lint

import (
	"fmt"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// Rules of the traffic features.
const (
	RulePrioritiesWithoutZones = "retry-priorities-without-zones"
	RuleUtilizationOnTCP       = "backend-utilization-on-tcp"
	RulePerEndpointStatsMany   = "per-endpoint-stats-on-many-endpoints"
	RuleProxyProtocolLoopback  = "proxy-protocol-without-trusted-sources"
)

// perEndpointStatsLimit is the endpoint count past which per-endpoint series are worth a second thought.
const perEndpointStatsLimit = 100

func init() {
	Rules = append(Rules,
		struct{ Name, Catches string }{RulePrioritiesWithoutZones, "retry.avoidPreviousPriorities on a route none of whose backends has loadBalancing.zoneFailover: there is one priority, so retries stay where they failed"},
		struct{ Name, Catches string }{RuleUtilizationOnTCP, "algorithm BackendUtilization on a TCP listener: load reports travel in HTTP response headers, so Envoy never gets one and balances round robin"},
		struct{ Name, Catches string }{RuleProxyProtocolLoopback, "listener.proxyProtocol without trustedSources: only loopback may connect, so a balancer on another host is refused"},
		struct{ Name, Catches string }{RulePerEndpointStatsMany, fmt.Sprintf("perEndpointStats on a Service backend or more than %d endpoints: Envoy keeps and Prometheus scrapes a set of series per endpoint", perEndpointStatsLimit)},
	)
}

func traffic(add addFunc, s *v1alpha1.LoadBalancerPolicySpec) {
	if pp := s.Listener.ProxyProtocol; pp != nil && len(pp.TrustedSources) == 0 {
		add(RuleProxyProtocolLoopback, "spec.listener.proxyProtocol.trustedSources",
			"no trusted sources: only loopback (127.0.0.0/8, ::1) may connect and send a PROXY header; list the addresses of the balancers in front (e.g. [198.51.100.0/24]), or they are refused")
	}
	zoned := map[string]bool{}
	for i := range s.Backends {
		b := &s.Backends[i]
		bp := fmt.Sprintf("spec.backends[%d]", i)
		zoned[b.Name] = len(b.LoadBalancing.ZoneFailover) > 0
		if b.LoadBalancing.Algorithm == v1alpha1.AlgorithmBackendUtilization && s.Listener.Protocol == v1alpha1.ProtocolTCP {
			add(RuleUtilizationOnTCP, bp+".loadBalancing.algorithm",
				"a TCP listener carries no ORCA load reports (they come in HTTP response headers), so every endpoint keeps the same weight; use RoundRobin or LeastRequest")
		}
		if b.PerEndpointStats && (b.Service != nil || len(b.Endpoints) > perEndpointStatsLimit) {
			add(RulePerEndpointStatsMany, bp+".perEndpointStats",
				"every endpoint gets its own series in Envoy and in Prometheus; with a Service or more than %d endpoints that grows with the backend, so prefer the backend-wide stats unless you need them", perEndpointStatsLimit)
		}
	}
	for i, r := range s.Routes {
		if r.Retry == nil || !r.Retry.AvoidPreviousPriorities {
			continue
		}
		any := false
		for _, ref := range r.Backends {
			any = any || zoned[ref.Name]
		}
		if !any {
			add(RulePrioritiesWithoutZones, fmt.Sprintf("spec.routes[%d].retry.avoidPreviousPriorities", i),
				"none of the route's backends has loadBalancing.zoneFailover, so all endpoints are one priority and retries cannot move to another; set zoneFailover or drop the field")
		}
	}
}
