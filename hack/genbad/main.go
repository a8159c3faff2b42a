// Command genbad writes the bad-input corpus, testdata/bad/*.yaml: invalid policies, each starting with
// "# expect: <text>" lines that the error must contain (field path included). Each is a mutation of one
// valid base policy, so that exactly one thing is wrong. Conflict cases carry the policy they conflict with
// as their first document ("existing", which the tests push beforehand).
//
//	go run ./hack/genbad
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const existing = `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: existing, creationTimestamp: "2020-01-01T00:00:00Z"}
spec:
  listener: {address: 127.0.0.1, port: 9200, protocol: HTTP, hostnames: [taken.example.com]}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: 18081}]}]
`

// base is valid; every case changes one thing in it.
const base = `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: bad}
spec:
  listener: {address: 127.0.0.1, port: 9100, protocol: HTTP, hostnames: [bad.example.com]}
  routes:
    - name: r
      match: {path: {type: Prefix, value: /}, headers: [{name: x-h, type: Exact, value: v}]}
      backends: [{name: app, weight: 1}]
      timeout: 5s
      retry: {conditions: [connect-failure], attempts: 1}
  backends:
    - name: app
      loadBalancing: {algorithm: RoundRobin}
      connectTimeout: 1s
      circuitBreakers: {maxConnections: 10}
      healthCheck: {active: {type: HTTP, http: {path: /healthz}}, passive: {consecutive5xx: 5}}
      endpoints: [{address: 127.0.0.1, port: 18081, weight: 1}]
`

type badCase struct {
	name    string
	doc     string
	expects []string
}

func mutate(old, new string) string {
	if !strings.Contains(base, old) {
		panic("base lacks " + old)
	}
	return strings.Replace(base, old, new, 1)
}

func cases() []badCase {
	var out []badCase
	add := func(name, doc string, expects ...string) { out = append(out, badCase{name, doc, expects}) }
	sub := func(name, old, new string, expects ...string) { add(name, mutate(old, new), expects...) }

	// Wrong types: a decoding error names the field.
	for _, tc := range []struct{ field, old, new, path, want string }{
		{"port", "port: 9100", "port: nine", "spec.listener.port", "an integer"},
		{"port-bool", "port: 9100", "port: true", "spec.listener.port", "an integer"},
		{"port-list", "port: 9100", "port: [9100]", "spec.listener.port", "an integer"},
		{"port-float", "port: 9100", "port: 91.5", "spec.listener.port", "an integer"},
		{"address", "address: 127.0.0.1", "address: [127.0.0.1]", "spec.listener.address", "a string"},
		{"protocol", "protocol: HTTP", "protocol: {x: 1}", "spec.listener.protocol", "a string"},
		{"hostnames", "hostnames: [bad.example.com]", "hostnames: bad.example.com", "spec.listener.hostnames", "a list"},
		{"routes", "  backends:\n", "  hostnames: 5\n  backends:\n", "unknown field", "spec.hostnames"},
		{"weight", "weight: 1}]\n      timeout", "weight: heavy}]\n      timeout", "spec.routes[0].backends[0].weight", "an integer"},
		{"endpoint-port", "port: 18081", "port: \"18081\"", "spec.backends[0].endpoints[0].port", "an integer"},
		{"endpoint-weight", "18081, weight: 1}]", "18081, weight: [1]}]", "spec.backends[0].endpoints[0].weight", "an integer"},
		{"timeout", "timeout: 5s", "timeout: 5", "spec.routes[0].timeout", `must be a duration such as "5s"`},
		{"timeout-word", "timeout: 5s", "timeout: soon", "spec.routes[0].timeout", `must be a duration such as "5s"`},
		{"connect-timeout", "connectTimeout: 1s", "connectTimeout: [1s]", "spec.backends[0].connectTimeout", `must be a duration such as "5s"`},
		{"attempts", "attempts: 1", "attempts: once", "spec.routes[0].retry.attempts", "an integer"},
		{"max-connections", "maxConnections: 10", "maxConnections: ten", "spec.backends[0].circuitBreakers.maxConnections", "an integer"},
		{"consecutive5xx", "consecutive5xx: 5", "consecutive5xx: five", "spec.backends[0].healthCheck.passive.consecutive5xx", "an integer"},
		{"endpoints", "endpoints: [{address: 127.0.0.1, port: 18081, weight: 1}]", "endpoints: 127.0.0.1:18081", "spec.backends[0].endpoints", "a list"},
		{"backends", "  backends:\n    - name: app\n", "  backends:\n    name: app\n", "not valid YAML", ""},
		{"name", "{name: bad}", "{name: 7}", "metadata.name", "a string"},
		{"invert", "value: v}]", "value: v, invert: sometimes}]", "spec.routes[0].match.headers[0].invert", "true or false"},
	} {
		expects := []string{}
		if tc.path != "" {
			expects = append(expects, tc.path)
		}
		if tc.want != "" {
			expects = append(expects, tc.want)
		}
		if len(expects) == 0 {
			expects = []string{"must be"}
		}
		sub("type-"+tc.field, tc.old, tc.new, expects...)
	}

	// Unknown fields, with their path.
	for _, tc := range []struct{ name, old, new, path string }{
		{"spec", "spec:\n", "spec:\n  extra: 1\n", "spec.extra"},
		{"listener", "protocol: HTTP,", "protocol: HTTP, proto: HTTP,", "spec.listener.proto"},
		{"route", "timeout: 5s", "timeout: 5s\n      timout: 5s", "spec.routes[0].timout"},
		{"backend", "connectTimeout: 1s", "connectTimeout: 1s\n      conectTimeout: 1s", "spec.backends[0].conectTimeout"},
		{"endpoint", "18081, weight: 1}]", "18081, weight: 1, wieght: 2}]", "spec.backends[0].endpoints[0].wieght"},
		{"lb", "algorithm: RoundRobin}", "algorithm: RoundRobin, algorithim: Maglev}", "spec.backends[0].loadBalancing.algorithim"},
		{"health", "passive: {consecutive5xx: 5}", "passive: {consecutive5xx: 5, consecutive500: 5}", "spec.backends[0].healthCheck.passive.consecutive500"},
		{"retry-on", "conditions: [connect-failure]", "on: [connect-failure]", "spec.routes[0].retry.true"},
		{"top", "kind: LoadBalancerPolicy\n", "kind: LoadBalancerPolicy\nstatus2: {}\n", "status2"},
	} {
		sub("unknown-field-"+tc.name, tc.old, tc.new, "unknown field", tc.path)
	}

	// Out-of-range numbers.
	for _, tc := range []struct {
		name, old, new, path string
	}{
		{"port-0", "port: 9100", "port: 0", "spec.listener.port: must be between 1 and 65535"},
		{"port-negative", "port: 9100", "port: -80", "spec.listener.port: must be between 1 and 65535"},
		{"port-high", "port: 9100", "port: 65536", "spec.listener.port: must be between 1 and 65535"},
		{"port-huge", "port: 9100", "port: 99999999999", "spec.listener.port"},
		{"endpoint-port-0", "port: 18081", "port: 0", "spec.backends[0].endpoints[0].port: must be between 1 and 65535"},
		{"endpoint-port-high", "port: 18081", "port: 70000", "spec.backends[0].endpoints[0].port: must be between 1 and 65535"},
		{"endpoint-weight-0", "18081, weight: 1}]", "18081, weight: 0}]", "spec.backends[0].endpoints[0].weight: must be between 1 and 100000"},
		{"endpoint-weight-high", "18081, weight: 1}]", "18081, weight: 100001}]", "spec.backends[0].endpoints[0].weight: must be between 1 and 100000"},
		{"route-weight-negative", "weight: 1}]\n      timeout", "weight: -1}]\n      timeout", "spec.routes[0].backends[0].weight: must be between 0 and 100000"},
		{"route-weight-zero", "weight: 1}]\n      timeout", "weight: 0}]\n      timeout", "spec.routes[0].backends: the weights add up to 0"},
		{"timeout-negative", "timeout: 5s", "timeout: -5s", "spec.routes[0].timeout: must not be negative"},
		{"timeout-huge", "timeout: 5s", "timeout: 100h", "spec.routes[0].timeout: must be at most 24h"},
		{"timeout-ns", "timeout: 5s", "timeout: 5ns", "spec.routes[0].timeout: must be a whole number of milliseconds"},
		{"connect-timeout-0", "connectTimeout: 1s", "connectTimeout: 0s", "spec.backends[0].connectTimeout: must be greater than zero"},
		{"attempts-high", "attempts: 1", "attempts: 11", "spec.routes[0].retry.attempts: must be between 0 and 10"},
		{"max-connections-0", "maxConnections: 10", "maxConnections: 0", "spec.backends[0].circuitBreakers.maxConnections: must be at least 1"},
		{"consecutive5xx-0", "consecutive5xx: 5", "consecutive5xx: 0", "spec.backends[0].healthCheck.passive.consecutive5xx: must be between 1 and 1000"},
		{"choice-count", "algorithm: RoundRobin}", "algorithm: LeastRequest, leastRequest: {choiceCount: 1}}", "spec.backends[0].loadBalancing.leastRequest.choiceCount: must be between 2 and 100"},
		{"ring-size", "algorithm: RoundRobin}", "algorithm: RingHash, ringHash: {minimumRingSize: 0}}", "spec.backends[0].loadBalancing.ringHash.minimumRingSize: must be between 1 and 8388608"},
		{"ring-max-below-min", "algorithm: RoundRobin}", "algorithm: RingHash, ringHash: {minimumRingSize: 4096, maximumRingSize: 1024}}", "spec.backends[0].loadBalancing.ringHash.maximumRingSize: must be between 4096 and 8388608"},
		{"maglev-not-prime", "algorithm: RoundRobin}", "algorithm: Maglev, maglev: {tableSize: 65536}}", "spec.backends[0].loadBalancing.maglev.tableSize: must be a prime number"},
		{"maglev-huge", "algorithm: RoundRobin}", "algorithm: Maglev, maglev: {tableSize: 5000012}}", "spec.backends[0].loadBalancing.maglev.tableSize: must be a prime number"},
		{"slow-start-percent", "algorithm: RoundRobin}", "algorithm: RoundRobin, slowStart: {window: 10s, minWeightPercent: 101}}", "spec.backends[0].loadBalancing.slowStart.minWeightPercent: must be between 0 and 100"},
		{"slow-start-window", "algorithm: RoundRobin}", "algorithm: RoundRobin, slowStart: {window: 0s}}", "spec.backends[0].loadBalancing.slowStart.window: must be greater than zero"},
		{"panic-threshold", "healthCheck: {", "healthCheck: {panicThreshold: 101, ", "spec.backends[0].healthCheck.panicThreshold: must be between 0 and 100"},
		{"hc-interval", "active: {type: HTTP,", "active: {type: HTTP, interval: 0s,", "spec.backends[0].healthCheck.active.interval: must be greater than zero"},
		{"hc-threshold", "active: {type: HTTP,", "active: {type: HTTP, healthyThreshold: 0,", "spec.backends[0].healthCheck.active.healthyThreshold: must be between 1 and 100"},
		{"hc-port", "active: {type: HTTP,", "active: {type: HTTP, port: 0,", "spec.backends[0].healthCheck.active.port: must be between 1 and 65535"},
		{"hc-status", "http: {path: /healthz}", "http: {path: /healthz, expectedStatuses: [{start: 300, end: 200}]}", "spec.backends[0].healthCheck.active.http.expectedStatuses[0]: must be an inclusive range"},
		{"hc-status-high", "http: {path: /healthz}", "http: {path: /healthz, expectedStatuses: [{start: 200, end: 600}]}", "spec.backends[0].healthCheck.active.http.expectedStatuses[0]"},
		{"ejection-percent", "passive: {consecutive5xx: 5}", "passive: {consecutive5xx: 5, maxEjectionPercent: 150}", "spec.backends[0].healthCheck.passive.maxEjectionPercent: must be between 0 and 100"},
		{"failure-threshold", "passive: {consecutive5xx: 5}", "passive: {failurePercentage: {threshold: 101}}", "spec.backends[0].healthCheck.passive.failurePercentage.threshold: must be between 0 and 100"},
		{"stdev", "passive: {consecutive5xx: 5}", "passive: {successRate: {stdevFactor: \"-1\"}}", "spec.backends[0].healthCheck.passive.successRate.stdevFactor: must be a decimal number"},
		{"retry-budget", "circuitBreakers: {maxConnections: 10}", "circuitBreakers: {retryBudget: {percent: 200}}", "spec.backends[0].circuitBreakers.retryBudget.percent: must be between 0 and 100"},
		{"per-endpoint", "circuitBreakers: {maxConnections: 10}", "circuitBreakers: {maxConnectionsPerEndpoint: 0}", "spec.backends[0].circuitBreakers.maxConnectionsPerEndpoint: must be at least 1"},
		{"keepalive", "connectTimeout: 1s", "connectTimeout: 1s\n      connection: {tcpKeepalive: {time: 500ms}}", "spec.backends[0].connection.tcpKeepalive.time: must be a whole number of seconds"},
		{"keepalive-probes", "connectTimeout: 1s", "connectTimeout: 1s\n      connection: {tcpKeepalive: {probes: 0}}", "spec.backends[0].connection.tcpKeepalive.probes: must be between 1 and 100"},
		{"max-requests-per-conn", "connectTimeout: 1s", "connectTimeout: 1s\n      connection: {maxRequestsPerConnection: 0}", "spec.backends[0].connection.maxRequestsPerConnection: must be between 1"},
		{"retry-status", "conditions: [connect-failure]", "conditions: [retriable-status-codes], statusCodes: [600]", "spec.routes[0].retry.statusCodes[0]: must be between 100 and 599"},
		{"backoff", "attempts: 1}", "attempts: 1, backoff: {base: 1s, max: 100ms}}", "spec.routes[0].retry.backoff.max: must not be less than base"},
		{"idle-timeout", "timeout: 5s", "timeout: 5s\n      idleTimeout: -1s", "spec.routes[0].idleTimeout: must not be negative"},
	} {
		sub("range-"+tc.name, tc.old, tc.new, tc.path)
	}

	// Unknown enum values, listing what is supported.
	for _, tc := range []struct{ name, old, new, path string }{
		{"protocol", "protocol: HTTP", "protocol: UDP", `spec.listener.protocol: unsupported value "UDP"; supported: HTTP, HTTPS, TCP`},
		{"protocol-case", "protocol: HTTP", "protocol: http", `spec.listener.protocol: unsupported value "http"`},
		{"algorithm", "algorithm: RoundRobin}", "algorithm: RoundRobn}", `spec.backends[0].loadBalancing.algorithm: unsupported value "RoundRobn"; supported: RoundRobin, LeastRequest, Random, RingHash, Maglev, BackendUtilization`},
		{"algorithm-nginx", "algorithm: RoundRobin}", "algorithm: least_conn}", `spec.backends[0].loadBalancing.algorithm: unsupported value "least_conn"`},
		{"path-type", "type: Prefix", "type: Regex", `spec.routes[0].match.path.type: unsupported value "Regex"; supported: Prefix, SegmentPrefix, Exact, RegularExpression`},
		{"header-type", "type: Exact, value: v", "type: Suffix, value: v", `spec.routes[0].match.headers[0].type: unsupported value "Suffix"`},
		{"hc-type", "type: HTTP, http", "type: HTTPS, http", `spec.backends[0].healthCheck.active.type: unsupported value "HTTPS"; supported: HTTP, TCP, GRPC`},
		{"hc-method", "http: {path: /healthz}", "http: {path: /healthz, method: CONNECT}", `spec.backends[0].healthCheck.active.http.method: unsupported value "CONNECT"`},
		{"retry-on", "conditions: [connect-failure]", "conditions: [timeout]", `spec.routes[0].retry.conditions[0]: unsupported value "timeout"`},
		{"endpoint-state", "18081, weight: 1}]", "18081, weight: 1, state: Down}]", `spec.backends[0].endpoints[0].state: unsupported value "Down"; supported: Active, Draining`},
		{"upstream-protocol", "connectTimeout: 1s", "connectTimeout: 1s\n      connection: {protocol: HTTP3}", `spec.backends[0].connection.protocol: unsupported value "HTTP3"; supported: HTTP1, HTTP2`},
		{"session-type", "attempts: 1}", "attempts: 1}\n      sessionPersistence: {type: URL}", `spec.routes[0].sessionPersistence.type: unsupported value "URL"; supported: Cookie, Header`},
		{"same-site", "algorithm: RoundRobin}", "algorithm: Maglev, hashKeys: [{cookie: {name: c, generate: {sameSite: Sometimes}}}]}", `spec.backends[0].loadBalancing.hashKeys[0].cookie.generate.sameSite: unsupported value "Sometimes"`},
		{"tls-version", "protocol: HTTP, hostnames: [bad.example.com]}", "protocol: HTTPS, hostnames: [bad.example.com], tls: {minVersion: TLSv1.0, certificates: [{certificateFile: a, privateKeyFile: b}]}}", `spec.listener.tls.minVersion: unsupported value "TLSv1.0"; supported: TLSv1.2, TLSv1.3`},
		{"cipher", "protocol: HTTP, hostnames: [bad.example.com]}", "protocol: HTTPS, hostnames: [bad.example.com], tls: {cipherSuites: [DES-CBC3-SHA], certificates: [{certificateFile: a, privateKeyFile: b}]}}", `spec.listener.tls.cipherSuites[0]: unsupported value "DES-CBC3-SHA"`},
		{"kind", "kind: LoadBalancerPolicy", "kind: Service", `kind: must be "LoadBalancerPolicy", got "Service"`},
		{"api-version", "apiVersion: lbplane.io/v1alpha1", "apiVersion: lbplane.io/v1", `apiVersion: must be "lbplane.io/v1alpha1", got "lbplane.io/v1"`},
	} {
		sub("enum-"+tc.name, tc.old, tc.new, tc.path)
	}

	// Conflicting or misplaced fields.
	for _, tc := range []struct{ name, old, new, path string }{
		{"tcp-with-routes", "protocol: HTTP, hostnames: [bad.example.com]}", "protocol: TCP}", "spec.routes: not allowed on a TCP listener"},
		{"tcp-with-hostnames", "protocol: HTTP,", "protocol: TCP,", "spec.listener.hostnames: not allowed on a TCP listener"},
		{"https-without-tls", "protocol: HTTP,", "protocol: HTTPS,", "spec.listener.tls: required with protocol HTTPS"},
		{"tls-on-http", "hostnames: [bad.example.com]}", "hostnames: [bad.example.com], tls: {certificates: [{certificateFile: a, privateKeyFile: b}]}}", `spec.listener.tls: only allowed with protocol HTTPS, got "HTTP"`},
		{"endpoints-and-service", "endpoints: [{address: 127.0.0.1, port: 18081, weight: 1}]", "endpoints: [{address: 127.0.0.1, port: 18081}]\n      service: {name: web, port: 80}", "spec.backends[0]: set either endpoints or service, not both"},
		{"no-endpoints", "endpoints: [{address: 127.0.0.1, port: 18081, weight: 1}]", "endpoints: []", "spec.backends[0]: set endpoints or service"},
		{"service-port-and-name", "endpoints: [{address: 127.0.0.1, port: 18081, weight: 1}]", "service: {name: web, port: 80, portName: http}", "spec.backends[0].service: set port or portName, not both"},
		{"least-request-config", "algorithm: RoundRobin}", "algorithm: Random, leastRequest: {choiceCount: 3}}", `spec.backends[0].loadBalancing.leastRequest: only allowed with algorithm LeastRequest, got "Random"`},
		{"hash-keys-round-robin", "algorithm: RoundRobin}", "algorithm: RoundRobin, hashKeys: [{sourceIP: {}}]}", "spec.backends[0].loadBalancing.hashKeys: only allowed with algorithm RingHash or Maglev"},
		{"hash-key-two-inputs", "algorithm: RoundRobin}", "algorithm: RingHash, hashKeys: [{sourceIP: {}, header: {name: x}}]}", "spec.backends[0].loadBalancing.hashKeys[0]: set exactly one of header, cookie, sourceIP, queryParameter, path and host, got 2"},
		{"hash-key-none", "algorithm: RoundRobin}", "algorithm: RingHash, hashKeys: [{terminal: true}]}", "spec.backends[0].loadBalancing.hashKeys[0]: set exactly one of header, cookie, sourceIP, queryParameter, path and host, got 0"},
		{"ring-on-maglev", "algorithm: RoundRobin}", "algorithm: Maglev, ringHash: {minimumRingSize: 1024}}", `spec.backends[0].loadBalancing.ringHash: only allowed with algorithm RingHash, got "Maglev"`},
		{"maglev-on-ring", "algorithm: RoundRobin}", "algorithm: RingHash, maglev: {tableSize: 65537}}", `spec.backends[0].loadBalancing.maglev: only allowed with algorithm Maglev, got "RingHash"`},
		{"slow-start-hash", "algorithm: RoundRobin}", "algorithm: Maglev, slowStart: {window: 10s}}", `spec.backends[0].loadBalancing.slowStart: only allowed with algorithm RoundRobin or LeastRequest, got "Maglev"`},
		{"same-site-none-insecure", "algorithm: RoundRobin}", "algorithm: RingHash, hashKeys: [{cookie: {name: c, generate: {sameSite: None}}}]}", "spec.backends[0].loadBalancing.hashKeys[0].cookie.generate.sameSite: None requires secure: true"},
		{"hc-http-on-tcp", "type: HTTP, http", "type: TCP, http", `spec.backends[0].healthCheck.active.http: only allowed with type HTTP, got "TCP"`},
		{"grpc-without-h2", "type: HTTP, http: {path: /healthz}", "type: GRPC", "spec.backends[0].healthCheck.active.type: GRPC needs connection.protocol: HTTP2"},
		{"passive-empty", "passive: {consecutive5xx: 5}", "passive: {interval: 5s}", "spec.backends[0].healthCheck.passive: set at least one detector"},
		{"health-empty", "healthCheck: {active: {type: HTTP, http: {path: /healthz}}, passive: {consecutive5xx: 5}}", "healthCheck: {}", "spec.backends[0].healthCheck: set active, passive or panicThreshold"},
		{"header-present-value", "type: Exact, value: v", "type: Present, value: v", "spec.routes[0].match.headers[0].value: not allowed with type Present"},
		{"header-exact-no-value", "type: Exact, value: v", "type: Exact", "spec.routes[0].match.headers[0].value: required with type Exact"},
		{"status-codes-without-condition", "conditions: [connect-failure]", "conditions: [5xx], statusCodes: [503]", "spec.routes[0].retry.statusCodes: only allowed when conditions has retriable-status-codes"},
		{"status-condition-without-codes", "conditions: [connect-failure]", "conditions: [retriable-status-codes]", "spec.routes[0].retry.statusCodes: required when conditions has retriable-status-codes"},
		{"header-session-ttl", "attempts: 1}", "attempts: 1}\n      sessionPersistence: {type: Header, ttl: 1h}", "spec.routes[0].sessionPersistence: ttl and path are only allowed with type Cookie"},
		{"header-session-across", "attempts: 1}", "attempts: 1}\n      sessionPersistence: {type: Header, acrossBackends: true}", "spec.routes[0].sessionPersistence.acrossBackends: only allowed with type Cookie"},
		{"upstream-tls-no-ca", "connectTimeout: 1s", "connectTimeout: 1s\n      tls: {sni: a.internal}", "spec.backends[0].tls.caFile: required"},
		{"upstream-tls-no-sni", "connectTimeout: 1s", "connectTimeout: 1s\n      tls: {caFile: ca.crt}", "spec.backends[0].tls.sni: required to verify"},
		{"upstream-tls-both", "connectTimeout: 1s", "connectTimeout: 1s\n      tls: {caFile: ca.crt, insecureSkipVerify: true}", "spec.backends[0].tls: set caFile or insecureSkipVerify, not both"},
		{"cert-files-and-secret", "protocol: HTTP, hostnames: [bad.example.com]}", "protocol: HTTPS, hostnames: [bad.example.com], tls: {certificates: [{certificateFile: a, privateKeyFile: b, secretName: s}]}}", "spec.listener.tls.certificates[0]: set certificateFile and privateKeyFile, or secretName, not both"},
		{"cert-without-key", "protocol: HTTP, hostnames: [bad.example.com]}", "protocol: HTTPS, hostnames: [bad.example.com], tls: {certificates: [{certificateFile: a}]}}", "spec.listener.tls.certificates[0]: certificateFile and privateKeyFile go together"},
		{"tls-no-certificates", "protocol: HTTP, hostnames: [bad.example.com]}", "protocol: HTTPS, hostnames: [bad.example.com], tls: {certificates: []}}", "spec.listener.tls.certificates: at least one certificate is required"},
		{"tls-versions-reversed", "protocol: HTTP, hostnames: [bad.example.com]}", "protocol: HTTPS, hostnames: [bad.example.com], tls: {minVersion: TLSv1.3, maxVersion: TLSv1.2, certificates: [{certificateFile: a, privateKeyFile: b}]}}", "spec.listener.tls.maxVersion: must not be lower than minVersion"},
		{"tls13-ciphers", "protocol: HTTP, hostnames: [bad.example.com]}", "protocol: HTTPS, hostnames: [bad.example.com], tls: {minVersion: TLSv1.3, cipherSuites: [AES128-SHA], certificates: [{certificateFile: a, privateKeyFile: b}]}}", "spec.listener.tls.cipherSuites: not allowed with minVersion TLSv1.3"},
		{"two-nameless-certs", "protocol: HTTP, hostnames: [bad.example.com]}", "protocol: HTTPS, hostnames: [bad.example.com], tls: {certificates: [{certificateFile: a, privateKeyFile: b}, {certificateFile: c, privateKeyFile: d}]}}", "spec.listener.tls.certificates[1].hostnames: required"},
		{"overlapping-certs", "protocol: HTTP, hostnames: [bad.example.com]}", "protocol: HTTPS, hostnames: [bad.example.com], tls: {certificates: [{certificateFile: a, privateKeyFile: b, hostnames: [x.example.com]}, {certificateFile: c, privateKeyFile: d, hostnames: [x.example.com]}]}}", `spec.listener.tls.certificates[1].hostnames: "x.example.com" is already served by certificates[0]`},
	} {
		sub("conflict-"+tc.name, tc.old, tc.new, tc.path)
	}

	// Duplicate names.
	sub("duplicate-backend", "  backends:\n    - name: app\n", "  backends:\n    - name: app\n      endpoints: [{address: 127.0.0.2, port: 1}]\n    - name: app\n", `spec.backends[1].name: duplicate backend name "app"`)
	sub("duplicate-route", "      retry: {conditions: [connect-failure], attempts: 1}\n", "      retry: {conditions: [connect-failure], attempts: 1}\n    - name: r\n      backends: [{name: app}]\n", `spec.routes[1].name: duplicate route name "r"`)
	sub("duplicate-endpoint", "18081, weight: 1}]", "18081, weight: 1}, {address: 127.0.0.1, port: 18081}]", "spec.backends[0].endpoints[1]: duplicate endpoint 127.0.0.1:18081 (also at index 0)")
	sub("duplicate-hostname", "hostnames: [bad.example.com]", "hostnames: [bad.example.com, bad.example.com]", `spec.listener.hostnames[1]: duplicate hostname "bad.example.com"`)
	sub("duplicate-route-backend", "backends: [{name: app, weight: 1}]", "backends: [{name: app, weight: 1}, {name: app}]", `spec.routes[0].backends[1].name: backend "app" listed twice`)
	add("duplicate-policy", base+"---\n"+base, "default/bad")

	// Names and references.
	sub("route-unknown-backend", "backends: [{name: app, weight: 1}]", "backends: [{name: ghost, weight: 1}]", `spec.routes[0].backends[0].name: no backend named "ghost" in spec.backends`)
	sub("name-uppercase", "{name: bad}", "{name: Bad}", `metadata.name: must be lowercase letters`)
	sub("name-empty", "{name: bad}", "{name: \"\"}", "metadata.name: required")
	sub("name-long", "{name: bad}", "{name: "+strings.Repeat("a", 300)+"}", "metadata.name: must be lowercase letters")
	sub("namespace", "{name: bad}", "{name: bad, namespace: Team_A}", "metadata.namespace: must be a DNS label")
	sub("backend-name", "    - name: app\n", "    - name: App_1\n", `spec.backends[0].name: must be a DNS label`)
	sub("backend-name-empty", "    - name: app\n", "    - name: \"\"\n", "spec.backends[0].name: required")
	sub("route-name", "    - name: r\n", "    - name: R!\n", `spec.routes[0].name: must be a DNS label`)
	sub("proxy-group", "spec:\n", "spec:\n  proxyGroup: \"Edge Proxies\"\n", "spec.proxyGroup: must be lowercase letters")
	sub("hostname-invalid", "hostnames: [bad.example.com]", "hostnames: [bad_example.com]", `spec.listener.hostnames[0]: must be a lowercase DNS name`)
	sub("hostname-wildcard-middle", "hostnames: [bad.example.com]", "hostnames: [bad.*.com]", `spec.listener.hostnames[0]: must be a lowercase DNS name`)
	sub("address-invalid", "address: 127.0.0.1, port: 9100", "address: localhost, port: 9100", `spec.listener.address: must be an IP address, got "localhost"`)
	sub("endpoint-address-name", "{address: 127.0.0.1, port: 18081, weight: 1}", "{address: Backend_Local, port: 18081, weight: 1}", `spec.backends[0].endpoints[0].address: must be an IP address or a lowercase DNS name, got "Backend_Local"`)
	sub("endpoint-address-cidr", "{address: 127.0.0.1, port: 18081, weight: 1}", "{address: 10.0.0.0/8, port: 18081, weight: 1}", `spec.backends[0].endpoints[0].address: must be an IP address`)
	sub("no-backends", "  backends:\n    - name: app\n      loadBalancing: {algorithm: RoundRobin}\n      connectTimeout: 1s\n      circuitBreakers: {maxConnections: 10}\n      healthCheck: {active: {type: HTTP, http: {path: /healthz}}, passive: {consecutive5xx: 5}}\n      endpoints: [{address: 127.0.0.1, port: 18081, weight: 1}]\n", "  backends: []\n", "spec.backends: at least one backend is required")
	sub("no-protocol", "protocol: HTTP, ", "", "spec.listener.protocol: required")
	sub("route-no-backends", "backends: [{name: app, weight: 1}]", "backends: []", "spec.routes[0].backends: at least one backend is required")

	// Invalid patterns.
	for i, re := range []string{"((", "[a-", "a{2,1}", "(?=lookahead)", "*a", `\8`} {
		sub(fmt.Sprintf("regex-%d", i), "type: Exact, value: v", fmt.Sprintf("type: RegularExpression, value: %q", re), "spec.routes[0].match.headers[0].value: invalid regular expression")
	}
	sub("path-relative", "value: /}", "value: api}", `spec.routes[0].match.path.value: must start with "/"`)
	sub("path-query", "value: /}", "value: \"/a?b=c\"}", `spec.routes[0].match.path.value: must not contain '?', '#' or white space`)
	sub("path-space", "value: /}", "value: \"/a b\"}", `spec.routes[0].match.path.value: must not contain`)
	sub("header-name-space", "name: x-h", "name: \"x h\"", "spec.routes[0].match.headers[0].name: must be an HTTP header name")
	sub("header-name-colon", "name: x-h", "name: \"x:h\"", "spec.routes[0].match.headers[0].name: must be an HTTP header name")
	sub("hc-path", "http: {path: /healthz}", "http: {path: healthz}", `spec.backends[0].healthCheck.active.http.path: must start with "/"`)
	sub("hash-header-name", "algorithm: RoundRobin}", "algorithm: RingHash, hashKeys: [{header: {name: \"bad header\"}}]}", "spec.backends[0].loadBalancing.hashKeys[0].header.name: must be an HTTP header name")
	sub("hash-query-name", "algorithm: RoundRobin}", "algorithm: RingHash, hashKeys: [{queryParameter: {name: \"a=b\"}}]}", "spec.backends[0].loadBalancing.hashKeys[0].queryParameter.name: must be a query parameter name")
	sub("cookie-name", "algorithm: RoundRobin}", "algorithm: RingHash, hashKeys: [{cookie: {name: \"a;b\"}}]}", "spec.backends[0].loadBalancing.hashKeys[0].cookie.name: must be a cookie name")
	sub("cookie-path", "algorithm: RoundRobin}", "algorithm: RingHash, hashKeys: [{cookie: {name: c, generate: {path: \"/a;b\"}}}]}", `spec.backends[0].loadBalancing.hashKeys[0].cookie.generate.path: must start with "/"`)
	sub("session-name", "attempts: 1}", "attempts: 1}\n      sessionPersistence: {name: \"a b\"}", "spec.routes[0].sessionPersistence.name: must be a cookie or header name")
	sub("sni-wildcard", "connectTimeout: 1s", "connectTimeout: 1s\n      tls: {sni: \"*.internal\", caFile: ca.crt}", "spec.backends[0].tls.sni: must be a lowercase DNS name")
	sub("slow-start-aggression", "algorithm: RoundRobin}", "algorithm: RoundRobin, slowStart: {window: 10s, aggression: fast}}", `spec.backends[0].loadBalancing.slowStart.aggression: must be a decimal number`)

	// Ports and names already used by another policy ("existing", pushed beforehand).
	conflict := func(name, listener, want string) {
		add("in-use-"+name, existing+"---\n"+mutate("{address: 127.0.0.1, port: 9100, protocol: HTTP, hostnames: [bad.example.com]}", listener), want)
	}
	conflict("same-host", "{address: 127.0.0.1, port: 9200, protocol: HTTP, hostnames: [taken.example.com]}", `spec.listener.hostnames: hostname "taken.example.com" on port 9200 is already served by policy default/existing`)
	add("in-use-tcp-on-http-port", existing+`---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: bad}
spec:
  listener: {address: 127.0.0.1, port: 9200, protocol: TCP}
  backends: [{name: db, endpoints: [{address: 127.0.0.1, port: 5432}]}]
`, "spec.listener.port: port 9200 is already used by policy default/existing with protocol HTTP")
	conflict("other-address", "{address: 0.0.0.0, port: 9200, protocol: HTTP, hostnames: [other.example.com]}", "spec.listener.address: port 9200 is already bound on 127.0.0.1 by policy default/existing")

	// Huge and deep documents, and bytes that are not text.
	huge := mutate("hostnames: [bad.example.com]", "hostnames: [bad.example.com]\n  # "+strings.Repeat("x", 1<<20))
	add("huge-document", huge, "document is", "at most 1048576 allowed")
	var endpoints strings.Builder
	for i := 0; i < 10001; i++ {
		fmt.Fprintf(&endpoints, "{address: 10.%d.%d.%d, port: 80}, ", i/65536, i/256%256, i%256)
	}
	add("too-many-endpoints", mutate("[{address: 127.0.0.1, port: 18081, weight: 1}]", "["+strings.TrimSuffix(endpoints.String(), ", ")+"]"), "spec.backends[0].endpoints: at most 10000 endpoints, got 10001")
	var hosts []string
	for i := 0; i < 101; i++ {
		hosts = append(hosts, fmt.Sprintf("h%d.example.com", i))
	}
	add("too-many-hostnames", mutate("hostnames: [bad.example.com]", "hostnames: ["+strings.Join(hosts, ", ")+"]"), "spec.listener.hostnames: at most 100 hostnames, got 101")
	add("deep-nesting", mutate("spec:\n", "spec:\n  deep: "+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+"\n"), "")
	add("header-name-1mib", mutate("name: x-h", "name: "+strings.Repeat("h", 1<<20-2000)), "spec.routes[0].match.headers[0].name: must be an HTTP header name (token characters, at most 256)")
	add("header-value-long", mutate("value: v}", "value: "+strings.Repeat("v", 5000)+"}"), "spec.routes[0].match.headers[0].value: at most 4096 characters")
	add("non-utf8", mutate("{name: bad}", "{name: \"b\xffad\"}"), "not valid UTF-8")
	add("non-utf8-comment", mutate("spec:\n", "# caf\xe9\nspec:\n"), "not valid UTF-8")
	add("binary", "\x00\x01\x02\x03binary", "")
	add("not-yaml", "apiVersion: [unclosed\n", "not valid YAML")
	add("json-not-object", "[1, 2, 3]", "")
	add("empty-spec", "apiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {name: empty}\nspec: {}\n", "spec.listener.port", "spec.listener.protocol: required", "spec.backends: at least one backend is required")
	add("alias-bomb", "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n", "")
	sub("zone-failover-duplicate", "algorithm: RoundRobin}", "algorithm: RoundRobin, zoneFailover: [zone-a, zone-a]}", "spec.backends[0].loadBalancing.zoneFailover[1]")
	sub("zone-name", "algorithm: RoundRobin}", "algorithm: RoundRobin, zoneFailover: [\"zone a\"]}", "spec.backends[0].loadBalancing.zoneFailover[0]: must be a zone name")
	sub("dns-on-ip-backend", "connectTimeout: 1s\n", "connectTimeout: 1s\n      dns: {resolution: Strict}\n", "spec.backends[0].dns: only allowed on a backend with an endpoint address that is a host name")
	sub("dns-logical-two-endpoints", "endpoints: [{address: 127.0.0.1, port: 18081, weight: 1}]", "dns: {resolution: Logical}\n      endpoints: [{address: a.example.com, port: 18081}, {address: b.example.com, port: 18081}]", "spec.backends[0].endpoints: dns.resolution Logical takes exactly one endpoint")
	return out
}

func main() {
	dir := filepath.Join("testdata", "bad")
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(err)
	}
	for i, c := range cases() {
		var b strings.Builder
		for _, e := range c.expects {
			if e != "" {
				fmt.Fprintf(&b, "# expect: %s\n", e)
			}
		}
		b.WriteString(c.doc)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d-%s.yaml", i+1, c.name)), []byte(b.String()), 0o644); err != nil {
			panic(err)
		}
	}
	fmt.Println(len(cases()), "cases written to", dir)
}
