package trafficmodel

import (
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// A session naming a draining endpoint is kept there when the built cluster's override_host_status has
// DRAINING (drainingSessions: Keep), and balanced again when it does not (Move) or when the endpoint is
// down: the model reads the built cluster, not the policy.
func TestTraceSessionOnDrainingEndpoint(t *testing.T) {
	const draining = "198.51.100.2:80"
	for _, tc := range []struct {
		name      string
		keep      bool
		down      Down
		kept      bool
		whyPrefix string
	}{
		{name: "keep", keep: true, kept: true, whyPrefix: "session -> draining endpoint " + draining + ", kept"},
		{name: "move", keep: false, whyPrefix: "its endpoint " + draining + " is draining and the backend moves"},
		{name: "keep but failing", keep: true, down: Down{draining: "failed active health check"}, whyPrefix: "its endpoint " + draining + " is not healthy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &ir.Cluster{Name: "ns/p/app", Algorithm: ir.RoundRobin, Source: ir.Source{Namespace: "ns", Name: "p", Backend: "app"},
				KeepDrainingSessions: tc.keep, Endpoints: []ir.Endpoint{
					{Address: "198.51.100.1", Port: 80, Weight: 1},
					{Address: "198.51.100.2", Port: 80, Weight: 1, Draining: true},
					{Address: "198.51.100.3", Port: 80, Weight: 1}}}
			route := &ir.Route{Name: "r", PathType: ir.PathPrefix, Path: "/", Clusters: []ir.WeightedCluster{{Name: c.Name, Weight: 1}},
				Session: &ir.Session{Cookie: "s", Path: "/"}}
			cfg := &ir.Config{Groups: map[string]*ir.Group{"default": {Name: "default", Clusters: []*ir.Cluster{c},
				Listeners: []*ir.Listener{{Name: "l", Port: 80, Protocol: ir.HTTP, VirtualHosts: []*ir.VirtualHost{{Name: "ns/p",
					Source: ir.Source{Namespace: "ns", Name: "p"}, Routes: []*ir.Route{route}}}}}}}}
			p, err := ForPolicy(cfg, "ns", "p", tc.down)
			if err != nil {
				t.Fatal(err)
			}
			tr := p.TraceRequest(Request{Path: "/", Headers: map[string][]string{"cookie": {"s=" + EncodeSession(draining)}}})
			s := tr.Session
			if s == nil || s.Applies != tc.kept || s.Draining != tc.kept || !strings.HasPrefix(s.Why, tc.whyPrefix) {
				t.Fatalf("session trace %+v, want applies=%v starting %q", s, tc.kept, tc.whyPrefix)
			}
			if got := tr.Backends[0].Endpoint; (got == draining) != tc.kept {
				t.Errorf("the request goes to %q", got)
			}
			for _, e := range p.Shares() {
				if e.Address == draining && (e.Share != 0 || e.KeepsSessions != tc.kept) {
					t.Errorf("draining endpoint's share %v, keeps sessions %v", e.Share, e.KeepsSessions)
				}
			}
		})
	}
}
