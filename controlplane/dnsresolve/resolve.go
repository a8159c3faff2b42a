// Package dnsresolve resolves backends' host names for lbplane, which then checks every address it gets
// and sends the Envoys only those (see controlplane/engine's DNS refresh and docs/security.md). It answers
// as the host's resolver would, so that a name means here what it means to a program on the host: the
// conventional names of this host (localhost), the hosts file, the machine's own host name, then DNS with
// the servers and search list of resolv.conf (or the servers it is given), following CNAMEs, with the
// answer's TTL.
package dnsresolve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/reach"
)

// Answer is what a name resolved to: its addresses in the order of the answer, and how long the answer
// may be kept (0 when it came from the hosts file or names this host).
type Answer struct {
	Addrs []netip.Addr
	TTL   time.Duration
}

// Resolver resolves host names. The zero value reads /etc/hosts and /etc/resolv.conf.
type Resolver struct {
	// Servers are the DNS servers (host:port) asked, in order; empty means resolv.conf's.
	Servers []string
	// HostsFile is read before DNS (/etc/hosts when empty).
	HostsFile string
	// ResolvConf gives the servers and the search list (/etc/resolv.conf when empty).
	ResolvConf string
	// Hostname is the machine's own name (os.Hostname when empty), which resolves to the host's own
	// addresses when the hosts file does not name it, as glibc's myhostname does.
	Hostname string
	// HostAddrs lists the host's own addresses (its interfaces' when nil).
	HostAddrs func() []netip.Addr
	// Timeout bounds one query to one server (2s when 0).
	Timeout time.Duration

	mu    sync.Mutex
	hosts hostsFile
}

type hostsFile struct {
	mtime time.Time
	size  int64
	names map[string][]netip.Addr
}

// Resolve returns the addresses name has for the lookup family (the policy's dns.lookupFamily), or an
// error saying why there are none.
func (r *Resolver) Resolve(ctx context.Context, name string, family v1alpha1.DNSLookupFamily) (Answer, error) {
	n := strings.TrimSuffix(strings.ToLower(name), ".")
	if reach.IsLocalName(n) {
		return pick(family, []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, 0)
	}
	if addrs := r.fromHosts(n); len(addrs) > 0 {
		return pick(family, addrs, 0)
	}
	if r.isHostname(n) {
		addrs := r.hostAddrs()
		if len(addrs) == 0 {
			addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}
		}
		return pick(family, addrs, 0)
	}
	return r.fromDNS(ctx, n, family)
}

// pick applies the lookup family to addresses known without DNS.
func pick(family v1alpha1.DNSLookupFamily, addrs []netip.Addr, ttl time.Duration) (Answer, error) {
	var v4, v6 []netip.Addr
	for _, a := range addrs {
		if a = a.Unmap(); a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	var out []netip.Addr
	switch family {
	case v1alpha1.DNSV4:
		out = v4
	case v1alpha1.DNSV6:
		out = v6
	case v1alpha1.DNSAuto:
		out = v6
		if len(out) == 0 {
			out = v4
		}
	case v1alpha1.DNSAll:
		out = append(v4, v6...)
	default: // V4Preferred
		out = v4
		if len(out) == 0 {
			out = v6
		}
	}
	if len(out) == 0 {
		return Answer{}, fmt.Errorf("no address of lookup family %s", family)
	}
	return Answer{Addrs: out, TTL: ttl}, nil
}

func (r *Resolver) isHostname(n string) bool {
	h := r.Hostname
	if h == "" {
		h, _ = os.Hostname()
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" {
		return false
	}
	short, _, _ := strings.Cut(h, ".")
	return n == h || n == short
}

func (r *Resolver) hostAddrs() []netip.Addr {
	if r.HostAddrs != nil {
		return r.HostAddrs()
	}
	return HostAddrs()
}

// HostAddrs lists the addresses of this host's interfaces, loopback left out.
func HostAddrs() []netip.Addr {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, ia := range ifaddrs {
		p, err := netip.ParsePrefix(ia.String())
		if err != nil || p.Addr().IsLoopback() {
			continue
		}
		out = append(out, p.Addr().Unmap())
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
}

// fromHosts returns the addresses the hosts file gives n, reading it again when it changed.
func (r *Resolver) fromHosts(n string) []netip.Addr {
	path := r.HostsFile
	if path == "" {
		path = "/etc/hosts"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fi, err := os.Stat(path)
	if err != nil {
		r.hosts = hostsFile{}
		return nil
	}
	if !fi.ModTime().Equal(r.hosts.mtime) || fi.Size() != r.hosts.size || r.hosts.names == nil {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		r.hosts = hostsFile{mtime: fi.ModTime(), size: fi.Size(), names: parseHosts(data)}
	}
	return r.hosts.names[n]
}

// parseHosts reads a hosts(5) file: an address, then its names, # to the end of the line a comment.
func parseHosts(data []byte) map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		// A zone (fe80::1%eth0) is not an address a backend can name.
		a, err := netip.ParseAddr(f[0])
		if err != nil || a.Zone() != "" {
			continue
		}
		for _, name := range f[1:] {
			name = strings.TrimSuffix(strings.ToLower(name), ".")
			if !slices.Contains(out[name], a.Unmap()) {
				out[name] = append(out[name], a.Unmap())
			}
		}
	}
	return out
}

// errNoSuchHost is DNS's NXDOMAIN for every name of the search list.
var errNoSuchHost = errors.New("no such host")

func (r *Resolver) fromDNS(ctx context.Context, n string, family v1alpha1.DNSLookupFamily) (Answer, error) {
	cfg := r.config()
	if len(cfg.Servers) == 0 {
		return Answer{}, errors.New("no DNS server configured (lbplane serve --dns-resolver, or nameserver in resolv.conf)")
	}
	var last error = errNoSuchHost
	for _, fqdn := range cfg.NameList(n) {
		a, err := r.queryFamily(ctx, cfg.Servers, fqdn, family)
		if err == nil {
			return a, nil
		}
		if !errors.Is(err, errNoSuchHost) || !errors.Is(last, errNoRecords) {
			// A name that exists without records of the family says more than a search suffix that does not.
			last = err
		}
		if !errors.Is(err, errNoSuchHost) && !errors.Is(err, errNoRecords) {
			// A server that fails (timeout, SERVFAIL) is not a name that does not exist: stop, so that a
			// broken server never makes a later search suffix answer instead.
			break
		}
	}
	return Answer{}, last
}

var errNoRecords = errors.New("no address records")

// queryFamily asks for the records of the lookup family, in its order of preference.
func (r *Resolver) queryFamily(ctx context.Context, servers []string, fqdn string, family v1alpha1.DNSLookupFamily) (Answer, error) {
	var order []uint16
	all := false
	switch family {
	case v1alpha1.DNSV4:
		order = []uint16{dns.TypeA}
	case v1alpha1.DNSV6:
		order = []uint16{dns.TypeAAAA}
	case v1alpha1.DNSAuto:
		order = []uint16{dns.TypeAAAA, dns.TypeA}
	case v1alpha1.DNSAll:
		order, all = []uint16{dns.TypeA, dns.TypeAAAA}, true
	default:
		order = []uint16{dns.TypeA, dns.TypeAAAA}
	}
	var out Answer
	var firstErr error
	for _, qt := range order {
		a, err := r.query(ctx, servers, fqdn, qt)
		if err != nil {
			if firstErr == nil || errors.Is(firstErr, errNoRecords) {
				firstErr = err
			}
			if errors.Is(err, errNoSuchHost) {
				return Answer{}, err
			}
			continue
		}
		out.Addrs = append(out.Addrs, a.Addrs...)
		if out.TTL == 0 || a.TTL < out.TTL {
			out.TTL = a.TTL
		}
		if !all {
			return out, nil
		}
	}
	if len(out.Addrs) > 0 {
		return out, nil
	}
	return Answer{}, firstErr
}

// query asks each server in turn for one record type of fqdn, over UDP and again over TCP when the answer
// was truncated.
func (r *Resolver) query(ctx context.Context, servers []string, fqdn string, qt uint16) (Answer, error) {
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	m := new(dns.Msg)
	m.SetQuestion(fqdn, qt)
	m.RecursionDesired = true
	var last error
	for _, s := range servers {
		c := &dns.Client{Timeout: timeout}
		in, _, err := c.ExchangeContext(ctx, m, s)
		if err == nil && in.Truncated {
			c.Net = "tcp"
			in, _, err = c.ExchangeContext(ctx, m, s)
		}
		if err != nil {
			last = fmt.Errorf("asking %s: %w", s, err)
			continue
		}
		switch in.Rcode {
		case dns.RcodeSuccess:
		case dns.RcodeNameError:
			return Answer{}, errNoSuchHost
		default:
			last = fmt.Errorf("%s answered %s", s, dns.RcodeToString[in.Rcode])
			continue
		}
		var out Answer
		ttl := uint32(0)
		first := true
		for _, rr := range in.Answer {
			h := rr.Header()
			var a netip.Addr
			switch v := rr.(type) {
			case *dns.A:
				a, _ = netip.AddrFromSlice(v.A.To4())
			case *dns.AAAA:
				a, _ = netip.AddrFromSlice(v.AAAA)
			case *dns.CNAME:
			default:
				continue
			}
			if first || h.Ttl < ttl {
				ttl, first = h.Ttl, false
			}
			if a.IsValid() && h.Rrtype == qt {
				out.Addrs = append(out.Addrs, a.Unmap())
			}
		}
		if len(out.Addrs) == 0 {
			return Answer{}, errNoRecords
		}
		out.TTL = time.Duration(ttl) * time.Second
		return out, nil
	}
	return Answer{}, last
}

// config returns the servers and search list: Servers with resolv.conf's search list, or resolv.conf.
func (r *Resolver) config() *dns.ClientConfig {
	path := r.ResolvConf
	if path == "" {
		path = "/etc/resolv.conf"
	}
	cfg, err := dns.ClientConfigFromFile(path)
	if err != nil {
		cfg = &dns.ClientConfig{Ndots: 1, Port: "53"}
	}
	if len(r.Servers) > 0 {
		cfg.Servers = slices.Clone(r.Servers)
		return cfg
	}
	for i, s := range cfg.Servers {
		cfg.Servers[i] = net.JoinHostPort(s, cfg.Port)
	}
	return cfg
}
