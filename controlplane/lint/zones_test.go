package lint

import (
	"testing"
)

func TestZoneRules(t *testing.T) {
	const twoInA = `endpoints: [{address: 10.0.0.1, port: 80, zone: a}, {address: 10.0.0.2, port: 80, zone: a}, {address: 10.0.0.3, port: 80, zone: b}]`
	checkRuleCases(t, []ruleCase{
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
	})
}
