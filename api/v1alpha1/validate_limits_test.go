package v1alpha1_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func TestValidateTraffic(t *testing.T) {
	twoBackends := func(p *v1alpha1.LoadBalancerPolicy) {
		p.Spec.Backends = append(p.Spec.Backends, v1alpha1.Backend{Name: "b", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.2", Port: 80}}})
	}
	runCases(t, map[string]validateCase{
		"every feature": {func(p *v1alpha1.LoadBalancerPolicy) {
			twoBackends(p)
			p.Spec.Listener.ProxyProtocol = &v1alpha1.ListenerProxyProtocol{}
			p.Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}}, RateLimit: &v1alpha1.RateLimit{Requests: 10},
				Mirrors: []v1alpha1.Mirror{{Backend: "b", Percent: i32(5)}}, Retry: &v1alpha1.Retry{AvoidPreviousPriorities: true}}}
			b := &p.Spec.Backends[0]
			b.ProxyProtocol = &v1alpha1.BackendProxyProtocol{Version: v1alpha1.ProxyProtocolV1}
			b.PerEndpointStats = true
			b.TLS = &v1alpha1.BackendTLS{SNI: "x.internal", CAFile: "ca.crt", ClientCertificate: &v1alpha1.ClientCertificate{CertificateFile: "c.crt", PrivateKeyFile: "c.key"}}
			b.Connection = &v1alpha1.Connection{MaxConnectionDuration: dur(time.Minute)}
			b.HealthCheck = &v1alpha1.HealthCheck{Passive: &v1alpha1.PassiveHealthCheck{Consecutive5xx: i32(3), MaxEjectionTime: dur(time.Hour), AlwaysEjectOneEndpoint: true}}
			b.LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmBackendUtilization}
			p.Spec.Backends[1].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmLeastRequest, LeastRequest: &v1alpha1.LeastRequest{ActiveRequestBias: "0"}}
		}, nil},
		"per-client rate limit and trusted sources": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.ProxyProtocol = &v1alpha1.ListenerProxyProtocol{TrustedSources: []string{"198.51.100.0/24", "2001:db8::/32"}}
			p.Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}},
				RateLimit: &v1alpha1.RateLimit{Requests: 100, Headers: true, PerClient: &v1alpha1.ClientRateLimit{Requests: 5}}}}
		}, nil},
		"bad per-client rate limit and trusted sources": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.ProxyProtocol = &v1alpha1.ListenerProxyProtocol{TrustedSources: []string{"198.51.100.7/24", "lb.example", "198.51.100.9"}}
			p.Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}},
				RateLimit: &v1alpha1.RateLimit{Requests: 100, PerClient: &v1alpha1.ClientRateLimit{Requests: 0, Interval: dur(time.Millisecond), MaxClients: i32(2000000)}}}}
		}, []string{
			`spec.listener.proxyProtocol.trustedSources[0]: has host bits set: the network is 198.51.100.0/24, got "198.51.100.7/24"`,
			`spec.listener.proxyProtocol.trustedSources[1]: must be a CIDR such as 198.51.100.0/24 or 2001:db8::/32, got "lb.example"`,
			`spec.listener.proxyProtocol.trustedSources[2]: must be a CIDR such as 198.51.100.0/24 or 2001:db8::/32, got "198.51.100.9"`,
			`spec.routes[0].rateLimit.perClient.requests: must be between 1 and 1073741824, got 0`,
			`spec.routes[0].rateLimit.perClient.burst: must be between 1 and 1073741824, got 0`,
			`spec.routes[0].rateLimit.perClient.interval: must be at least 50ms (Envoy's shortest refill), got 1ms`,
			`spec.routes[0].rateLimit.perClient.maxClients: must be between 1 and 1000000, got 2000000`,
		}},
		"rate limits out of range": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}}, RateLimit: &v1alpha1.RateLimit{Requests: 0, Interval: dur(10 * time.Millisecond), Burst: i32(0)}}}
			p.Spec.Listener.RateLimit = &v1alpha1.RateLimit{Requests: 5}
		}, []string{
			`spec.listener.rateLimit: only allowed on a TCP listener, where it limits connections; HTTP listeners limit per route (routes[].rateLimit)`,
			`spec.routes[0].rateLimit.requests: must be between 1 and 1073741824, got 0`,
			`spec.routes[0].rateLimit.burst: must be between 1 and 1073741824, got 0`,
			`spec.routes[0].rateLimit.interval: must be at least 50ms (Envoy's shortest refill), got 10ms`,
		}},
		"mirrors": {func(p *v1alpha1.LoadBalancerPolicy) {
			twoBackends(p)
			p.Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}},
				Mirrors: []v1alpha1.Mirror{{Backend: "nope"}, {Backend: "a"}, {Backend: "b", Percent: i32(101)}, {Backend: "b"}}}}
		}, []string{
			`spec.routes[0].mirrors[0].backend: must name a backend of spec.backends, got "nope"`,
			`spec.routes[0].mirrors[1].backend: "a" already serves this route; a mirror must be another backend`,
			`spec.routes[0].mirrors[2].percent: must be between 0 and 100, got 101`,
			`spec.routes[0].mirrors[3].backend: duplicate mirror of "b" (also at index 2)`,
		}},
		"backends": {func(p *v1alpha1.LoadBalancerPolicy) {
			b := &p.Spec.Backends[0]
			b.ProxyProtocol = &v1alpha1.BackendProxyProtocol{Version: "v2"}
			b.TLS = &v1alpha1.BackendTLS{InsecureSkipVerify: true, ClientCertificate: &v1alpha1.ClientCertificate{CertificateFile: "c.crt", SecretName: "s"}}
			b.Connection = &v1alpha1.Connection{MaxConnectionDuration: dur(0)}
			b.HealthCheck = &v1alpha1.HealthCheck{Passive: &v1alpha1.PassiveHealthCheck{Consecutive5xx: i32(3), BaseEjectionTime: dur(time.Minute), MaxEjectionTime: dur(time.Second)}}
			b.LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmRoundRobin, BackendUtilization: &v1alpha1.BackendUtilization{}}
		}, []string{
			`spec.backends[0].proxyProtocol.version: unsupported value "v2"; supported: V1, V2`,
			`spec.backends[0].tls.clientCertificate: set certificateFile and privateKeyFile, or secretName, not both`,
			`spec.backends[0].connection.maxConnectionDuration: must be greater than zero`,
			`spec.backends[0].healthCheck.passive.maxEjectionTime: must not be shorter than baseEjectionTime (1m0s), got 1s`,
			`spec.backends[0].loadBalancing.backendUtilization: only allowed with algorithm BackendUtilization, got "RoundRobin"`,
		}},
		"utilization and least request tuning": {func(p *v1alpha1.LoadBalancerPolicy) {
			twoBackends(p)
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmBackendUtilization,
				BackendUtilization: &v1alpha1.BackendUtilization{WeightUpdatePeriod: dur(10 * time.Millisecond), ErrorUtilizationPenalty: "-1"}}
			p.Spec.Backends[1].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmLeastRequest, LeastRequest: &v1alpha1.LeastRequest{ActiveRequestBias: "lots"}}
		}, []string{
			`spec.backends[0].loadBalancing.backendUtilization.weightUpdatePeriod: must be at least 100ms (Envoy's shortest), got 10ms`,
			`spec.backends[0].loadBalancing.backendUtilization.errorUtilizationPenalty: must be a decimal number from 0 to 1000, such as "0.5", got "-1"`,
			`spec.backends[1].loadBalancing.leastRequest.activeRequestBias: must be a decimal number from 0 to 100, such as "0.5", got "lots"`,
		}},
		"autoSNI": {func(p *v1alpha1.LoadBalancerPolicy) {
			b := &p.Spec.Backends[0]
			b.Endpoints = append(b.Endpoints, v1alpha1.Endpoint{Address: "10.0.0.3", Port: 80, Hostname: "Bad_Name"})
			b.TLS = &v1alpha1.BackendTLS{AutoSNI: true, SNI: "x.internal", CAFile: "ca.crt"}
		}, []string{
			`spec.backends[0].endpoints[1].hostname: must be a lowercase DNS name, got "Bad_Name"`,
			`spec.backends[0].tls.autoSNI: set sni or autoSNI, not both`,
			`spec.backends[0].endpoints[0].hostname: required with tls.autoSNI: it is the name sent and verified`,
		}},
		"autoSNI without sni": {func(p *v1alpha1.LoadBalancerPolicy) {
			b := &p.Spec.Backends[0]
			b.Endpoints[0].Hostname = "a.internal"
			b.TLS = &v1alpha1.BackendTLS{AutoSNI: true, CAFile: "ca.crt"}
		}, nil},
		"maxConnectionDuration on TCP": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.Protocol = v1alpha1.ProtocolTCP
			p.Spec.Backends[0].Connection = &v1alpha1.Connection{MaxConnectionDuration: dur(time.Minute)}
		}, []string{
			`spec.backends[0].connection.maxConnectionDuration: not allowed on a TCP listener: it closes HTTP connections between requests`,
		}},
	})
}
