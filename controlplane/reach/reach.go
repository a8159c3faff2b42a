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
	// Self are the addresses of the Envoys' own hosts, as lbplane sees them (the addresses Envoys connect
	// from, and this host's when they connect over loopback): a backend there is the Envoy's host, as
	// loopback is, and loops a listener into itself. Refused unless Allow re-admits them.
	Self []netip.Addr
	// OwnPorts are the ports lbplane and the Envoys serve on their own hosts (xDS, push API, metrics,
	// Envoy's stats): no backend on a host address (loopback, unspecified, Self) may name them, even where
	// Allow re-admits the address.
	OwnPorts []OwnPort
	// EnvoyDNS lets backends have their host names resolved by each Envoy (dns.resolver: Envoy, lbplane
	// serve --allow-envoy-dns): nothing then checks what the names resolve to.
	EnvoyDNS bool
}

// OwnPort is a port of lbplane or of an Envoy on its own host, and what serves there.
type OwnPort struct {
	Port uint16
	What string
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
	if r.EnvoyDNS {
		parts = append(parts, "Envoys may resolve backends' host names themselves, unchecked (dns.resolver: Envoy)")
	}
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
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%t|%s|%s|", r.readmitted(), r.Kubernetes, strings.Join(r.AddressNamespaces, ","), prefixes(r.AddressCIDRs))
	for _, a := range r.Self {
		b.WriteString(a.String() + ",")
	}
	fmt.Fprintf(&b, "|%t|", r.EnvoyDNS)
	for _, p := range r.OwnPorts {
		fmt.Fprintf(&b, "%d=%s,", p.Port, p.What)
	}
	return b.String()
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

// Embedded returns the IPv4 address an IPv6 address carries by a standard translation or tunnelling
// scheme, which a host or a gateway on the way may connect to instead: IPv4-compatible (::a.b.c.d),
// IPv4-translated (::ffff:0:a.b.c.d), NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48 with a /96
// prefix), 6to4 (2002:AABB:CCDD::/48) and Teredo (the server at bits 32-63, the client inverted in the last
// 32 bits: both returned). IPv4-mapped addresses (::ffff:a.b.c.d) are unmapped before any check.
func Embedded(a netip.Addr) []netip.Addr {
	if !a.Is6() || a.Is4In6() {
		return nil
	}
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte(b[i : i+4])) }
	zero := func(from, to int) bool {
		for _, x := range b[from:to] {
			if x != 0 {
				return false
			}
		}
		return true
	}
	switch {
	case zero(0, 12) && !(zero(12, 15) && b[15] <= 1): // IPv4-compatible (::, ::1 are the unspecified and loopback addresses)
		return []netip.Addr{v4(12)}
	case zero(0, 8) && b[8] == 0xff && b[9] == 0xff && zero(10, 12): // IPv4-translated (SIIT)
		return []netip.Addr{v4(12)}
	case b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && (zero(4, 12) || (b[4] == 0 && b[5] == 1)): // NAT64
		return []netip.Addr{v4(12)}
	case b[0] == 0x20 && b[1] == 0x02: // 6to4
		return []netip.Addr{v4(2)}
	case b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0: // Teredo
		c := v4(12).As4()
		for i := range c {
			c[i] ^= 0xff
		}
		return []netip.Addr{v4(4), netip.AddrFrom4(c)}
	}
	return nil
}

// CheckAddr says why Envoy must not connect to addr, or "" when it may. An IPv6 address that carries an
// IPv4 address (Embedded) is judged by that address too.
func (r Rules) CheckAddr(addr netip.Addr) string {
	addr = addr.Unmap()
	if r.allowed(addr) {
		// Re-admitted by the operator as written.
		return ""
	}
	if msg := r.checkOne(addr); msg != "" {
		return msg
	}
	for _, e := range Embedded(addr) {
		if msg := r.checkOne(e); msg != "" {
			return fmt.Sprintf("%s carries %s", addr, msg)
		}
	}
	return ""
}

func (r Rules) checkOne(addr netip.Addr) string {
	if r.allowed(addr) {
		return ""
	}
	for _, f := range Forbidden {
		if f.Prefix.Contains(addr) {
			return fmt.Sprintf("%s is %s address, which a backend may not use (lbplane serve --allow-backend-cidrs re-admits a range)", addr, f.What)
		}
	}
	if slices.Contains(r.Self, addr) {
		return fmt.Sprintf("%s is an address of the Envoy's or lbplane's own host, which a backend may not use: it reaches the Envoy itself and its host's services, and can loop a listener into itself (lbplane serve --allow-backend-cidrs re-admits it)", addr)
	}
	return ""
}

func (r Rules) allowed(addr netip.Addr) bool {
	for _, a := range r.Allow {
		if a.Contains(addr) {
			return true
		}
	}
	return false
}

// onHost tells whether addr is one of the Envoy's or lbplane's host (loopback, unspecified, Self), in any
// form.
func (r Rules) onHost(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, a := range append([]netip.Addr{addr}, Embedded(addr)...) {
		if a.IsLoopback() || a.IsUnspecified() || a.Is4() && netip.MustParsePrefix("0.0.0.0/8").Contains(a) || slices.Contains(r.Self, a) {
			return true
		}
	}
	return false
}

// CheckEndpoint says why Envoy must not connect to addr:port, or "" when it may: CheckAddr, CheckPort for
// the address and the IPv4 address it carries, and on the host's own addresses none of OwnPorts, whatever
// Allow re-admits.
func (r Rules) CheckEndpoint(addr netip.Addr, port uint32) string {
	if msg := r.CheckAddr(addr); msg != "" {
		return msg
	}
	for _, a := range append([]netip.Addr{addr}, Embedded(addr.Unmap())...) {
		if msg := r.CheckPort(a, int32(port)); msg != "" {
			return msg
		}
	}
	if r.onHost(addr) {
		return r.ownPort(addr.Unmap().String(), port)
	}
	return ""
}

func (r Rules) ownPort(host string, port uint32) string {
	for _, p := range r.OwnPorts {
		if uint32(p.Port) == port {
			return fmt.Sprintf("%s port %d is %s, which no backend may name, even where the address is re-admitted", host, port, p.What)
		}
	}
	return ""
}

// localNames resolve to the host itself by convention (RFC 6761) or by the /etc/hosts of common systems.
var localNames = []string{"localhost", "localhost.localdomain", "localhost4", "localhost4.localdomain4",
	"localhost6", "localhost6.localdomain6", "ip6-localhost", "ip6-loopback"}

// IsLocalName tells whether a host name (lower case, without the final dot) names this host by
// convention: localhost and its forms.
func IsLocalName(n string) bool {
	return slices.Contains(localNames, n) || strings.HasSuffix(n, ".localhost")
}

// CheckName says why Envoy must not resolve and connect to the host name name, or "" when it may. Only
// what the name says is checked here; lbplane checks every address it resolves to with CheckEndpoint,
// at admission and at every refresh (see docs/security.md).
func (r Rules) CheckName(name string) string {
	n := strings.TrimSuffix(strings.ToLower(name), ".")
	if IsLocalName(n) {
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
		if b.DNS != nil && b.DNS.Resolver == v1alpha1.DNSResolverEnvoy && !r.EnvoyDNS {
			errs = append(errs, v1alpha1.FieldError{Path: fmt.Sprintf("spec.backends[%d].dns.resolver", i),
				Msg: "Envoy resolves the names without lbplane checking the answers, which this server does not allow (lbplane serve --allow-envoy-dns): leave it to lbplane"})
		}
		for j, e := range b.Endpoints {
			path := fmt.Sprintf("spec.backends[%d].endpoints[%d].address", i, j)
			ip := net.ParseIP(e.Address)
			var msg string
			switch {
			case ip != nil:
				a, _ := netip.AddrFromSlice(ip)
				a = a.Unmap()
				msg = r.CheckEndpoint(a, uint32(e.Port))
				if msg == "" && !rawOK && !containsAddr(r.AddressCIDRs, a) {
					msg = r.kubeRefusal(p.Namespace, "endpoint addresses")
				}
			default:
				msg = r.CheckName(e.Address)
				if n := strings.TrimSuffix(strings.ToLower(e.Address), "."); msg == "" && IsLocalName(n) {
					if msg = r.CheckPort(netip.MustParseAddr("127.0.0.1"), e.Port); msg == "" {
						msg = r.ownPort(e.Address, uint32(e.Port))
					}
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
