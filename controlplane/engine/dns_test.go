package engine

import (
	"io"
	"log/slog"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// TestDNSClusterHasNoEndpointsResource: a backend that switches to a host name becomes a DNS cluster that
// carries its endpoints, and its EDS resource goes; switching back brings the EDS resource back. Each
// incremental state holds what a full build holds.
func TestDNSClusterHasNoEndpointsResource(t *testing.T) {
	cache := xdscache.New()
	e := New(cache, slog.New(slog.NewTextHandler(io.Discard, nil)))
	const name = "default/p/a"
	for step, addr := range []string{"10.0.0.1", "app.internal", "10.0.0.1"} {
		p := policy("p", 8080)
		p.Spec.Backends[0].Endpoints[0].Address = addr
		e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{p})
		_, st := cache.State("default")
		_, hasEDS := st.Lookup(resource.EndpointType, name)
		r, ok := st.Lookup(resource.ClusterType, name)
		if !ok {
			t.Fatalf("step %d: no cluster %s", step, name)
		}
		c := &clusterv3.Cluster{}
		if err := r.Any().UnmarshalTo(c); err != nil {
			t.Fatal(err)
		}
		dns := addr == "app.internal"
		if hasEDS == dns || (c.GetClusterType().GetName() == xdsbuild.DNSClusterType) != dns || (c.GetLoadAssignment() != nil) != dns {
			t.Errorf("step %d (%s): EDS resource %v, cluster type %q, load assignment in the cluster %v", step, addr, hasEDS,
				c.GetClusterType().GetName(), c.GetLoadAssignment() != nil)
		}
		if n := len(st.Resources(resource.EndpointType)); n != map[bool]int{true: 0, false: 1}[dns] {
			t.Errorf("step %d: %d EDS resources", step, n)
		}
	}
}
