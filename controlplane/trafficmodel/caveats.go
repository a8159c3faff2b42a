package trafficmodel

import (
	"fmt"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// Caveats lists what a prediction of c leaves out: Envoy behaviour that turns on what only Envoy knows at
// run time. Every place that shows a prediction (lbctl trace, whatif, diff --traffic, the expected shares
// of lbctl status and the dashboard) shows these, as worded here.
func Caveats(c *Cluster) []string {
	var out []string
	switch c.Algorithm {
	case ir.LeastRequest:
		out = append(out, "least request: under concurrent requests Envoy sends more to the endpoints with fewer requests in flight; the shares are those of requests that do not overlap")
	case ir.BackendUtilization:
		out = append(out, "client-side weighted round robin: Envoy weighs the endpoints by the utilization they report at run time; the shares are by their configured weights")
	}
	if c.HashBalanceFactor > 0 {
		out = append(out, fmt.Sprintf("bounded load (%d%%): under concurrent requests, a key whose endpoint is over the bound goes to the next one on the ring or table; the shares are those of requests that do not overlap", c.HashBalanceFactor))
	}
	if c.SlowStart {
		if s := c.slowStartCaveat(); s != "" {
			out = append(out, s)
		}
	}
	if c.ZoneAware {
		if z := zoneCaveat(c.envoys.parts()); z != "" {
			out = append(out, z)
		}
	}
	return out
}

// zoneCaveat says whose shares a zone-aware cluster's are, unless they are one zone's Envoys'.
func zoneCaveat(ps Envoys) string {
	switch {
	case len(ps) == 1 && ps[0].Zone == "":
		return "zone-aware routing: the shares are those of " + ps.String() + ", which spreads over every zone; an Envoy with a zone keeps its requests in it (lbctl's --zone predicts one)"
	case len(ps) > 1:
		return "zone-aware routing: each Envoy keeps its requests in its own zone; the shares are the average of " + ps.String() + ", each taken to send as many requests"
	}
	return ""
}
