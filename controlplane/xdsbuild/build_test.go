package xdsbuild_test

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
)

func TestZonesBecomeLocalities(t *testing.T) {
	cla := xdsbuild.LoadAssignment(&ir.Cluster{Name: "c", Endpoints: []ir.Endpoint{
		{Address: "10.0.0.1", Port: 80, Weight: 1, Zone: "zone-a"},
		{Address: "10.0.0.2", Port: 80, Weight: 1, Zone: "zone-b"},
		{Address: "10.0.0.3", Port: 80, Weight: 1, Zone: "zone-a"},
		{Address: "10.0.0.4", Port: 80, Weight: 1},
	}})
	if len(cla.Endpoints) != 3 {
		t.Fatalf("%d localities, want 3 (zone-a, zone-b, none)", len(cla.Endpoints))
	}
	got := map[string]int{}
	for _, loc := range cla.Endpoints {
		got[loc.GetLocality().GetZone()] = len(loc.LbEndpoints)
	}
	if got["zone-a"] != 2 || got["zone-b"] != 1 || got[""] != 1 {
		t.Errorf("endpoints per zone: %v", got)
	}
	if err := cla.ValidateAll(); err != nil {
		t.Error(err)
	}
}

func TestZoneFailoverPrioritiesHaveNoGaps(t *testing.T) {
	cla := xdsbuild.LoadAssignment(&ir.Cluster{Name: "c", ZoneFailover: []string{"zone-a", "zone-b", "zone-c"}, Endpoints: []ir.Endpoint{
		{Address: "10.0.0.1", Port: 80, Weight: 1, Zone: "zone-c"},
		{Address: "10.0.0.2", Port: 80, Weight: 1, Zone: "zone-x"},
		{Address: "10.0.0.3", Port: 80, Weight: 1, Zone: "zone-a"},
	}})
	got := map[string]uint32{}
	for _, loc := range cla.Endpoints {
		got[loc.GetLocality().GetZone()] = loc.GetPriority()
	}
	// zone-b has no endpoints: zone-c moves up to 1, the unlisted zone-x comes last at 2.
	if got["zone-a"] != 0 || got["zone-c"] != 1 || got["zone-x"] != 2 {
		t.Errorf("priorities: %v", got)
	}
}

// Retired endpoints (a backend at weight 0 in a cluster merged for sessions) are DRAINING in a level after
// every other one, backups included, with no gap, whatever zone they are in.
func TestRetiredEndpointsComeLastAndDrain(t *testing.T) {
	cla := xdsbuild.LoadAssignment(&ir.Cluster{Name: "c", ZoneFailover: []string{"zone-a", "zone-b"}, Endpoints: []ir.Endpoint{
		{Address: "10.0.0.1", Port: 80, Weight: 1, Zone: "zone-a", Retired: true},
		{Address: "10.0.0.2", Port: 80, Weight: 1, Zone: "zone-a"},
		{Address: "10.0.0.3", Port: 80, Weight: 1, Zone: "zone-b"},
		{Address: "10.0.0.4", Port: 80, Weight: 1, Zone: "zone-c", Retired: true},
		{Address: "10.0.0.5", Port: 80, Weight: 1, Zone: "zone-b", Backup: true},
	}})
	got := map[string]uint32{}
	for _, loc := range cla.Endpoints {
		for _, e := range loc.LbEndpoints {
			a := e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
			got[a] = loc.GetPriority()
			if draining := e.GetHealthStatus().String() == "DRAINING"; draining != (a == "10.0.0.1" || a == "10.0.0.4") {
				t.Errorf("%s: health status %s", a, e.GetHealthStatus())
			}
		}
	}
	want := map[string]uint32{"10.0.0.2": 0, "10.0.0.3": 1, "10.0.0.5": 2, "10.0.0.1": 3, "10.0.0.4": 3}
	for a, p := range want {
		if got[a] != p {
			t.Errorf("priorities %v, want %v", got, want)
			break
		}
	}
	if err := cla.ValidateAll(); err != nil {
		t.Error(err)
	}
}

func TestRouterDynamicStatsCanBeTurnedOff(t *testing.T) {
	for _, off := range []bool{false, true} {
		g := &ir.Group{Name: "g", Listeners: []*ir.Listener{{Name: "http-80", Address: "127.0.0.1", Port: 80, Protocol: ir.HTTP, NoRouterDynamicStats: off,
			VirtualHosts: []*ir.VirtualHost{{Name: "v", Domains: []string{"*"}}}}}}
		res, err := xdsbuild.Build(g)
		if err != nil {
			t.Fatal(err)
		}
		l := res[resource.ListenerType][0].(*listenerv3.Listener)
		var hcm hcmv3.HttpConnectionManager
		if err := l.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
			t.Fatal(err)
		}
		var router routerv3.Router
		if err := hcm.HttpFilters[len(hcm.HttpFilters)-1].GetTypedConfig().UnmarshalTo(&router); err != nil {
			t.Fatal(err)
		}
		// Unset means Envoy's default: on.
		if got := router.GetDynamicStats() != nil && !router.GetDynamicStats().GetValue(); got != off {
			t.Errorf("NoRouterDynamicStats %v: router dynamic_stats off = %v", off, got)
		}
	}
}
