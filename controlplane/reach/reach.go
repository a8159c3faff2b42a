// Package reach decides which backend addresses a policy may make Envoy connect to. The author of a policy
// is not trusted with the Envoy's host: without these rules a backend 127.0.0.1:<port> (or a name that
// resolves there, or a mirror to such a backend) turns the public listener into a way into Envoy's own
// admin, lbplane's loopback ports, or a cloud metadata address.
//
// The rules are the server's settings (lbplane serve --allow-backend-cidrs, and in Kubernetes mode
// --address-backends-namespaces and --address-backends-cidrs); translation applies them to every policy
// (translate.Prepare), and lbctl lint applies the same ones given the same flags.
package reach

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// Forbidden are the ranges no backend address may fall in unless the operator re-admits them (Allow):
// the Envoy host itself (loopback, and the unspecified address, which Linux connects to the host), and
// link-local addresses (cloud metadata services, 169.254.169.254 and fd00:ec2::254 aside, live there).
var Forbidden = []Range{
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback"},
	{netip.MustParsePrefix("::1/128"), "a loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local"},
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified (this host)"},
	{netip.MustParsePrefix("::/128"), "an unspecified (this host)"},
}

// Loopback re-admits the loopback ranges (lbplane serve --allow-backend-cidrs 127.0.0.0/8,::1/128): the
// examples' backends, like the demo's, run on the Envoy's own host.
var Loopback = Rules{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}

// Range is a forbidden range and what it is.
type Range struct {
	Prefix netip.Prefix
	What   string
}

// Rules are the server's settings on backend addresses. The zero value is the default: every forbidden
// range refused, and raw addresses allowed (standalone mode).
type Rules struct {
	// Allow re-admits addresses of the forbidden ranges (lbplane serve --allow-backend-cidrs), e.g.
	// 127.0.0.0/8 for backends on the Envoy's own host.
	Allow []netip.Prefix
	// AllowPorts holds those of Allow that are re-admitted on some ports only (127.0.0.1:18081-18083;
	// ParseAllow, CheckPort).
	AllowPorts []PortRange
	// Kubernetes: policies are written by the users of namespaces, so a backend is a Service by default;
	// endpoint addresses and DNS names are allowed only in AddressNamespaces, or (IP addresses) inside
	// AddressCIDRs.
	Kubernetes bool
	// AddressNamespaces may use endpoint addresses and host names ("*": every namespace).
	AddressNamespaces []string
	// AddressCIDRs are the IP addresses any namespace's endpoints may use.
	AddressCIDRs []netip.Prefix
}

// ParseCIDRs parses a flag's CIDRs ("127.0.0.0/8", "::1/128"); a bare address is its own /32 or /128.
func ParseCIDRs(flag string, in []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%s: want a CIDR such as 127.0.0.0/8 or ::1/128, got %q", flag, s)
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				return nil, fmt.Errorf("%s: %q: an IPv4-mapped prefix must be at least /96", flag, s)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Summary describes the rules for the log at start and lbctl status.
func (r Rules) Summary() string {
	var parts []string
	if len(r.Allow) > 0 {
		parts = append(parts, "forbidden ranges re-admitted: "+r.readmitted())
	} else {
		parts = append(parts, "loopback, link-local and unspecified backend addresses refused")
	}
	if r.Kubernetes {
		switch {
		case slices.Contains(r.AddressNamespaces, "*"):
			parts = append(parts, "endpoint addresses and host names allowed in every namespace")
		case len(r.AddressNamespaces) > 0:
			parts = append(parts, "endpoint addresses and host names allowed in namespaces "+strings.Join(r.AddressNamespaces, ","))
		default:
			parts = append(parts, "Service backends only")
		}
		if len(r.AddressCIDRs) > 0 {
			parts = append(parts, "endpoint addresses allowed in every namespace within "+prefixes(r.AddressCIDRs))
		}
	}
	return strings.Join(parts, "; ")
}

func prefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Key is a stable text of the rules, for cache keys.
func (r Rules) Key() string {
	return fmt.Sprintf("%s|%t|%s|%s", r.readmitted(), r.Kubernetes, strings.Join(r.AddressNamespaces, ","), prefixes(r.AddressCIDRs))
}

// readmitted lists Allow, each prefix re-admitted on some ports only with its ports.
func (r Rules) readmitted() string {
	var s []string
	for _, p := range r.Allow {
		ported := false
		for _, pr := range r.AllowPorts {
			if pr.Prefix == p {
				s, ported = append(s, pr.String()), true
			}
		}
		if !ported {
			s = append(s, p.String())
		}
	}
	return strings.Join(s, ",")
}

// CheckAddr says why Envoy must not connect to addr, or "" when it may.
func (r Rules) CheckAddr(addr netip.Addr) string {
	addr = addr.Unmap()
	for _, f := range Forbidden {
		if !f.Prefix.Contains(addr) {
			continue
		}
		for _, a := range r.Allow {
			if a.Contains(addr) {
				return ""
			}
		}
		return fmt.Sprintf("%s is %s address, which a backend may not use (lbplane serve --allow-backend-cidrs re-admits a range)", addr, f.What)
	}
	return ""
}

// localNames resolve to the host itself by convention (RFC 6761) or by the /etc/hosts of common systems.
var localNames = []string{"localhost", "localhost.localdomain", "localhost4", "localhost4.localdomain4",
	"localhost6", "localhost6.localdomain6", "ip6-localhost", "ip6-loopback"}

// CheckName says why Envoy must not resolve and connect to the host name name, or "" when it may. Only
// what the name says is checked here; what it resolves to is up to the Envoy's resolver (see
// docs/security.md).
func (r Rules) CheckName(name string) string {
	n := strings.TrimSuffix(strings.ToLower(name), ".")
	if slices.Contains(localNames, n) || strings.HasSuffix(n, ".localhost") {
		lo := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}
		for _, a := range lo {
			if r.CheckAddr(a) != "" {
				return fmt.Sprintf("%q names this host (loopback), which a backend may not use (lbplane serve --allow-backend-cidrs 127.0.0.0/8,::1/128 re-admits it)", name)
			}
		}
		return ""
	}
	// A resolver may read a name made of numbers as an address in inet_aton's forms (127.1, 0x7f.1,
	// 2130706433): refused, as no DNS name ends in a numeric label.
	labels := strings.Split(n, ".")
	last := labels[len(labels)-1]
	if (last != "" && strings.Trim(last, "0123456789") == "") || strings.HasPrefix(last, "0x") {
		return fmt.Sprintf("%q looks like a numeric address, not a host name: write the address itself", name)
	}
	return ""
}

// Check returns every endpoint of the policy's backends that the rules refuse, each with its field path.
// Mirrors and routes name backends, so refusing the backend covers them. The policy is defaulted.
func (r Rules) Check(p *v1alpha1.LoadBalancerPolicy) v1alpha1.FieldErrors {
	var errs v1alpha1.FieldErrors
	rawOK := !r.Kubernetes || slices.Contains(r.AddressNamespaces, "*") || slices.Contains(r.AddressNamespaces, p.Namespace)
	for i, b := range p.Spec.Backends {
		for j, e := range b.Endpoints {
			path := fmt.Sprintf("spec.backends[%d].endpoints[%d].address", i, j)
			ip := net.ParseIP(e.Address)
			var msg string
			switch {
			case ip != nil:
				a, _ := netip.AddrFromSlice(ip)
				a = a.Unmap()
				msg = r.CheckAddr(a)
				if msg == "" {
					msg = r.CheckPort(a, e.Port)
				}
				if msg == "" && !rawOK && !containsAddr(r.AddressCIDRs, a) {
					msg = r.kubeRefusal(p.Namespace, "endpoint addresses")
				}
			default:
				msg = r.CheckName(e.Address)
				if n := strings.TrimSuffix(strings.ToLower(e.Address), "."); msg == "" && (slices.Contains(localNames, n) || strings.HasSuffix(n, ".localhost")) {
					msg = r.CheckPort(netip.MustParseAddr("127.0.0.1"), e.Port)
				}
				if msg == "" && !rawOK {
					msg = r.kubeRefusal(p.Namespace, "host names")
				}
			}
			if msg != "" {
				errs = append(errs, v1alpha1.FieldError{Path: path, Msg: msg + mirroredBy(p, b.Name)})
			}
		}
	}
	return errs
}

func (r Rules) kubeRefusal(ns, what string) string {
	return fmt.Sprintf("%s are not allowed in namespace %q: use a Service backend (an operator allows them with the chart's backendAddresses values, lbplane serve --address-backends-namespaces or --address-backends-cidrs)", what, ns)
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// mirroredBy names the routes that mirror to backend, so that a refused mirror target says so.
func mirroredBy(p *v1alpha1.LoadBalancerPolicy, backend string) string {
	var refs []string
	for i, rt := range p.Spec.Routes {
		for j, m := range rt.Mirrors {
			if m.Backend == backend {
				refs = append(refs, fmt.Sprintf("spec.routes[%d].mirrors[%d]", i, j))
			}
		}
	}
	if len(refs) == 0 {
		return ""
	}
	return " (mirror target of " + strings.Join(refs, ", ") + ")"
}
