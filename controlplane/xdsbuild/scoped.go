package xdsbuild

import (
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// A port with many hosts is served as scoped routes (see ir.Listener.Scopable): its connection manager
// takes a scope key from the Host header, and each host name is a scope (SRDS) naming the route table of
// its virtual host alone (RDS). Envoy then takes a change of one host as that host's table and nothing
// else. A request whose host has no scope gets 404, as one with no virtual host does from a single table.
// Envoy reads the scopes after the listener and the tables after the scopes (Types' order).

// ScopedListener builds the listener of a port served as scoped routes.
func ScopedListener(l *ir.Listener) *listenerv3.Listener { return listener(l, true) }

// HostRouteConfig builds the route table of one virtual host of a port served as scoped routes: the same
// virtual host as the port's single table would hold.
func HostRouteConfig(l *ir.Listener, vh *ir.VirtualHost) *routev3.RouteConfiguration {
	rc := RouteConfig(&ir.Listener{Name: l.Name, VirtualHosts: []*ir.VirtualHost{vh}})
	rc.Name = l.HostRouteConfigName(vh)
	return rc
}

// Scopes builds the scopes of one virtual host: one per host name, each sending its requests to the
// host's route table; none for a host that needs none (ir.VirtualHost.ImpliedByScopes).
func Scopes(l *ir.Listener, vh *ir.VirtualHost) []*routev3.ScopedRouteConfiguration {
	if vh.ImpliedByScopes() {
		return nil
	}
	out := make([]*routev3.ScopedRouteConfiguration, 0, len(vh.Domains))
	for _, d := range vh.Domains {
		out = append(out, &routev3.ScopedRouteConfiguration{
			Name:                   l.ScopeName(d),
			RouteConfigurationName: l.HostRouteConfigName(vh),
			Key: &routev3.ScopedRouteConfiguration_Key{Fragments: []*routev3.ScopedRouteConfiguration_Key_Fragment{{
				Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: d}}}},
		})
	}
	return out
}

func scopedRoutes(l *ir.Listener) *hcmv3.HttpConnectionManager_ScopedRoutes {
	return &hcmv3.HttpConnectionManager_ScopedRoutes{ScopedRoutes: &hcmv3.ScopedRoutes{
		Name: l.ScopedRoutesName(),
		// The key is the Host header up to its first ':' ("example.com:8080" is keyed "example.com"), as the
		// route tables match virtual hosts without the port (ignore_port_in_host_matching).
		ScopeKeyBuilder: &hcmv3.ScopedRoutes_ScopeKeyBuilder{Fragments: []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{{
			Type: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_{HeaderValueExtractor: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor{
				Name:             ":authority",
				ElementSeparator: ":",
				ExtractType:      &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_Index{Index: 0},
			}},
		}}},
		RdsConfigSource: ads(0),
		ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRds{ScopedRds: &hcmv3.ScopedRds{ScopedRdsConfigSource: ads(0)}},
	}}
}
