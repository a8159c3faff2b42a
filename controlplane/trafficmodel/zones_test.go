package trafficmodel

import (
	"math"
	"strings"
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

// envoysIn is one Envoy as lbplane bootstraps it in zone ("" for none).
func envoysIn(t *testing.T, zone string) Envoys {
	t.Helper()
	e, err := EnvoysIn(zone)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// zoneShares sums a model's shares per zone.
func zoneShares(m *Cluster) map[string]float64 {
	out := map[string]float64{}
	for i, s := range m.Shares() {
		out[m.Hosts[i].Zone] += s
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestZoneAwareRouting holds zoneRoute to Envoy's zone-aware routing with lbplane's bootstrap (a local
// cluster of one host in the Envoy's zone) and force_local_zone: all of an Envoy's requests stay in its zone
// while it has minEndpoints healthy endpoints; below that, the zone keeps its share of the healthy
// endpoints (upstream percentage over local percentage, here 100 %) and the rest goes to the other zones by
// their healthy endpoints; an Envoy whose zone has no endpoints spreads by healthy endpoints per zone; an
// Envoy without a zone, or a cluster without zoneAware, is not routed by zone; several Envoys average.
func TestZoneAwareRouting(t *testing.T) {
	zoneAware := func(min uint32, zones []string, weights ...uint32) *ir.Cluster {
		c := cluster(ir.RoundRobin, zones, nil, weights...)
		c.ZoneAware = &ir.ZoneAware{MinEndpoints: min}
		return c
	}
	for _, tc := range []struct {
		name  string
		c     *ir.Cluster
		down  int
		zone  string
		want  map[string]float64
		hosts []float64 // when set, each host's share
	}{
		{name: "zone-a healthy", c: zoneAware(2, zonesOf(3, 3), ones(6)...), zone: "a", want: map[string]float64{"a": 1},
			hosts: []float64{1.0 / 3, 1.0 / 3, 1.0 / 3, 0, 0, 0}},
		{name: "weights within the zone", c: zoneAware(1, zonesOf(2, 2), 3, 1, 1, 1), zone: "a", hosts: []float64{0.75, 0.25, 0, 0}},
		{name: "one of three left, minEndpoints 2", c: zoneAware(2, zonesOf(3, 3), ones(6)...), down: 2, zone: "a", want: map[string]float64{"a": 0.25, "b": 0.75}},
		{name: "exactly minEndpoints left", c: zoneAware(2, zonesOf(3, 3), ones(6)...), down: 1, zone: "a", want: map[string]float64{"a": 1}},
		{name: "zone-a down", c: zoneAware(2, zonesOf(3, 3), ones(6)...), down: 3, zone: "a", want: map[string]float64{"b": 1}},
		{name: "Envoy in zone-b", c: zoneAware(2, zonesOf(3, 3), ones(6)...), down: 2, zone: "b", want: map[string]float64{"b": 1}},
		{name: "Envoy in a zone without endpoints", c: zoneAware(1, zonesOf(1, 3), ones(4)...), zone: "c", want: map[string]float64{"a": 0.25, "b": 0.75}},
		{name: "Envoy without a zone", c: zoneAware(2, zonesOf(3, 3), ones(6)...), want: map[string]float64{"a": 0.5, "b": 0.5}},
		{name: "no zoneAware", c: cluster(ir.RoundRobin, zonesOf(3, 3), nil, ones(6)...), zone: "a", want: map[string]float64{"a": 0.5, "b": 0.5}},
		{name: "random ignores weights in the zone", c: func() *ir.Cluster {
			c := zoneAware(1, zonesOf(2, 2), 3, 1, 1, 1)
			c.Algorithm = ir.Random
			return c
		}(), zone: "a", hosts: []float64{0.5, 0.5, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := model(tc.c, downFirst(tc.down))
			m.From(envoysIn(t, tc.zone))
			if tc.want != nil {
				got := zoneShares(m)
				for z, w := range tc.want {
					if !near(got[z], w) {
						t.Errorf("zone %s: %.4f, want %.4f (%v)", z, got[z], w, got)
					}
				}
			}
			if tc.hosts != nil {
				for i, s := range m.Shares() {
					if !near(s, tc.hosts[i]) {
						t.Errorf("host %d: %.4f, want %.4f (%v)", i, s, tc.hosts[i], m.Shares())
					}
				}
			}
		})
	}

	// Two Envoys, one per zone, each taken to send as many requests: zone-a's stays in a, zone-b's in b.
	m := model(zoneAware(1, zonesOf(2, 2), ones(4)...), nil)
	m.From(EnvoysByZone(map[string]int{"a": 1, "b": 3}))
	if got := zoneShares(m); !near(got["a"], 0.25) || !near(got["b"], 0.75) {
		t.Errorf("one Envoy in a, three in b: %v, want a 0.25, b 0.75", got)
	}
	if cs := Caveats(m); len(cs) != 1 || !strings.Contains(cs[0], "average of Envoys in a (1) and b (3)") {
		t.Errorf("caveats %q", cs)
	}
	m.From(envoysIn(t, ""))
	if cs := Caveats(m); len(cs) != 1 || !strings.Contains(cs[0], "an Envoy without a zone") {
		t.Errorf("caveats %q", cs)
	}
	m.From(envoysIn(t, "a"))
	if cs := Caveats(m); len(cs) != 0 {
		t.Errorf("one zone's Envoy: caveats %q, want none", cs)
	}
}

// TestZoneAwareResidual holds the residual path to the example in Envoy's own comments
// (regenerateLocalityRoutingStructures): local cluster hosts 40/40/20 % over three zones, upstream 25/50/25:
// the local zone keeps 25/40 of its requests (62.5 %), and the rest goes to the zones with residual
// capacity, 10 points in b and 5 in c (25 % and 12.5 %). The local cluster comes from a bootstrap; without
// force_local_zone and with Envoy's default min_cluster_size of 6, a cluster of 4 endpoints is not routed.
func TestZoneAwareResidual(t *testing.T) {
	local, err := LocalFromBootstrap([]byte(`
node: {id: n, cluster: g, locality: {zone: a}}
cluster_manager: {local_cluster_name: fleet}
static_resources:
  clusters:
    - name: fleet
      type: STATIC
      load_assignment:
        cluster_name: fleet
        endpoints:
          - locality: {zone: a}
            lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.9.0.1, port_value: 1}}}}, {endpoint: {address: {socket_address: {address: 10.9.0.2, port_value: 1}}}}]
          - locality: {zone: b}
            lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.9.0.3, port_value: 1}}}}, {endpoint: {address: {socket_address: {address: 10.9.0.4, port_value: 1}}}}]
          - locality: {zone: c}
            lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.9.0.5, port_value: 1}}}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if local.Zone != "a" || local.Hosts["a"] != 2 || local.Hosts["b"] != 2 || local.Hosts["c"] != 1 {
		t.Fatalf("local %+v", local)
	}
	zones := append(zonesOf(2, 4), "c", "c")
	m := model(cluster(ir.RoundRobin, zones, nil, ones(8)...), nil)
	m.From(EnvoysFrom(local))
	if got := zoneShares(m); !near(got["a"], 0.625) || !near(got["b"], 0.25) || !near(got["c"], 0.125) {
		t.Errorf("shares %v, want a 0.625, b 0.25, c 0.125", got)
	}
	small := model(cluster(ir.RoundRobin, zones[:4], nil, ones(4)...), nil)
	small.From(EnvoysFrom(local))
	if got := zoneShares(small); !near(got["a"], 0.5) || !near(got["b"], 0.5) {
		t.Errorf("4 endpoints, below min_cluster_size 6: %v, want a 0.5, b 0.5", got)
	}
}
