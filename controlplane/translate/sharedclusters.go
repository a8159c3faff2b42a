package translate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// shareClusters names the Service backends' clusters of a policy the Gateway API translator made
// (v1alpha1.AnnotationGateway) after what they are: the Service port and the cluster's settings. Every such
// policy of a proxy group that sends to a Service port with the same settings then uses one Envoy cluster,
// with one health checker and one outlier detector, however many routes and host names name it; the group
// holds it once, and says which policies use it (ir.Group.Shared, see groupState.shares). A backend keeps a cluster of its own when it has upstream TLS (its
// secrets are named after the policy's cluster) or the operator overrode endpoints of the policy.
// g is the policy's own group, before its clusters are sorted; r is its result.
func shareClusters(p *v1alpha1.LoadBalancerPolicy, g *ir.Group, r *PolicyResult, overridden bool) {
	if p.Annotations[v1alpha1.AnnotationGateway] == "" || overridden {
		return
	}
	renamed := map[string]string{}
	for i := range p.Spec.Backends {
		b := &p.Spec.Backends[i]
		if b.Service == nil {
			continue
		}
		own := clusterName(p, b.Name)
		j := slices.IndexFunc(g.Clusters, func(c *ir.Cluster) bool { return c.Name == own })
		if j < 0 || g.Clusters[j].TLS != nil || g.Clusters[j].DNS != nil {
			continue
		}
		c := g.Clusters[j]
		c.Source = ir.Source{Backend: c.Source.Backend}
		c.Name = sharedClusterName(ServiceRefOf(p.Namespace, b.Service), c)
		renamed[own] = c.Name
	}
	if len(renamed) == 0 {
		return
	}
	rename := func(wcs []ir.WeightedCluster) {
		for i := range wcs {
			if n, ok := renamed[wcs[i].Name]; ok {
				wcs[i].Name = n
			}
		}
	}
	for _, l := range g.Listeners {
		if l.TCP != nil {
			rename(l.TCP.Clusters)
		}
		for _, vh := range l.VirtualHosts {
			for _, rt := range vh.Routes {
				rename(rt.Clusters)
				for i := range rt.Mirrors {
					if n, ok := renamed[rt.Mirrors[i].Cluster]; ok {
						rt.Mirrors[i].Cluster = n
					}
				}
			}
		}
	}
	for i, c := range r.Clusters {
		if n, ok := renamed[c]; ok {
			r.Clusters[i] = n
		}
	}
}

// sharedClusterName is "service/<namespace>/<name>/<port>/<hash>": the Service port, and a hash of what the
// shared cluster c is apart from its name and endpoints (which come from the Service); its source, the
// backend's name, is in it since Envoy's access log reads it from the cluster.
func sharedClusterName(ref ServiceRef, c *ir.Cluster) string {
	settings := *c
	settings.Name, settings.Endpoints = "", nil
	b, err := json.Marshal(&settings)
	if err != nil {
		panic(fmt.Sprintf("translate: a cluster does not encode: %v", err)) // the IR is plain values
	}
	h := fnv.New64a()
	h.Write(b)
	port := strconv.Itoa(int(ref.Port))
	if ref.PortName != "" {
		port = ref.PortName
	}
	return objkey.Join("service", ref.Namespace, ref.Name, port, fmt.Sprintf("%08x", uint32(h.Sum64())))
}

// share is one policy's use of a shared cluster: its own copy (the same as every other's once translated
// from the same Service) and its source there.
type share struct {
	cluster *ir.Cluster
	source  ir.Source
}

// sources lists the shares' sources, sorted.
func sources(shares []share) []ir.Source {
	out := make([]ir.Source, len(shares))
	for i, s := range shares {
		out[i] = s.source
	}
	slices.SortFunc(out, ir.CompareSources)
	return out
}

// compareClusterName orders clusters by name, for a binary search.
func compareClusterName(c *ir.Cluster, name string) int { return cmp.Compare(c.Name, name) }
