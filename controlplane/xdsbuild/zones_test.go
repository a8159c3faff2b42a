package xdsbuild_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/common/v3"
	maglevv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/maglev/v3"
	randomv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/random/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
)

// The algorithms the goldens do not show: Random takes zone-aware routing, the hashes take zone weights in
// their own field, and a zone left out of the weights has no locality weight (Envoy refuses 0).
func TestZoneSettingsPerAlgorithm(t *testing.T) {
	eps := []ir.Endpoint{{Address: "10.0.0.1", Port: 80, Weight: 1, Zone: "a"}, {Address: "10.0.0.2", Port: 80, Weight: 1, Zone: "b"}}
	weights := []ir.ZoneWeight{{Zone: "a", Weight: 3}}
	policy := func(c *ir.Cluster, m proto.Message) proto.Message {
		t.Helper()
		c.ConnectTimeout = time.Second
		cl := xdsbuild.Cluster(c)
		if err := cl.ValidateAll(); err != nil {
			t.Fatal(err)
		}
		if err := cl.LoadBalancingPolicy.Policies[0].TypedExtensionConfig.TypedConfig.UnmarshalTo(m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	r := policy(&ir.Cluster{Name: "r", Algorithm: ir.Random, ZoneAware: &ir.ZoneAware{MinEndpoints: 3}, Endpoints: eps}, &randomv3.Random{}).(*randomv3.Random)
	if got := r.GetLocalityLbConfig().GetZoneAwareLbConfig().GetForceLocalZone().GetMinSize().GetValue(); got != 3 {
		t.Errorf("Random: force_local_zone.min_size = %d, want 3", got)
	}
	rh := policy(&ir.Cluster{Name: "h", Algorithm: ir.RingHash, ZoneWeights: weights, Endpoints: eps}, &ringhashv3.RingHash{}).(*ringhashv3.RingHash)
	mg := policy(&ir.Cluster{Name: "m", Algorithm: ir.Maglev, ZoneWeights: weights, Endpoints: eps}, &maglevv3.Maglev{}).(*maglevv3.Maglev)
	for name, w := range map[string]*commonv3.LocalityLbConfig_LocalityWeightedLbConfig{"RingHash": rh.LocalityWeightedLbConfig, "Maglev": mg.LocalityWeightedLbConfig} {
		if w == nil {
			t.Errorf("%s: no locality_weighted_lb_config", name)
		}
	}
	cla := xdsbuild.LoadAssignment(&ir.Cluster{Name: "m", Algorithm: ir.Maglev, ZoneWeights: weights, Endpoints: eps})
	if err := cla.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	for _, loc := range cla.Endpoints {
		want := map[string]uint32{"a": 3, "b": 0}[loc.GetLocality().GetZone()]
		if got := loc.GetLoadBalancingWeight().GetValue(); got != want {
			t.Errorf("zone %s: locality weight %d, want %d", loc.GetLocality().GetZone(), got, want)
		}
	}
}
