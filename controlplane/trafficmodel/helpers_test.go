package trafficmodel

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
)

// model is the model of what xdsbuild makes of an IR cluster.
func model(c *ir.Cluster, down Down) *Cluster {
	var cla = xdsbuild.LoadAssignment(c)
	m, err := NewCluster(xdsbuild.Cluster(c), cla, down, BackupsOf(c))
	if err != nil {
		panic(err)
	}
	return m
}

// built is the route xdsbuild makes of an IR route.
func built(r *ir.Route) *routev3.Route {
	if r.Name == "" {
		r.Name = "r"
	}
	if len(r.Clusters) == 0 {
		r.Clusters = []ir.WeightedCluster{{Name: "c", Weight: 1}}
	}
	rc := xdsbuild.RouteConfig(&ir.Listener{Name: "l", VirtualHosts: []*ir.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*ir.Route{r}}}})
	return rc.GetVirtualHosts()[0].GetRoutes()[0]
}

func hashOf(keys []ir.HashKey) []*routev3.RouteAction_HashPolicy {
	return built(&ir.Route{PathType: ir.PathPrefix, Path: "/", HashKeys: keys}).GetRoute().GetHashPolicy()
}
