package lint

import (
	"fmt"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// Rules of the backend features of issue 17.
const (
	RuleHashWithoutBalanceFactor = "hash-without-balance-factor"
	RuleBackupWithoutHealthCheck = "backup-without-health-check"
)

// fewEndpoints is where one hot key is a large share of an endpoint's load: with 4 endpoints each carries
// a quarter, and one busy user can double it.
const fewEndpoints = 4

func init() {
	Rules = append(Rules,
		struct{ Name, Catches string }{RuleBackupWithoutHealthCheck, "backup endpoints without healthCheck.active: only endpoints that refuse connections hand traffic to the backups, and a primary that returns stays ejected for the ejection time"},
		struct{ Name, Catches string }{RuleHashWithoutBalanceFactor, fmt.Sprintf("RingHash or Maglev over %d endpoints or fewer without loadBalancing.hashBalanceFactor: one hot key overloads its endpoint while the others idle", fewEndpoints)},
	)
}

func backendFeatures(add addFunc, bp string, b *v1alpha1.Backend) {
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
}
