package trafficmodel

import (
	"math"
	"testing"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// TestZoneWeightsShares holds zoneSplit to the table in Envoy's docs (intro/arch_overview/upstream/
// load_balancing/locality_weight): zone X of weight 1 and Y of weight 2, Y fully healthy; X's share as its
// healthy endpoints drop, with the overprovisioning factor of 1.4 (the docs round 32.9 % at 70 % healthy to 33).
func TestZoneWeightsShares(t *testing.T) {
	for _, tc := range []struct {
		down int // of X's 10 endpoints
		want float64
	}{{0, 1.0 / 3}, {3, 0.98 / 2.98}, {4, 0.84 / 2.84}, {5, 0.7 / 2.7}, {10, 0}} {
		c := cluster(ir.RoundRobin, zonesOf(10, 10), nil, ones(20)...)
		c.ZoneWeights = []ir.ZoneWeight{{Zone: "a", Weight: 1}, {Zone: "b", Weight: 2}}
		shares := model(c, downFirst(tc.down)).Shares()
		x := 0.0
		for _, s := range shares[:10] {
			x += s
		}
		if math.Abs(x-tc.want) > 1e-9 {
			t.Errorf("%d of X down: X gets %.4f, want %.4f (%v)", tc.down, x, tc.want, shares)
		}
	}
	// A zone without a weight gets nothing.
	c := cluster(ir.LeastRequest, zonesOf(2, 2), nil, 1, 1, 1, 1)
	c.ZoneWeights = []ir.ZoneWeight{{Zone: "a", Weight: 80}}
	if s := model(c, nil).Shares(); s[0] != 0.5 || s[2] != 0 {
		t.Errorf("unlisted zone b: shares %v, want [0.5 0.5 0 0]", s)
	}
}
