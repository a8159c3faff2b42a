package v1alpha1_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func i32(v int32) *int32 { return &v }

func valid() *v1alpha1.LoadBalancerPolicy {
	return &v1alpha1.LoadBalancerPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP},
			Backends: []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}}},
		},
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]validateCase{
		"valid": {func(*v1alpha1.LoadBalancerPolicy) {}, nil},
		"misspelled algorithm": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends = append(p.Spec.Backends, v1alpha1.Backend{Name: "b", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.2", Port: 80}},
				BackendSettings: v1alpha1.BackendSettings{LoadBalancing: v1alpha1.LoadBalancing{Algorithm: "RoundRobn"}}})
		}, []string{`spec.backends[1].loadBalancing.algorithm: unsupported value "RoundRobn"; supported: RoundRobin, LeastRequest, Random, RingHash, Maglev, BackendUtilization`}},
		"wrong apiVersion and kind": {func(p *v1alpha1.LoadBalancerPolicy) { p.APIVersion, p.Kind = "v1", "Service" }, []string{
			`apiVersion: must be "lbplane.io/v1alpha1", got "v1"`, `kind: must be "LoadBalancerPolicy", got "Service"`}},
		"bad name": {func(p *v1alpha1.LoadBalancerPolicy) { p.Name = "Bad_Name" }, []string{
			`metadata.name: must be lowercase letters, digits, '-' and '.', at most 253 characters, got "Bad_Name"`}},
		"port and protocol": {func(p *v1alpha1.LoadBalancerPolicy) { p.Spec.Listener.Port, p.Spec.Listener.Protocol = 0, "UDP" }, []string{
			`spec.listener.port: must be between 1 and 65535, got 0`, `spec.listener.protocol: unsupported value "UDP"; supported: HTTP, HTTPS, TCP`}},
		"hostnames on TCP": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.Protocol, p.Spec.Listener.Hostnames = v1alpha1.ProtocolTCP, []string{"a.example.com"}
		}, []string{`spec.listener.hostnames: not allowed on a TCP listener: TCP carries no Host header`}},
		"duplicate and bad hostnames": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.Hostnames = []string{"a.example.com", "a.example.com", "UPPER.example.com", "*.ok.example.com"}
		}, []string{`spec.listener.hostnames[1]: duplicate hostname "a.example.com"`,
			`spec.listener.hostnames[2]: must be a lowercase DNS name, optionally starting with "*.", got "UPPER.example.com"`}},
		"no backends": {func(p *v1alpha1.LoadBalancerPolicy) { p.Spec.Backends = nil }, []string{`spec.backends: at least one backend is required (unless every route has redirect or directResponse)`}},
		"endpoint problems": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].Endpoints = []v1alpha1.Endpoint{{Address: "Host_Example", Port: 70000, Weight: i32(0)}, {Address: "10.0.0.1", Port: 80}, {Address: "10.0.0.1", Port: 80}}
		}, []string{`spec.backends[0].endpoints[0].address: must be an IP address or a lowercase DNS name, got "Host_Example"`,
			`spec.backends[0].endpoints[0].port: must be between 1 and 65535, got 70000`,
			`spec.backends[0].endpoints[0].weight: must be between 1 and 100000, got 0`,
			`spec.backends[0].endpoints[2]: duplicate endpoint 10.0.0.1:80 (also at index 1)`}},
		"endpoints and service": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].Service = &v1alpha1.ServiceRef{Name: "web", Port: 80}
		}, []string{`spec.backends[0]: set either endpoints or service, not both`}},
		"leastRequest with another algorithm": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing.LeastRequest = &v1alpha1.LeastRequest{ChoiceCount: i32(3)}
		}, []string{`spec.backends[0].loadBalancing.leastRequest: only allowed with algorithm LeastRequest, got "RoundRobin"`}},
		"choice count": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmLeastRequest, LeastRequest: &v1alpha1.LeastRequest{ChoiceCount: i32(1)}}
		}, []string{`spec.backends[0].loadBalancing.leastRequest.choiceCount: must be between 2 and 100, got 1`}},
		"circuit breaker zero": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].CircuitBreakers = &v1alpha1.CircuitBreakers{MaxRequests: i32(0)}
		}, []string{`spec.backends[0].circuitBreakers.maxRequests: must be at least 1, got 0`}},
		"routes on TCP": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.Protocol = v1alpha1.ProtocolTCP
			p.Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}}}}
		}, []string{`spec.routes: not allowed on a TCP listener: connections go to the backends, equally weighted`}},
		"route problems": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Routes = []v1alpha1.Route{
				{Name: "r", Match: v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: "Regex", Value: "x"},
					Headers: []v1alpha1.HeaderMatch{{Name: "bad header", Value: "v"}, {Name: "x", Type: v1alpha1.HeaderMatchRegex, Value: "(("}, {Name: "y", Type: v1alpha1.HeaderMatchPresent, Value: "v"}}},
					Backends: []v1alpha1.BackendRef{{Name: "nope"}, {Name: "a", Weight: i32(0)}}, Timeout: &metav1.Duration{Duration: -1}},
				{Name: "r", Backends: []v1alpha1.BackendRef{{Name: "a"}, {Name: "a"}}},
			}
		}, []string{
			`spec.routes[0].match.path.type: unsupported value "Regex"; supported: Prefix, SegmentPrefix, Exact, RegularExpression`,
			`spec.routes[0].match.path.value: must start with "/", got "x"`,
			`spec.routes[0].match.headers[0].name: must be an HTTP header name (token characters, at most 256), got "bad header"`,
			"spec.routes[0].match.headers[1].value: invalid regular expression: error parsing regexp: missing closing ): `((`",
			`spec.routes[0].match.headers[2].value: not allowed with type Present`,
			`spec.routes[0].timeout: must not be negative, got -1ns`,
			`spec.routes[0].backends[0].name: no backend named "nope" in spec.backends`,
			`spec.routes[1].name: duplicate route name "r"`,
			`spec.routes[1].backends[1].name: backend "a" listed twice`,
		}},
		"huge value is clipped in the message": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].Endpoints[0].Address = strings.Repeat("x", 1<<20)
		}, []string{`spec.backends[0].endpoints[0].address: must be an IP address or a lowercase DNS name, got "` + strings.Repeat("x", 80) + `…"`}},
	}
	runCases(t, cases)
}

func TestDefaultFillsEverything(t *testing.T) {
	p := valid()
	p.Spec.Routes = []v1alpha1.Route{{Match: v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Value: "/"}, Headers: []v1alpha1.HeaderMatch{{Name: "x", Value: "y"}}},
		Backends: []v1alpha1.BackendRef{{Name: "a"}}}}
	p.Spec.Backends[0].LoadBalancing.Algorithm = v1alpha1.AlgorithmLeastRequest
	v1alpha1.Default(p)
	s := p.Spec
	checks := map[string]bool{
		"namespace":      p.Namespace == "default",
		"proxyGroup":     s.ProxyGroup == "default",
		"address":        s.Listener.Address == "0.0.0.0",
		"route name":     s.Routes[0].Name == "route-0",
		"path type":      s.Routes[0].Match.Path.Type == v1alpha1.PathMatchPrefix,
		"header type":    s.Routes[0].Match.Headers[0].Type == v1alpha1.HeaderMatchExact,
		"ref weight":     *s.Routes[0].Backends[0].Weight == 1,
		"timeout":        s.Routes[0].Timeout.Duration == v1alpha1.DefaultRouteTimeout,
		"endpoint wt":    *s.Backends[0].Endpoints[0].Weight == 1,
		"choice count":   *s.Backends[0].LoadBalancing.LeastRequest.ChoiceCount == 2,
		"connect":        s.Backends[0].ConnectTimeout.Duration == v1alpha1.DefaultConnectTimeout,
		"max requests":   *s.Backends[0].CircuitBreakers.MaxRequests == v1alpha1.DefaultMaxRequests,
		"valid defaults": len(v1alpha1.Validate(p)) == 0,
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("default for %s not applied", what)
		}
	}
}

func TestValidateFeatures(t *testing.T) {
	cases := map[string]validateCase{
		"hash keys need a hashing algorithm": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing.HashKeys = []v1alpha1.HashKey{{SourceIP: &v1alpha1.SourceIPHashKey{}}}
		}, []string{`spec.backends[0].loadBalancing.hashKeys: only allowed with algorithm RingHash or Maglev, got "RoundRobin": other algorithms ignore hash keys`}},
		"a hash key sets exactly one input": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev,
				HashKeys: []v1alpha1.HashKey{{Header: &v1alpha1.HeaderHashKey{Name: "x"}, SourceIP: &v1alpha1.SourceIPHashKey{}}}}
		}, []string{`spec.backends[0].loadBalancing.hashKeys[0]: set exactly one of header, cookie, sourceIP, queryParameter, path and host, got 2`}},
		"SameSite None needs Secure": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmRingHash,
				HashKeys: []v1alpha1.HashKey{{Cookie: &v1alpha1.CookieHashKey{Name: "c", Generate: &v1alpha1.GeneratedCookie{SameSite: v1alpha1.SameSiteNone}}}}}
		}, []string{`spec.backends[0].loadBalancing.hashKeys[0].cookie.generate.sameSite: None requires secure: true (browsers drop SameSite=None cookies that are not Secure)`}},
		"maglev table size must be prime": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev, Maglev: &v1alpha1.Maglev{TableSize: ptr64(65536)}}
		}, []string{`spec.backends[0].loadBalancing.maglev.tableSize: must be a prime number up to 5000011, got 65536`}},
		"slow start with a hash": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev, SlowStart: &v1alpha1.SlowStart{Window: metav1.Duration{Duration: 1e9}, Aggression: "x"}}
		}, []string{`spec.backends[0].loadBalancing.slowStart: only allowed with algorithm RoundRobin or LeastRequest, got "Maglev"`,
			`spec.backends[0].loadBalancing.slowStart.aggression: must be a decimal number greater than 0 and at most 1000, such as "1.5", got "x"`}},
		"health check settings for another type": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].HealthCheck = &v1alpha1.HealthCheck{Active: &v1alpha1.ActiveHealthCheck{Type: v1alpha1.HealthCheckTCP, HTTP: &v1alpha1.HTTPHealthCheck{Path: "/"},
				UnhealthyThreshold: i32(0)}}
		}, []string{`spec.backends[0].healthCheck.active.unhealthyThreshold: must be between 1 and 100, got 0`,
			`spec.backends[0].healthCheck.active.http: only allowed with type HTTP, got "TCP"`}},
		"gRPC health checks need HTTP/2": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].HealthCheck = &v1alpha1.HealthCheck{Active: &v1alpha1.ActiveHealthCheck{Type: v1alpha1.HealthCheckGRPC}}
		}, []string{`spec.backends[0].healthCheck.active.type: GRPC needs connection.protocol: HTTP2 (gRPC runs over HTTP/2)`}},
		"passive needs a detector": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].HealthCheck = &v1alpha1.HealthCheck{Passive: &v1alpha1.PassiveHealthCheck{}}
		}, []string{`spec.backends[0].healthCheck.passive: set at least one detector: consecutive5xx, consecutiveGatewayErrors, consecutiveLocalOriginFailures, successRate or failurePercentage`}},
		"HTTPS needs tls": {func(p *v1alpha1.LoadBalancerPolicy) { p.Spec.Listener.Protocol = v1alpha1.ProtocolHTTPS },
			[]string{`spec.listener.tls: required with protocol HTTPS`}},
		"unknown cipher": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.Protocol = v1alpha1.ProtocolHTTPS
			p.Spec.Listener.TLS = &v1alpha1.ListenerTLS{Certificates: []v1alpha1.Certificate{{CertificateFile: "a", PrivateKeyFile: "b"}}, CipherSuites: []string{"RC4-MD5"}}
		}, []string{`spec.listener.tls.cipherSuites[0]: unsupported value "RC4-MD5"; supported: ECDHE-ECDSA-AES128-GCM-SHA256, ECDHE-RSA-AES128-GCM-SHA256, ECDHE-ECDSA-AES256-GCM-SHA384, ECDHE-RSA-AES256-GCM-SHA384, ECDHE-ECDSA-CHACHA20-POLY1305, ECDHE-RSA-CHACHA20-POLY1305, ECDHE-ECDSA-AES128-SHA, ECDHE-RSA-AES128-SHA, ECDHE-ECDSA-AES256-SHA, ECDHE-RSA-AES256-SHA, AES128-GCM-SHA256, AES256-GCM-SHA384, AES128-SHA, AES256-SHA`}},
		"upstream tls without a CA": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].TLS = &v1alpha1.BackendTLS{SNI: "a.internal"}
		}, []string{`spec.backends[0].tls.caFile: required: without it any certificate would be accepted (set insecureSkipVerify to mean that)`}},
		"retry status codes without the condition": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}}, Retry: &v1alpha1.Retry{Conditions: []v1alpha1.RetryOn{"5xx", "sometimes"}, StatusCodes: []int32{503}}}}
		}, []string{`spec.routes[0].retry.conditions[1]: unsupported value "sometimes"; supported: connect-failure, reset, 5xx, gateway-error, retriable-status-codes, refused-stream`,
			`spec.routes[0].retry.statusCodes: only allowed when conditions has retriable-status-codes`}},
		"header session with a ttl": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}}, SessionPersistence: &v1alpha1.SessionPersistence{Type: v1alpha1.SessionHeader, TTL: &metav1.Duration{Duration: 1e9}}}}
		}, []string{`spec.routes[0].sessionPersistence: ttl and path are only allowed with type Cookie`}},
		"endpoint state": {func(p *v1alpha1.LoadBalancerPolicy) { p.Spec.Backends[0].Endpoints[0].State = "Off" },
			[]string{`spec.backends[0].endpoints[0].state: unsupported value "Off"; supported: Active, Draining`}},
	}
	runCases(t, cases)
}

func ptr64(v int64) *int64 { return &v }

// validateCase changes a valid policy and lists every error Validate must return, in order.
type validateCase struct {
	mutate func(p *v1alpha1.LoadBalancerPolicy)
	want   []string
}

func runCases(t *testing.T, cases map[string]validateCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := valid()
			tc.mutate(p)
			v1alpha1.Default(p)
			got := v1alpha1.Validate(p)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(got), len(tc.want), got)
			}
			for i := range got {
				if got[i].Error() != tc.want[i] {
					t.Errorf("error %d:\n got %s\nwant %s", i, got[i].Error(), tc.want[i])
				}
			}
		})
	}
}
