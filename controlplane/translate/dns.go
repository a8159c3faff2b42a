package translate

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
)

// ReasonForbiddenAddress is ResolvedRefs' reason when a host name resolved to addresses the server's rules
// refuse: they are left out of the backend's endpoints, and a push that would serve such a policy is
// refused.
const ReasonForbiddenAddress = "ForbiddenAddress"

// DNSQuery is a host name lbplane resolves and the records it asks for (a backend's dns.lookupFamily).
// Name is lower case, without the final dot.
type DNSQuery struct {
	Name   string
	Family v1alpha1.DNSLookupFamily
}

// DNSAnswer is what a name last resolved to, as the engine holds it: the last good addresses (kept when a
// later resolution fails, as Envoy keeps its hosts), in the order of the answer, and the last error when
// there never was a good answer or the last resolution failed.
type DNSAnswer struct {
	Addrs []netip.Addr
	Err   string
}

// QueryOf returns the query of a host name of a backend with defaulted dns settings.
func QueryOf(name string, d *v1alpha1.BackendDNS) DNSQuery {
	return DNSQuery{Name: strings.TrimSuffix(strings.ToLower(name), "."), Family: d.LookupFamily}
}

// ResolvedByLbplane tells whether lbplane resolves the host names of a defaulted backend.
func ResolvedByLbplane(b *v1alpha1.Backend) bool {
	return b.UsesDNS() && b.DNS != nil && b.DNS.Resolver != v1alpha1.DNSResolverEnvoy
}

// DNSQueries lists the names lbplane resolves for a defaulted policy, with the refresh settings of the
// backends that ask for them.
func DNSQueries(p *v1alpha1.LoadBalancerPolicy) []DNSUse {
	var out []DNSUse
	for i := range p.Spec.Backends {
		b := &p.Spec.Backends[i]
		if !ResolvedByLbplane(b) {
			continue
		}
		for _, e := range b.Endpoints {
			if net.ParseIP(e.Address) != nil {
				continue
			}
			out = append(out, DNSUse{Query: QueryOf(e.Address, b.DNS), Refresh: b.DNS.RefreshInterval.Duration, RespectTTL: b.DNS.RespectTTL})
		}
	}
	return out
}

// dnsCluster makes the cluster of a backend with host-name endpoints one that Envoy resolves (the
// operator's opt-in, dns.resolver: Envoy), or gives it the addresses lbplane resolved, each checked against
// the server's rules. It returns what is missing (names not resolved) and what was left out (forbidden
// answers), each message naming the endpoint's field.
func dnsCluster(cl *ir.Cluster, p *v1alpha1.LoadBalancerPolicy, b *v1alpha1.Backend, refs Refs) (missing, forbidden []string) {
	d := b.DNS
	if d == nil || !b.UsesDNS() {
		return nil, nil
	}
	if !ResolvedByLbplane(b) {
		cl.DNS = &ir.DNS{Logical: d.Resolution == v1alpha1.DNSLogical, RefreshInterval: d.RefreshInterval.Duration,
			RespectTTL: d.RespectTTL, LookupFamily: string(d.LookupFamily)}
		return nil, nil
	}
	type hostPort struct {
		addr netip.Addr
		port uint32
	}
	bi := slices.IndexFunc(p.Spec.Backends, func(o v1alpha1.Backend) bool { return o.Name == b.Name })
	seen := map[hostPort]bool{}
	var out []ir.Endpoint
	for j, spec := range cl.Endpoints {
		path := fmt.Sprintf("spec.backends[%d].endpoints[%d].address", bi, j)
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(spec.Address); err == nil {
			// A literal resolves to itself; it was checked with the policy.
			addrs = []netip.Addr{a.Unmap()}
		} else {
			ans, ok := refs.DNS[QueryOf(spec.Address, d)]
			switch {
			case !ok:
				missing = append(missing, fmt.Sprintf("%s: %q is not resolved yet", path, spec.Address))
			case len(ans.Addrs) == 0:
				missing = append(missing, fmt.Sprintf("%s: %q does not resolve: %s", path, spec.Address, ans.Err))
			}
			addrs = ans.Addrs
		}
		var refused []string
		var why string
		for _, a := range addrs {
			if msg := refs.Reach.CheckEndpoint(a, spec.Port); msg != "" {
				refused = append(refused, a.String())
				why = cmp.Or(why, msg)
				continue
			}
			if seen[hostPort{a, spec.Port}] {
				continue
			}
			seen[hostPort{a, spec.Port}] = true
			ep := spec
			ep.Address = a.String()
			if ep.Hostname == "" && ep.Address != spec.Address {
				// The name is the endpoint's host name: TLS sends it (autoSNI) and checks the certificate
				// against it, as with Envoy's own DNS cluster.
				ep.Hostname = spec.Address
			}
			out = append(out, ep)
			if d.Resolution == v1alpha1.DNSLogical {
				// One endpoint, the first address of the latest answer that may be used (LOGICAL_DNS).
				break
			}
		}
		if len(refused) > 0 {
			forbidden = append(forbidden, fmt.Sprintf("%s: %q resolves to %s, left out: %s", path, spec.Address, strings.Join(refused, ", "), why))
		}
	}
	cl.Endpoints, cl.Resolved = out, true
	return missing, forbidden
}

// DNSUse is a name one backend has lbplane resolve, and how often.
type DNSUse struct {
	Query      DNSQuery
	Refresh    time.Duration
	RespectTTL bool
}

// dnsRefs lists the queries of a defaulted policy, sorted and without duplicates, for the fragment's
// references.
func dnsRefs(p *v1alpha1.LoadBalancerPolicy) []DNSQuery {
	var out []DNSQuery
	for _, u := range DNSQueries(p) {
		out = append(out, u.Query)
	}
	slices.SortFunc(out, func(a, b DNSQuery) int {
		return strings.Compare(a.Name+"\x00"+string(a.Family), b.Name+"\x00"+string(b.Family))
	})
	return slices.Compact(out)
}
