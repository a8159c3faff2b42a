package lint

import (
	"fmt"
	"strconv"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

// RuleSlowStartStarves catches a slow start whose new endpoints get (almost) nothing.
const RuleSlowStartStarves = "slow-start-starves-new-endpoints"

// starvedFraction is the starting weight under which a new endpoint waits too long for its first request.
const starvedFraction = 0.01

func init() {
	Rules = append(Rules, struct{ Name, Catches string }{RuleSlowStartStarves,
		"loadBalancing.slowStart whose new endpoints start below 1 % of their weight (minWeightPercent 0): Envoy raises an endpoint's weight only when it picks it, so a new endpoint can get no request for the whole window"})
}

// slowStartRamp warns when a new endpoint starts so light that Envoy's scheduler leaves it out: Envoy
// recomputes an endpoint's slow-start weight only when it picks the endpoint (or the backend changes), so
// an endpoint that starts at a fraction f of its weight waits for about 1/f picks of each other endpoint
// before its first request, and its weight does not grow meanwhile. Istio #59666 is this case.
func slowStartRamp(add addFunc, bp string, b *v1alpha1.Backend) {
	ss := b.LoadBalancing.SlowStart
	if ss == nil || ss.MinWeightPercent == nil {
		return
	}
	a, err := strconv.ParseFloat(ss.Aggression, 64)
	if err != nil {
		return // validation names it
	}
	r := trafficmodel.Ramp{Window: ss.Window.Duration, Aggression: a, MinFraction: float64(*ss.MinWeightPercent) / 100}
	if f := r.Fraction(0); f < starvedFraction {
		add(RuleSlowStartStarves, bp+".loadBalancing.slowStart.minWeightPercent",
			"a new endpoint starts at %s %% of its weight, and Envoy raises an endpoint's weight only when it picks it: it waits for about %s picks of each other endpoint before its first request, so it may get none for the whole %s window; set minWeightPercent to 1 or more (10 by default)",
			strconv.FormatFloat(100*f, 'g', 3, 64), fmt.Sprintf("%.0f", 1/f), ss.Window.Duration)
	}
}
