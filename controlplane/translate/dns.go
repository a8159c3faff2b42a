package translate

import (
	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
)

// dnsCluster makes the cluster of a backend with host-name endpoints one that Envoy resolves.
func dnsCluster(cl *ir.Cluster, b *v1alpha1.Backend) {
	d := b.DNS
	if d == nil || !b.UsesDNS() {
		return
	}
	cl.DNS = &ir.DNS{Logical: d.Resolution == v1alpha1.DNSLogical, RefreshInterval: d.RefreshInterval.Duration,
		RespectTTL: d.RespectTTL, LookupFamily: string(d.LookupFamily)}
}
