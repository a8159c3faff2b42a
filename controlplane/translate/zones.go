package translate

import (
	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
)

// zones carries zone-aware routing and zone weights into the cluster.
func zones(lb *v1alpha1.LoadBalancing, cl *ir.Cluster) {
	if za := lb.ZoneAware; za != nil {
		cl.ZoneAware = &ir.ZoneAware{MinEndpoints: uint32(*za.MinEndpoints)}
	}
	for _, w := range lb.ZoneWeights {
		cl.ZoneWeights = append(cl.ZoneWeights, ir.ZoneWeight{Zone: w.Zone, Weight: uint32(w.Weight)})
	}
}
