package lint

import (
	"strings"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/manifest"
)

func check(t *testing.T, doc string) []Finding {
	t.Helper()
	return Check(policyOf(t, doc))
}

// policyOf decodes, defaults and validates a test policy.
func policyOf(t *testing.T, doc string) *v1alpha1.LoadBalancerPolicy {
	t.Helper()
	d, err := manifest.DecodeDocument([]byte("apiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\n" + strings.TrimSpace(doc) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := d.Policy
	v1alpha1.Default(p)
	if errs := v1alpha1.Validate(p); len(errs) > 0 {
		t.Fatalf("the test policy is invalid: %v", errs)
	}
	return p
}

const eps = `endpoints: [{address: 10.0.0.1, port: 80, zone: a}, {address: 10.0.0.2, port: 80, zone: b}]`

// Each rule has policies that must trigger it (with the field named) and policies that must not.
func TestRules(t *testing.T) {
	for _, c := range []struct {
		rule, field string
		hit         []string
		miss        []string
	}{
		{RuleFailoverWithoutOutlier, "spec.backends[0].loadBalancing.zoneFailover",
			[]string{
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: {zoneFailover: [a, b]}, ` + eps + `}]`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: {zoneFailover: [a, b]}, healthCheck: {active: {type: TCP}}, ` + eps + `}]`,
			},
			[]string{
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: {zoneFailover: [a, b]}, healthCheck: {passive: {consecutive5xx: 3}}, ` + eps + `}]`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, ` + eps + `}]`,
			}},
		{RuleHashWithWeightedSplit, "spec.routes[0].backends",
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{backends: [{name: a, weight: 90}, {name: b, weight: 10}]}]
  backends:
    - {name: a, loadBalancing: {algorithm: RingHash, hashKeys: [{header: {name: x-user}}]}, ` + eps + `}
    - {name: b, loadBalancing: {algorithm: RingHash, hashKeys: [{header: {name: x-user}}]}, ` + eps + `}`},
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{backends: [{name: a, weight: 90}, {name: b, weight: 10}], sessionPersistence: {acrossBackends: true}}]
  backends:
    - {name: a, loadBalancing: {algorithm: RingHash}, ` + eps + `}
    - {name: b, loadBalancing: {algorithm: RingHash}, ` + eps + `}`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{backends: [{name: a, weight: 100}, {name: b, weight: 0}]}]
  backends:
    - {name: a, loadBalancing: {algorithm: Maglev}, ` + eps + `}
    - {name: b, loadBalancing: {algorithm: Maglev}, ` + eps + `}`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{backends: [{name: a, weight: 90}, {name: b, weight: 10}]}]
  backends:
    - {name: a, ` + eps + `}
    - {name: b, ` + eps + `}`}},
		{RuleSessionSplit, "spec.routes[0].sessionPersistence",
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{backends: [{name: a, weight: 0}, {name: b, weight: 1}], sessionPersistence: {name: s}}]
  backends:
    - {name: a, ` + eps + `}
    - {name: b, ` + eps + `}`},
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{backends: [{name: a, weight: 0}, {name: b, weight: 1}], sessionPersistence: {name: s, acrossBackends: true}}]
  backends:
    - {name: a, ` + eps + `}
    - {name: b, ` + eps + `}`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{backends: [{name: a}], sessionPersistence: {name: s}}]
  backends:
    - {name: a, ` + eps + `}`}},
		{RuleHashWithWeightedSplit, "spec.backends",
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: TCP}
  backends:
    - {name: a, loadBalancing: {algorithm: Maglev}, ` + eps + `}
    - {name: b, loadBalancing: {algorithm: Maglev}, ` + eps + `}`},
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: TCP}
  backends:
    - {name: a, loadBalancing: {algorithm: Maglev}, ` + eps + `}`}},
		{RulePanicHidesHealth, "spec.backends[0].healthCheck.panicThreshold",
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, healthCheck: {panicThreshold: 60, active: {type: TCP}}, ` + eps + `}]`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, healthCheck: {panicThreshold: 80, passive: {consecutive5xx: 3}}, service: {name: web, port: 80}}]`},
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, healthCheck: {panicThreshold: 50, active: {type: TCP}}, ` + eps + `}]`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, healthCheck: {panicThreshold: 0, active: {type: TCP}}, endpoints: [{address: 10.0.0.1, port: 80}]}]`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, healthCheck: {active: {type: TCP}}, ` + eps + `}]`}},
		{RuleHealthCheckRouteHost, "spec.backends[0].healthCheck.active.http.host",
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP, hostnames: [shop.example.com]}
  backends: [{name: app, healthCheck: {active: {type: HTTP, http: {path: /healthz, host: shop.example.com}}}, ` + eps + `}]`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP, hostnames: ["*.example.com"]}
  backends: [{name: app, healthCheck: {active: {type: HTTP, http: {path: /healthz, host: Shop.Example.com}}}, ` + eps + `}]`},
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP, hostnames: [shop.example.com]}
  backends: [{name: app, healthCheck: {active: {type: HTTP, http: {path: /healthz}}}, ` + eps + `}]`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP, hostnames: [shop.example.com]}
  backends: [{name: app, healthCheck: {active: {type: HTTP, http: {path: /healthz, host: health.internal}}}, ` + eps + `}]`}},
		{RuleRetryWithoutBudget, "spec.routes[0].retry",
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{backends: [{name: app}], retry: {attempts: 3}}]
  backends: [{name: app, ` + eps + `}]`},
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{backends: [{name: app}], retry: {attempts: 3}}]
  backends: [{name: app, circuitBreakers: {retryBudget: {percent: 20}}, ` + eps + `}]`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{backends: [{name: app}]}]
  backends: [{name: app, ` + eps + `}]`}},
		{RuleBreakerBelowLoad, "spec.backends[0].circuitBreakers.maxRequests",
			[]string{`metadata: {name: p, annotations: {lbplane.io/expected-concurrency: "5000"}}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, circuitBreakers: {maxRequests: 1024}, ` + eps + `}]`},
			[]string{`metadata: {name: p, annotations: {lbplane.io/expected-concurrency: "500"}}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, circuitBreakers: {maxRequests: 1024}, ` + eps + `}]`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, circuitBreakers: {maxRequests: 10}, ` + eps + `}]`}},
		{RuleBreakerBelowLoad, "spec.backends[0].circuitBreakers.maxConnectionsPerEndpoint",
			[]string{`metadata: {name: p, annotations: {lbplane.io/expected-concurrency: "300"}}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, circuitBreakers: {maxConnectionsPerEndpoint: 100}, ` + eps + `}]`},
			[]string{`metadata: {name: p, annotations: {lbplane.io/expected-concurrency: "200"}}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, circuitBreakers: {maxConnectionsPerEndpoint: 100}, ` + eps + `}]`}},
		{RuleShadowedRoute, "spec.routes[1]",
			[]string{
				// A catch-all before a path (examples/session-persistence.yaml had this).
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{name: all, backends: [{name: app}]}, {name: api, match: {path: {value: /api/}}, backends: [{name: app}]}]
  backends: [{name: app, ` + eps + `}]`,
				// A shorter prefix first; the later one's header match does not help.
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{name: api, match: {path: {value: /api}}, backends: [{name: app}]}, {name: v2, match: {path: {type: Exact, value: /api/v2}, headers: [{name: x-v, value: "2"}]}, backends: [{name: app}]}]
  backends: [{name: app, ` + eps + `}]`,
				// Presence is implied by an exact value.
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{name: any-v, match: {headers: [{name: X-V, type: Present}]}, backends: [{name: app}]}, {name: v2, match: {path: {value: /a}, headers: [{name: x-v, value: "2"}]}, backends: [{name: app}]}]
  backends: [{name: app, ` + eps + `}]`,
			},
			[]string{
				// The narrow route first: both can match.
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{name: api, match: {path: {value: /api/}}, backends: [{name: app}]}, {name: all, backends: [{name: app}]}]
  backends: [{name: app, ` + eps + `}]`,
				// A header on the earlier route narrows it.
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{name: canary, match: {headers: [{name: x-canary, value: "1"}]}, backends: [{name: app}]}, {name: all, backends: [{name: app}]}]
  backends: [{name: app, ` + eps + `}]`,
				// Prefixes are compared case-sensitively, as Envoy does.
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{name: a, match: {path: {value: /API}}, backends: [{name: app}]}, {name: b, match: {path: {value: /api/x}}, backends: [{name: app}]}]
  backends: [{name: app, ` + eps + `}]`,
			}},
		{RuleSlowStartStarves, "spec.backends[0].loadBalancing.slowStart.minWeightPercent",
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: {slowStart: {window: 60s, minWeightPercent: 0}}, ` + eps + `}]`,
				// Faster at first, still far below 1 % at the start.
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: {slowStart: {window: 10m, aggression: "2.0", minWeightPercent: 0}}, ` + eps + `}]`},
			[]string{`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: {slowStart: {window: 60s}}, ` + eps + `}]`,
				`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: {slowStart: {window: 60s, minWeightPercent: 1}}, ` + eps + `}]`,
			}},
	} {
		t.Run(c.rule, func(t *testing.T) {
			for i, doc := range c.hit {
				var found *Finding
				for _, f := range check(t, doc) {
					if f.Rule == c.rule {
						found = &f
					}
				}
				switch {
				case found == nil:
					t.Errorf("hit %d: %s did not fire", i, c.rule)
				case found.Field != c.field:
					t.Errorf("hit %d: field %s, want %s", i, found.Field, c.field)
				case len(found.Message) < 40:
					t.Errorf("hit %d: message too short to help: %q", i, found.Message)
				}
			}
			for i, doc := range c.miss {
				for _, f := range check(t, doc) {
					if f.Rule == c.rule {
						t.Errorf("miss %d: %s fired: %s", i, c.rule, f)
					}
				}
			}
		})
	}
}

func TestBadExpectedConcurrencyIsReported(t *testing.T) {
	fs := check(t, `metadata: {name: p, annotations: {lbplane.io/expected-concurrency: "lots"}}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, `+eps+`}]`)
	if len(fs) != 1 || !strings.Contains(fs[0].String(), `got "lots"`) {
		t.Fatalf("findings: %v", fs)
	}
}

func TestEveryRuleIsListed(t *testing.T) {
	names := map[string]bool{}
	for _, r := range Rules {
		names[r.Name] = true
	}
	for _, r := range []string{RuleFailoverWithoutOutlier, RuleHashWithWeightedSplit, RulePanicHidesHealth, RuleHealthCheckRouteHost, RuleRetryWithoutBudget, RuleBreakerBelowLoad, RuleHashWithoutBalanceFactor, RuleBackupWithoutHealthCheck, RuleShadowedRoute, RuleSessionSplit} {
		if !names[r] {
			t.Errorf("%s is not in Rules", r)
		}
	}
}

func TestHashWithoutBalanceFactor(t *testing.T) {
	for _, tc := range []struct {
		lb   string
		want bool
	}{
		{"{algorithm: Maglev}", true},
		{"{algorithm: RingHash, hashBalanceFactor: 150}", false},
		{"{algorithm: RoundRobin}", false},
	} {
		fs := check(t, `metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: `+tc.lb+`, `+eps+`}]`)
		got := false
		for _, f := range fs {
			got = got || f.Rule == RuleHashWithoutBalanceFactor
		}
		if got != tc.want {
			t.Errorf("%s: findings %v; want the rule: %v", tc.lb, fs, tc.want)
		}
	}
}

func TestBackupWithoutHealthCheck(t *testing.T) {
	const backupEps = `endpoints: [{address: 10.0.0.1, port: 80}, {address: 10.0.0.2, port: 80, backup: true}]`
	for _, tc := range []struct {
		hc   string
		want bool
	}{{"", true}, {"healthCheck: {active: {type: TCP}}, ", false}} {
		fs := check(t, `metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, `+tc.hc+backupEps+`}]`)
		got := false
		for _, f := range fs {
			got = got || f.Rule == RuleBackupWithoutHealthCheck
		}
		if got != tc.want {
			t.Errorf("%q: findings %v; want the rule: %v", tc.hc, fs, tc.want)
		}
	}
}

func TestLogicalDNSBalancing(t *testing.T) {
	for _, tc := range []struct {
		dns, lb string
		want    bool
	}{{"Logical", "LeastRequest", true}, {"Logical", "RoundRobin", false}, {"Strict", "LeastRequest", false}} {
		fs := check(t, `metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, dns: {resolution: `+tc.dns+`}, loadBalancing: {algorithm: `+tc.lb+`}, endpoints: [{address: api.example.com, port: 443}]}]`)
		got := false
		for _, f := range fs {
			got = got || f.Rule == RuleLogicalDNSBalancing
		}
		if got != tc.want {
			t.Errorf("%s %s: findings %v; want the rule: %v", tc.dns, tc.lb, fs, tc.want)
		}
	}
}
