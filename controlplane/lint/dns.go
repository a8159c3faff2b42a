package lint

import "github.com/lbplane/lbplane/api/v1alpha1"

// RuleLogicalDNSBalancing catches a balancing choice on a backend that has one endpoint by construction.
const RuleLogicalDNSBalancing = "logical-dns-balancing"

func init() {
	Rules = append(Rules, struct{ Name, Catches string }{RuleLogicalDNSBalancing,
		"an algorithm other than RoundRobin on a dns.resolution Logical backend: its one endpoint (the name) takes every request, so the algorithm, its hash keys and slow start do nothing"})
}

func dnsBackend(add addFunc, bp string, b *v1alpha1.Backend) {
	if b.DNS == nil || b.DNS.Resolution != v1alpha1.DNSLogical {
		return
	}
	if a := b.LoadBalancing.Algorithm; a != "" && a != v1alpha1.AlgorithmRoundRobin {
		add(RuleLogicalDNSBalancing, bp+".loadBalancing.algorithm",
			"%s balances over one endpoint: with dns.resolution Logical the name is the only endpoint, and Envoy connects to the first address of its latest answer; use Strict to balance over the addresses", a)
	}
}
