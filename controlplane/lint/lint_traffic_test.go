package lint

import (
	"slices"
	"testing"
)

func TestTrafficRules(t *testing.T) {
	for _, c := range []struct {
		rule, field string
		hit, miss   string
	}{
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
		{RulePerEndpointStatsMany, "spec.backends[0].perEndpointStats",
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, perEndpointStats: true, service: {name: web, port: 80}}]`,
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, perEndpointStats: true, ` + eps + `}]`},
	} {
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
