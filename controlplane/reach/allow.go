package reach

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// PortRange re-admits a forbidden range on some ports only (lbplane serve --allow-backend-cidrs
// 127.0.0.1:18081-18083): the demo's backends on the Envoy's host, and nothing else there.
type PortRange struct {
	Prefix   netip.Prefix
	From, To uint16
}

func (p PortRange) String() string {
	host := p.Prefix.String()
	if p.Prefix.IsSingleIP() {
		host = p.Prefix.Addr().String()
	}
	if p.Prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	if p.From == p.To {
		return fmt.Sprintf("%s:%d", host, p.From)
	}
	return fmt.Sprintf("%s:%d-%d", host, p.From, p.To)
}

// ParseAllow parses --allow-backend-cidrs: CIDRs or addresses, re-admitted on every port ("127.0.0.0/8",
// "::1"), or with a port or port range, re-admitted on those ports only ("127.0.0.1:18081-18083",
// "[::1]:8080", "127.0.0.0/8:80"). Each port entry's prefix is in the first list too, so that the address
// itself is admitted; CheckPort then holds it to its ports. A prefix given on every port as well keeps no
// port entry.
func ParseAllow(flag string, in []string) ([]netip.Prefix, []PortRange, error) {
	var plain []netip.Prefix
	var ported []PortRange
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		host, ports, hasPorts := splitPorts(s)
		if !hasPorts {
			host = s
		}
		p, err := ParseCIDRs(flag, []string{host})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: want a CIDR or an address, with :PORT or :FROM-TO to re-admit those ports only (127.0.0.0/8, 127.0.0.1:18081-18083, [::1]:8080), got %q", flag, s)
		}
		if !hasPorts {
			plain = append(plain, p[0])
			continue
		}
		from, to, err := ParsePortRange(ports)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %q: %v", flag, s, err)
		}
		ported = append(ported, PortRange{Prefix: p[0], From: from, To: to})
	}
	all := plain
	var out []PortRange
	for _, pr := range ported {
		if containsPrefix(plain, pr.Prefix) {
			continue // re-admitted on every port anyway
		}
		out = append(out, pr)
		all = append(all, pr.Prefix)
	}
	return dedupePrefixes(all), out, nil
}

// splitPorts splits "host:ports" or "[host]:ports"; false when s names no port (a bare IPv6 address has
// colons of its own, and needs brackets to carry one).
func splitPorts(s string) (host, ports string, ok bool) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 || !strings.HasPrefix(s[end+1:], ":") {
			return "", "", false
		}
		return s[1:end], s[end+2:], true
	}
	if strings.Count(s, ":") != 1 {
		return "", "", false
	}
	host, ports, _ = strings.Cut(s, ":")
	return host, ports, true
}

// ParsePortRange reads a port or a range FROM-TO (1-65535, FROM <= TO).
func ParsePortRange(s string) (uint16, uint16, error) {
	a, b, isRange := strings.Cut(s, "-")
	from, err := strconv.ParseUint(a, 10, 16)
	if err != nil || from == 0 {
		return 0, 0, fmt.Errorf("want a port (1-65535) or a range FROM-TO, got %q", s)
	}
	to := from
	if isRange {
		if to, err = strconv.ParseUint(b, 10, 16); err != nil || to < from {
			return 0, 0, fmt.Errorf("want a port (1-65535) or a range FROM-TO with FROM <= TO, got %q", s)
		}
	}
	return uint16(from), uint16(to), nil
}

func containsPrefix(ps []netip.Prefix, p netip.Prefix) bool {
	for _, q := range ps {
		if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

func dedupePrefixes(ps []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		dup := false
		for _, q := range out {
			dup = dup || q == p
		}
		if !dup {
			out = append(out, p)
		}
	}
	return out
}

// CheckPort says why Envoy must not connect to addr on port, or "" when it may: an address of a forbidden
// range that the operator re-admitted on some ports only (AllowPorts), and not on every port (Allow, less
// the prefixes of AllowPorts), is refused on any other port.
func (r Rules) CheckPort(addr netip.Addr, port int32) string {
	addr = addr.Unmap()
	forbidden := false
	for _, f := range Forbidden {
		forbidden = forbidden || f.Prefix.Contains(addr)
	}
	if !forbidden || len(r.AllowPorts) == 0 {
		return ""
	}
	var ranges []string
	for _, a := range r.Allow {
		if !a.Contains(addr) {
			continue
		}
		onSome := false
		for _, pr := range r.AllowPorts {
			onSome = onSome || pr.Prefix == a
		}
		if !onSome {
			return "" // re-admitted on every port
		}
	}
	for _, pr := range r.AllowPorts {
		if !pr.Prefix.Contains(addr) {
			continue
		}
		if port >= int32(pr.From) && port <= int32(pr.To) {
			return ""
		}
		ranges = append(ranges, pr.String())
	}
	if len(ranges) == 0 {
		return ""
	}
	return fmt.Sprintf("%s port %d is not re-admitted: lbplane serve --allow-backend-cidrs re-admits %s on %s only", addr, port, addr, strings.Join(ranges, ", "))
}
