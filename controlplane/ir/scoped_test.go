package ir

import (
	"fmt"
	"testing"
)

func scopedGroup(hosts int, wildcard bool) *Group {
	l := &Listener{Name: "http-8080", Port: 8080, Protocol: HTTP}
	for i := range hosts {
		vh := &VirtualHost{Name: fmt.Sprintf("default/p-%d", i), Source: Source{Namespace: "default", Name: fmt.Sprintf("p-%d", i)},
			Domains: []string{fmt.Sprintf("p-%d.example.com", i), fmt.Sprintf("www.p-%d.example.com", i)},
			Routes:  []*Route{{Name: fmt.Sprintf("default/p-%d/r", i)}}}
		l.VirtualHosts = append(l.VirtualHosts, vh)
	}
	if wildcard {
		l.VirtualHosts[0].Domains = []string{"*.example.com"}
	}
	return &Group{Listeners: []*Listener{l, {Name: "http-9090", Port: 9090, Protocol: HTTP, VirtualHosts: l.VirtualHosts}}}
}

func TestScopedPortThresholdAndWildcards(t *testing.T) {
	for _, c := range []struct {
		hosts    int
		wildcard bool
		want     uint32
	}{{ScopedRoutesAbove, false, 0}, {ScopedRoutesAbove + 1, false, 8080}, {ScopedRoutesAbove + 1, true, 0}} {
		if got := scopedGroup(c.hosts, c.wildcard).ScopedPort(); got != c.want {
			t.Errorf("%d hosts, wildcard %v: scoped port %d, want %d", c.hosts, c.wildcard, got, c.want)
		}
	}
}

// A catch-all host that answers every request with a bare 404 (a Gateway listener without a host name)
// needs no scope: the port is still served as scoped routes. A catch-all that does anything else keeps the
// single table.
func TestCatchAllNotFoundNeedsNoScope(t *testing.T) {
	notFound := func() *Route {
		return &Route{Name: "default/any/none", PathType: PathPrefix, Path: "/", Timeout: 15e9, Retry: &Retry{Attempts: 2},
			DirectResponse: &DirectResponse{Status: 404}}
	}
	for _, c := range []struct {
		name   string
		change func(*VirtualHost)
		want   bool
	}{
		{"bare 404", func(*VirtualHost) {}, true},
		{"with a body", func(vh *VirtualHost) { vh.Routes[0].DirectResponse.Body = "no such host" }, false},
		{"another status", func(vh *VirtualHost) { vh.Routes[0].DirectResponse.Status = 503 }, false},
		{"a header match", func(vh *VirtualHost) { vh.Routes[0].Headers = []HeaderMatch{{Name: "x", Type: HeaderPresent}} }, false},
		{"a path of its own", func(vh *VirtualHost) { vh.Routes[0].Path = "/x" }, false},
		{"response headers", func(vh *VirtualHost) { vh.Routes[0].ResponseHeaders = &HeaderChanges{Remove: []string{"server"}} }, false},
		{"a second route", func(vh *VirtualHost) { vh.Routes = append(vh.Routes, notFound()) }, false},
		{"a backend", func(vh *VirtualHost) {
			vh.Routes[0].DirectResponse = nil
			vh.Routes[0].Clusters = []WeightedCluster{{Name: "c", Weight: 1}}
		}, false},
	} {
		g := scopedGroup(ScopedRoutesAbove+1, false)
		vh := &VirtualHost{Name: "default/any", Domains: []string{"*"}, Routes: []*Route{notFound()}}
		c.change(vh)
		g.Listeners[0].VirtualHosts = append(g.Listeners[0].VirtualHosts, vh)
		if got := g.Listeners[0].Scopable(); got != c.want {
			t.Errorf("%s: port 8080 scopable %v, want %v", c.name, got, c.want)
		}
	}
}

// NACK attribution: a host's route table and each of its scopes name the policy they came from.
func TestOwnersOfPerHostResources(t *testing.T) {
	g := scopedGroup(ScopedRoutesAbove+1, false)
	l := g.Listeners[0]
	vh := l.VirtualHosts[42]
	for _, c := range []struct {
		kind Kind
		name string
	}{{KindRoutes, l.HostRouteConfigName(vh)}, {KindScope, l.ScopeName(vh.Domains[0])}, {KindScope, l.ScopeName(vh.Domains[1])}} {
		owners := g.Owners(c.kind, c.name)
		if len(owners) != 1 || owners[0].Source.Name != "p-42" {
			t.Errorf("owners of %v %s: %+v, want p-42 alone", c.kind, c.name, owners)
		}
	}
	if owners := g.Owners(KindScope, l.ScopeName("nobody.example.com")); len(owners) != 0 {
		t.Errorf("a scope no host has is owned by %+v", owners)
	}
	if owners := g.Owners(KindRoutes, l.RouteConfigName()); len(owners) != len(l.VirtualHosts) {
		t.Errorf("the port's table: %d owners, want every host's (%d)", len(owners), len(l.VirtualHosts))
	}
}
