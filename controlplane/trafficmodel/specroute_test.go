package trafficmodel

import (
	"testing"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// TestTraceNamesTheSpecRoute: a trace and a preview say which route of spec.routes each Envoy route was made
// of, from the IR's sources and not from the route's name; a route made of none has no index.
func TestTraceNamesTheSpecRoute(t *testing.T) {
	c := &ir.Cluster{Name: "ns/p/app", Algorithm: ir.RoundRobin, Source: ir.Source{Namespace: "ns", Name: "p", Backend: "app"},
		Endpoints: []ir.Endpoint{{Address: "10.0.0.1", Port: 80, Weight: 1}}}
	src := ir.Source{Namespace: "ns", Name: "p"}
	api := &ir.Route{Name: "ns/p/api", Source: src.RouteSource(1), PathType: ir.PathPrefix, Path: "/api", Clusters: []ir.WeightedCluster{{Name: c.Name, Weight: 1}}}
	rest := &ir.Route{Name: "ns/p/default", Source: src, PathType: ir.PathPrefix, Path: "/", Clusters: []ir.WeightedCluster{{Name: c.Name, Weight: 1}}}
	cfg := &ir.Config{Groups: map[string]*ir.Group{"default": {Name: "default", Clusters: []*ir.Cluster{c},
		Listeners: []*ir.Listener{{Name: "l", Port: 80, Protocol: ir.HTTP, VirtualHosts: []*ir.VirtualHost{{Name: "ns/p", Source: src, Routes: []*ir.Route{api, rest}}}}}}}}
	p, err := ForPolicy(cfg, "ns", "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr := p.TraceRequest(Request{Path: "/api/x"}); tr.Route != "ns/p/api" || tr.SpecRoute == nil || *tr.SpecRoute != 1 {
		t.Errorf("/api/x: route %q, spec route %v; want ns/p/api, 1", tr.Route, tr.SpecRoute)
	}
	tr := p.TraceRequest(Request{Path: "/other"})
	if tr.Route != "ns/p/default" || tr.SpecRoute != nil {
		t.Errorf("/other: route %q, spec route %v; want ns/p/default and none", tr.Route, tr.SpecRoute)
	}
	if len(tr.Earlier) != 1 || tr.Earlier[0].Route != "ns/p/api" || tr.Earlier[0].SpecRoute == nil || *tr.Earlier[0].SpecRoute != 1 || len(tr.Earlier[0].Why) == 0 {
		t.Errorf("/other: earlier routes %+v, want ns/p/api (1) with why", tr.Earlier)
	}
	if pv := Compare(p, p); len(pv.SpecRoutes) != 1 || pv.SpecRoutes["ns/p/api"] != 1 {
		t.Errorf("preview's spec routes %v", pv.SpecRoutes)
	}
}
