package lint

import (
	"fmt"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// Rules of a backend's endpoints, hashing, load reports and stats.
const (
	RuleHashWithoutBalanceFactor = "hash-without-balance-factor"
	RuleBackupWithoutHealthCheck = "backup-without-health-check"
	RuleUtilizationOnTCP         = "backend-utilization-on-tcp"
	RulePerEndpointStatsMany     = "per-endpoint-stats-on-many-endpoints"
)

// perEndpointStatsLimit is the endpoint count past which per-endpoint series are worth a second thought.
const perEndpointStatsLimit = 100

// fewEndpoints is where one hot key is a large share of an endpoint's load: with 4 endpoints each carries
// a quarter, and one busy user can double it.
const fewEndpoints = 4

func init() {
	Rules = append(Rules,
		struct{ Name, Catches string }{RuleBackupWithoutHealthCheck, "backup endpoints without healthCheck.active: only endpoints that refuse connections hand traffic to the backups, and a primary that returns stays ejected for the ejection time"},
		struct{ Name, Catches string }{RuleHashWithoutBalanceFactor, fmt.Sprintf("RingHash or Maglev over %d endpoints or fewer without loadBalancing.hashBalanceFactor: one hot key overloads its endpoint while the others idle", fewEndpoints)},
		struct{ Name, Catches string }{RuleUtilizationOnTCP, "algorithm BackendUtilization on a TCP listener: load reports travel in HTTP response headers, so Envoy never gets one and balances round robin"},
		struct{ Name, Catches string }{RulePerEndpointStatsMany, fmt.Sprintf("perEndpointStats on a Service backend or more than %d endpoints: Envoy keeps and Prometheus scrapes a set of series per endpoint", perEndpointStatsLimit)},
	)
}

func backendFeatures(add addFunc, bp string, b *v1alpha1.Backend, listener v1alpha1.Protocol) {
	for i, e := range b.Endpoints {
		if e.Backup && (b.HealthCheck == nil || b.HealthCheck.Active == nil) {
			add(RuleBackupWithoutHealthCheck, fmt.Sprintf("%s.endpoints[%d].backup", bp, i),
				"nothing probes the primaries: the backups take over only from primaries that refuse connections (the default ejection), not from ones that answer with errors or hang, and a primary that comes back waits out its ejection; add healthCheck.active")
			break
		}
	}
	lb := &b.LoadBalancing
	if (lb.Algorithm == v1alpha1.AlgorithmRingHash || lb.Algorithm == v1alpha1.AlgorithmMaglev) && lb.HashBalanceFactor == nil {
		if n := endpointCount(b); n >= 2 && n <= fewEndpoints {
			add(RuleHashWithoutBalanceFactor, bp+".loadBalancing.hashBalanceFactor",
				"with %d endpoints every key hashed to one of them is 1/%d of the load: one busy user or client address can overload it while the others idle; set hashBalanceFactor (150: no endpoint above 1.5 times the mean; keys move only while their endpoint is full)", n, n)
		}
	}
	if lb.Algorithm == v1alpha1.AlgorithmBackendUtilization && listener == v1alpha1.ProtocolTCP {
		add(RuleUtilizationOnTCP, bp+".loadBalancing.algorithm",
			"a TCP listener carries no ORCA load reports (they come in HTTP response headers), so every endpoint keeps the same weight; use RoundRobin or LeastRequest")
	}
	if b.PerEndpointStats && (b.Service != nil || len(b.Endpoints) > perEndpointStatsLimit) {
		add(RulePerEndpointStatsMany, bp+".perEndpointStats",
			"every endpoint gets its own series in Envoy and in Prometheus; with a Service or more than %d endpoints that grows with the backend, so prefer the backend-wide stats unless you need them", perEndpointStatsLimit)
	}
}
