package lint

import (
	"slices"
	"testing"
)

func TestZoneRules(t *testing.T) {
	const twoInA = `endpoints: [{address: 10.0.0.1, port: 80, zone: a}, {address: 10.0.0.2, port: 80, zone: a}, {address: 10.0.0.3, port: 80, zone: b}]`
	for _, c := range []struct {
		rule, field string
		hit, miss   string
	}{
		{RuleZoneBelowMinEndpoints, "spec.backends[0].loadBalancing.zoneAware.minEndpoints",
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: {zoneAware: {minEndpoints: 2}}, ` + twoInA + `}]`,
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: {zoneAware: {minEndpoints: 1}}, ` + twoInA + `}]`},
		{RuleZoneWeightsWithService, "spec.backends[0].loadBalancing.zoneWeights",
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: {zoneWeights: [{zone: a, weight: 3}]}, service: {name: web, port: 80}}]`,
			`metadata: {name: p}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: app, loadBalancing: {zoneWeights: [{zone: a, weight: 3}, {zone: b, weight: 1}]}, ` + eps + `}]`},
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
