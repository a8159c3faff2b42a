package serve

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/lbplane/lbplane/controlplane/dnsresolve"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// resolver is how lbplane resolves backends' host names (see engine/dns.go): its hosts file and host
// name, then --dns-resolver or the host's resolv.conf.
func resolver(cfg *Config) engine.Resolver {
	r := &dnsresolve.Resolver{Servers: cfg.DNSResolvers}
	return func(ctx context.Context, q translate.DNSQuery) ([]netip.Addr, time.Duration, error) {
		a, err := r.Resolve(ctx, q.Name, q.Family)
		return a.Addrs, a.TTL, err
	}
}

// ownPorts are the ports lbplane serves on its host: no backend on a host address may name them.
func ownPorts(p Ports) []reach.OwnPort {
	var out []reach.OwnPort
	for _, a := range []struct{ addr, what string }{{p.XDS, "lbplane's xDS port"}, {p.API, "lbplane's push API and dashboard port"}, {p.Metrics, "lbplane's metrics port"}} {
		if _, port, err := net.SplitHostPort(a.addr); err == nil {
			if n, err := strconv.ParseUint(port, 10, 16); err == nil && n > 0 {
				out = append(out, reach.OwnPort{Port: uint16(n), What: a.what})
			}
		}
	}
	return out
}

// portsBeforeSources gives the engine lbplane's ports as configured, before they are bound and before the
// sources load (a port given as 0 is not known yet): the first translation is then the one served, and
// binding them changes nothing. Given only once bound, they made lbplane translate every policy twice at
// every start (36 s, and twice the heap, at 100,000 policies).
func portsBeforeSources(eng *engine.Engine, cfg *Config, metrics string) {
	eng.SetHost(hostView(nil, ownPorts(Ports{XDS: cfg.XDSAddress, API: cfg.APIAddress, Metrics: metrics})))
}

// hostView is what lbplane knows of the Envoys' hosts and its own: the addresses the Envoys connect from,
// this host's addresses, and the stats ports the Envoys declare.
func hostView(proxies []xdsserver.Host, own []reach.OwnPort) ([]netip.Addr, []reach.OwnPort) {
	var self []netip.Addr
	ports := slices.Clone(own)
	for _, p := range proxies {
		if a, err := netip.ParseAddr(p.Address); err == nil {
			if a = a.Unmap(); !a.IsLoopback() {
				self = append(self, a)
			}
		}
		if p.StatsPort > 0 && p.StatsPort < 1<<16 && !slices.ContainsFunc(ports, func(o reach.OwnPort) bool { return int(o.Port) == p.StatsPort }) {
			ports = append(ports, reach.OwnPort{Port: uint16(p.StatsPort), What: "an Envoy's stats port"})
		}
	}
	// This host's addresses: lbplane's own ports listen there, and an Envoy that connects over loopback
	// (or the first one, likeliest here too) has them.
	self = append(self, dnsresolve.HostAddrs()...)
	slices.SortFunc(self, func(a, b netip.Addr) int { return a.Compare(b) })
	slices.SortStableFunc(ports[len(own):], func(a, b reach.OwnPort) int { return int(a.Port) - int(b.Port) })
	return slices.Compact(self), ports
}

// hostProxies are the hosts of the Envoys whose addresses no backend may use: this replica's own from its
// tracker at once, and the other replicas' (otherReplicasView).
func hostProxies(x *xds, others func() []xdsserver.ProxyStatus) func() []xdsserver.Host {
	return func() []xdsserver.Host {
		hosts := x.tracker.Hosts()
		for _, p := range others() {
			hosts = append(hosts, xdsserver.Host{Address: p.Address, StatsPort: p.StatsPort})
		}
		return hosts
	}
}

// followHost keeps the engine's view of the Envoys' hosts current: every second, the addresses and stats
// ports of the Envoys (hostProxies), and this host's addresses, which change as interfaces come and go. A
// change translates every policy again, which happens only when an Envoy connects from a new address,
// declares a new stats port, or the host's addresses change.
func followHost(ctx context.Context, eng *engine.Engine, proxies func() []xdsserver.Host, own []reach.OwnPort) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			eng.SetHost(hostView(proxies(), own))
		}
	}
}
