package lbctl

import (
	"net/netip"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/controlplane/reach"
)

// reachFlags are lbplane serve's backend address flags, so that lbctl validate and lint refuse what the
// server would refuse given the same settings.
type reachFlags struct {
	allow, namespaces, cidrs []string
	kubernetes, envoyDNS     bool
}

func addReachFlags(cmd *cobra.Command) *reachFlags {
	r := &reachFlags{}
	f := cmd.Flags()
	f.StringSliceVar(&r.allow, "allow-backend-cidrs", nil, "as lbplane serve --allow-backend-cidrs: re-admit backend addresses in these loopback, link-local or unspecified ranges (e.g. 127.0.0.0/8), or on some ports only (127.0.0.1:18081-18083)")
	f.BoolVar(&r.envoyDNS, "allow-envoy-dns", false, "as lbplane serve --allow-envoy-dns: allow backends whose host names each Envoy resolves (dns.resolver: Envoy)")
	f.BoolVar(&r.kubernetes, "kubernetes-rules", false, "apply Kubernetes mode's rules: backends are Services unless --address-backends-namespaces or --address-backends-cidrs allow addresses")
	f.StringSliceVar(&r.namespaces, "address-backends-namespaces", nil, "with --kubernetes-rules: as lbplane serve --address-backends-namespaces")
	f.StringSliceVar(&r.cidrs, "address-backends-cidrs", nil, "with --kubernetes-rules: as lbplane serve --address-backends-cidrs")
	return r
}

func (r *reachFlags) rules() (reach.Rules, error) {
	var out reach.Rules
	var err error
	if out.Allow, out.AllowPorts, err = reach.ParseAllow("--allow-backend-cidrs", r.allow); err != nil {
		return out, err
	}
	out.Kubernetes, out.AddressNamespaces, out.EnvoyDNS = r.kubernetes, r.namespaces, r.envoyDNS
	out.AddressCIDRs, err = reach.ParseCIDRs("--address-backends-cidrs", r.cidrs)
	return out, err
}

// previewRules are those of the offline previews (lbctl translate, diff --from, explain -f): they show
// what Envoy would be sent and leave the server's address rules to lbctl validate and lint.
var previewRules = reach.Rules{Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}, EnvoyDNS: true}
