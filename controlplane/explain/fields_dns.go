package explain

import "strings"

// Rules of DNS backends that Envoy resolves (dns.resolver: Envoy): their settings are the DnsCluster
// extension's, and their endpoints travel inside the cluster (see inCluster). Where lbplane resolves them,
// the settings are lbplane's (resolvedByLbplane) and the endpoints are EDS's.
func init() {
	const dc = "cluster_type.typed_config."
	rules = append(rules,
		r(B+".dns.resolver", Cluster, cl, "cluster_type.name"),
		r(B+".dns.resolution", Cluster, cl, dc+"all_addresses_in_single_endpoint|cluster_type.name"),
		r(B+".dns.refreshInterval", Cluster, cl, dc+"dns_refresh_rate"),
		opt(B+".dns.respectTTL", Cluster, cl, dc+"respect_dns_ttl"),
		r(B+".dns.lookupFamily", Cluster, cl, dc+"dns_lookup_family"),
	)
}

// inCluster moves an endpoint rule into the cluster's load_assignment when the backend is resolved by
// Envoy: such a cluster has no EDS resource.
func inCluster(trees map[string]map[string]any, typ, name, paths string) (string, string) {
	if typ != Endpoints {
		return typ, paths
	}
	if _, ok := trees[Endpoints][name]; ok {
		return typ, paths
	}
	if c, ok := trees[Cluster][name]; !ok || resolve(c, "load_assignment") == nil {
		return typ, paths
	}
	alts := strings.Split(paths, "|")
	for i, a := range alts {
		alts[i] = "load_assignment." + a
	}
	return Cluster, strings.Join(alts, "|")
}

// resolvedByLbplane tells whether a rule of a DnsCluster setting meets a cluster lbplane resolved the names
// of: a built cluster without cluster_type.
func resolvedByLbplane(trees map[string]map[string]any, typ, name, path string) bool {
	if typ != Cluster || !strings.HasPrefix(path, "cluster_type.") {
		return false
	}
	c, ok := trees[Cluster][name]
	return ok && resolve(c, "cluster_type") == nil
}
