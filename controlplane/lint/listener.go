package lint

import "github.com/lbplane/lbplane/api/v1alpha1"

// RuleProxyProtocolLoopback: a PROXY protocol listener that trusts only loopback.
const RuleProxyProtocolLoopback = "proxy-protocol-without-trusted-sources"

func init() {
	Rules = append(Rules,
		struct{ Name, Catches string }{RuleProxyProtocolLoopback, "listener.proxyProtocol without trustedSources: only loopback may connect, so a balancer on another host is refused"},
	)
}

// proxyProtocolSenders reports a PROXY protocol listener that trusts no sender beyond loopback.
func proxyProtocolSenders(add addFunc, s *v1alpha1.LoadBalancerPolicySpec) {
	if pp := s.Listener.ProxyProtocol; pp != nil && len(pp.TrustedSources) == 0 {
		add(RuleProxyProtocolLoopback, "spec.listener.proxyProtocol.trustedSources",
			"no trusted sources: only loopback (127.0.0.0/8, ::1) may connect and send a PROXY header; list the addresses of the balancers in front (e.g. [198.51.100.0/24]), or they are refused")
	}
}
