package xdsbuild

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	commondnsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/common/dns/v3"
	dnsclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dns/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// DNSClusterType is the cluster extension of Envoy's DNS clusters. Since Envoy 1.33 it replaces the
// STRICT_DNS and LOGICAL_DNS discovery types, whose DNS fields on Cluster (dns_refresh_rate,
// respect_dns_ttl, ...) are deprecated; one DnsCluster message carries them, and all_addresses_in_single_endpoint
// picks the logical behaviour.
const DNSClusterType = "envoy.clusters.dns"

var lookupFamilies = map[string]commondnsv3.DnsLookupFamily{
	"V4Preferred": commondnsv3.DnsLookupFamily_V4_PREFERRED,
	"V4":          commondnsv3.DnsLookupFamily_V4_ONLY,
	"V6":          commondnsv3.DnsLookupFamily_V6_ONLY,
	"Auto":        commondnsv3.DnsLookupFamily_AUTO,
	"All":         commondnsv3.DnsLookupFamily_ALL,
}

// dnsDiscovery makes out a cluster Envoy resolves itself: its endpoints (names) travel in the cluster, and
// no EDS resource exists for it. The resolver is the Envoy's (its bootstrap's typed_dns_resolver_config).
func dnsDiscovery(c *ir.Cluster, out *clusterv3.Cluster) {
	if c.Resolved {
		// An address gone from the answer leaves at once (see below), from the EDS resource of the
		// addresses lbplane resolved.
		out.IgnoreHealthOnHostRemoval = true
	}
	d := c.DNS
	if d == nil {
		return
	}
	dc := &dnsclusterv3.DnsCluster{
		RespectDnsTtl:                d.RespectTTL,
		DnsLookupFamily:              lookupFamilies[d.LookupFamily],
		AllAddressesInSingleEndpoint: d.Logical,
	}
	if d.RefreshInterval > 0 {
		dc.DnsRefreshRate = durationpb.New(d.RefreshInterval)
	}
	out.EdsClusterConfig = nil
	out.ClusterDiscoveryType = &clusterv3.Cluster_ClusterType{ClusterType: &clusterv3.Cluster_CustomClusterType{
		Name: DNSClusterType, TypedConfig: mustAny(dc)}}
	out.LoadAssignment = LoadAssignment(c)
	// An address gone from the answer leaves at once, as with nginx's resolve: by default Envoy keeps a
	// removed host that passes its active health checks, so traffic would stay on addresses the name no
	// longer has (measured in e2e TestDNSBackendFollowsTheAnswer).
	out.IgnoreHealthOnHostRemoval = true
}
