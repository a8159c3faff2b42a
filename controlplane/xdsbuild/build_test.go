package xdsbuild_test

import (
	"testing"

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
