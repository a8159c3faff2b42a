package lint

import (
	"slices"
	"testing"
)

func TestProxyProtocolUtilizationStatsAndPriorityRules(t *testing.T) {
	checkRuleCases(t, []ruleCase{
		{RulePrioritiesWithoutZones, "spec.routes[0].retry.avoidPreviousPriorities",
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{backends: [{name: app}], retry: {avoidPreviousPriorities: true}}]
  backends: [{name: app, ` + eps + `}]`,
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  routes: [{backends: [{name: app}], retry: {avoidPreviousPriorities: true}}]
  backends: [{name: app, loadBalancing: {zoneFailover: [a, b]}, healthCheck: {passive: {consecutive5xx: 3}}, ` + eps + `}]`},
		{RuleUtilizationOnTCP, "spec.backends[0].loadBalancing.algorithm",
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: TCP}
  backends: [{name: app, loadBalancing: {algorithm: BackendUtilization}, ` + eps + `}]`,
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: {algorithm: BackendUtilization}, ` + eps + `}]`},
		{RuleProxyProtocolLoopback, "spec.listener.proxyProtocol.trustedSources",
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: TCP, proxyProtocol: {}}
  backends: [{name: app, ` + eps + `}]`,
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: TCP, proxyProtocol: {trustedSources: [198.51.100.0/24]}}
  backends: [{name: app, ` + eps + `}]`},
		{RulePerEndpointStatsMany, "spec.backends[0].perEndpointStats",
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, perEndpointStats: true, service: {name: web, port: 80}}]`,
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, perEndpointStats: true, ` + eps + `}]`},
	})
}

// ruleCase is one rule's check: reported at field on the hit document, not on the miss one.
type ruleCase struct {
	rule, field string
	hit, miss   string
}

// checkRuleCases runs each case as a subtest and checks that its rule is listed in Rules.
func checkRuleCases(t *testing.T, cases []ruleCase) {
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			found := func(doc string) bool {
				return slices.ContainsFunc(check(t, doc), func(f Finding) bool { return f.Rule == c.rule && f.Field == c.field })
			}
			if !found(c.hit) {
				t.Errorf("not reported on %s", c.field)
			}
			if found(c.miss) {
				t.Errorf("reported where it does not apply")
			}
		})
		if !slices.ContainsFunc(Rules, func(r struct{ Name, Catches string }) bool { return r.Name == c.rule }) {
			t.Errorf("%s is not in Rules", c.rule)
		}
	}
}
