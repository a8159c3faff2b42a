// Package envoybootstrap renders the bootstrap an Envoy needs to get its config from lbplane.
package envoybootstrap

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
)

//go:embed bootstrap.yaml.tmpl
var source string

var tmpl = template.Must(template.New("bootstrap").Funcs(template.FuncMap{"quote": strconv.Quote}).Parse(source))

// Params of a bootstrap.
type Params struct {
	NodeID string
	// Group is the proxy group (node cluster). Defaults to "default".
	Group string
	// XDS is lbplane's xDS address, host:port, or several comma-separated (one per replica); a host may be a
	// DNS name with several answers.
	XDS string
	// Delta selects incremental xDS (DELTA_GRPC) instead of state of the world (GRPC).
	Delta bool
	// AdminSocket is the Unix socket (mode 0600: Envoy's own user only) Envoy's admin listens on, the
	// default: admin can stop, drain and reconfigure Envoy, and a socket path is nothing a proxied
	// connection can be pointed at. Required unless InsecureAdminTCP.
	AdminSocket string
	// AdminPort, only with InsecureAdminTCP, puts admin on 127.0.0.1:AdminPort instead: every local process,
	// and anything that can make a proxy on this host connect to loopback, can then use it.
	AdminPort        int
	InsecureAdminTCP bool
	// StatsPort, when not 0, opens a listener that serves only /stats/prometheus and /clusters from admin,
	// and tells lbplane (in node metadata) where to read endpoint health from. StatsAddress is where it
	// binds: loopback by default; 0.0.0.0 where lbplane or Prometheus run on another host.
	StatsPort    int
	StatsAddress string
	// MaxConnections is Envoy's global limit on downstream connections; 0 derives it from the open-file
	// limit (see DefaultMaxConnections).
	MaxConnections int
	// MaxHeapBytes is the heap budget of the overload manager's actions; 0 means DefaultMaxHeapBytes and a
	// negative value leaves the heap monitor out.
	MaxHeapBytes int64
	// ScaledIdleTimeout is how long, under connection or heap pressure, a connection that has sent nothing or a
	// request that has stalled is kept (overload manager scaled timers); 0 means DefaultScaledIdleTimeout.
	ScaledIdleTimeout time.Duration
	// ShareAdminPort, with InsecureAdminTCP, sets SO_REUSEPORT on the admin socket, so that a process that
	// reserved AdminPort (a supervisor or a benchmark, see internal/portreserve) can hand it to Envoy with no
	// gap in which another process could take it.
	ShareAdminPort bool
	// TLS, when set, makes Envoy connect to lbplane over mTLS with these files (paths on the Envoy's host).
	TLS *TLS
	// Zone, when set, is where this Envoy runs (node.locality.zone): backends with loadBalancing.zoneAware
	// keep its requests in this zone. See zone.go.
	Zone string
	// DNSResolvers, "ip" or "ip:port" (port 53 by default), are the DNS servers Envoy resolves backend host
	// names with (c-ares), instead of those of the host's /etc/resolv.conf.
	DNSResolvers []string
	// ClusterStats is which stats Envoy creates: ClusterStatsAll (the default, "" too) or ClusterStatsUsed,
	// only those lbplane, its dashboard and the chart read, for Envoys holding tens of thousands of clusters.
	ClusterStats string
}

// Values of Params.ClusterStats (lbctl bootstrap --cluster-stats).
const (
	ClusterStatsAll  = "all"
	ClusterStatsUsed = "used"
)

// TLS is the Envoy side of xDS over mTLS. Exactly one of three sources: Dir (SDS files written by
// WriteCredentials, watched, so renewals need no restart), Inline (PEM embedded in the bootstrap), or the
// Cert, Key and CA files (bring your own CA; Envoy reads them at start).
type TLS struct {
	Cert, Key, CA string
	Dir           string
	Inline        *Credentials
	// ServerName is verified against lbplane's certificate (a DNS name, or an IP address SAN); defaults to
	// the xDS host.
	ServerName string
}

// ServerIsIP tells the template to match an IP address SAN and send no SNI (an IP is not a server name).
func (t *TLS) ServerIsIP() bool { return net.ParseIP(t.ServerName) != nil }

// SANType is the kind of subject alternative name ServerName is matched against.
func (t *TLS) SANType() string {
	if t.ServerIsIP() {
		return "IP_ADDRESS"
	}
	return "DNS"
}

// ClientSDS and CASDS are the SDS files in Dir.
func (t *TLS) ClientSDS() string { return filepath.Join(t.Dir, ClientSDSFile) }
func (t *TLS) CASDS() string     { return filepath.Join(t.Dir, CASDSFile) }

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// maxSocketPath is the longest path a Unix socket address holds (sun_path is 108 bytes, NUL included).
const maxSocketPath = 107

// Render returns the bootstrap YAML.
func Render(p Params) ([]byte, error) {
	if p.Group == "" {
		p.Group = "default"
	}
	source := "set with --max-connections"
	if p.MaxConnections == 0 {
		p.MaxConnections, source = DefaultMaxConnections()
	}
	if p.MaxConnections < 1 {
		return nil, fmt.Errorf("--max-connections: must be at least 1, got %d", p.MaxConnections)
	}
	if p.MaxHeapBytes == 0 {
		p.MaxHeapBytes = DefaultMaxHeapBytes
	}
	if p.MaxHeapBytes > 0 && p.MaxHeapBytes < 64<<20 {
		return nil, fmt.Errorf("--max-heap: at least 64Mi (Envoy alone takes tens of MiB), got %d bytes", p.MaxHeapBytes)
	}
	if p.ScaledIdleTimeout == 0 {
		p.ScaledIdleTimeout = DefaultScaledIdleTimeout
	}
	if p.ScaledIdleTimeout < time.Second || p.ScaledIdleTimeout > 10*time.Second || p.ScaledIdleTimeout%time.Millisecond != 0 {
		return nil, fmt.Errorf("--scaled-idle-timeout: between 1s and 10s in whole milliseconds (a connection that has sent nothing is closed within 10 s under pressure), got %s", p.ScaledIdleTimeout)
	}
	if !nameRe.MatchString(p.NodeID) {
		return nil, fmt.Errorf("--node-id: must be letters, digits, '.', '_', ':' and '-', got %q", p.NodeID)
	}
	if !nameRe.MatchString(p.Group) {
		return nil, fmt.Errorf("--proxy-group: must be letters, digits, '.', '_', ':' and '-', got %q", p.Group)
	}
	xds, err := xdsEndpoints(p.XDS)
	if err != nil {
		return nil, err
	}
	host := xds[0].Host
	switch {
	case p.InsecureAdminTCP && (p.AdminPort < 1 || p.AdminPort > 65535):
		return nil, fmt.Errorf("--admin-port: must be between 1 and 65535 with --insecure-admin-tcp, got %d", p.AdminPort)
	case !p.InsecureAdminTCP && p.AdminPort != 0:
		return nil, fmt.Errorf("--admin-port: admin on TCP can be reached by every local process and through any proxied connection to loopback; " +
			"it listens on a Unix socket (--admin-socket) unless --insecure-admin-tcp is given too")
	case p.InsecureAdminTCP && p.AdminSocket != "":
		return nil, fmt.Errorf("--admin-socket and --insecure-admin-tcp: admin listens on one of them, not both")
	}
	if !p.InsecureAdminTCP {
		if p.AdminSocket == "" {
			// No default: a name in a shared directory (the temporary one) can be taken first by another user,
			// and Envoy then cannot start. lbctl puts it in the Envoy's own 0700 directory.
			return nil, errors.New("--admin-socket: required, a path in a directory only Envoy's user can write")
		}
		if !filepath.IsAbs(p.AdminSocket) || len(p.AdminSocket) > maxSocketPath || strings.ContainsAny(p.AdminSocket, "\x00\n\"") {
			return nil, fmt.Errorf("--admin-socket: must be an absolute path of at most %d bytes, got %q", maxSocketPath, p.AdminSocket)
		}
	}
	if p.StatsPort < 0 || p.StatsPort > 65535 {
		return nil, fmt.Errorf("--stats-port: must be between 0 and 65535, got %d", p.StatsPort)
	}
	if p.StatsPort != 0 && p.InsecureAdminTCP && p.StatsPort == p.AdminPort {
		return nil, fmt.Errorf("--stats-port: must differ from --admin-port (%d)", p.AdminPort)
	}
	if p.StatsAddress == "" {
		p.StatsAddress = "127.0.0.1"
	}
	if net.ParseIP(p.StatsAddress) == nil {
		return nil, fmt.Errorf("--stats-address: must be an IP address, got %q", p.StatsAddress)
	}
	if err := checkZone(p.Zone); err != nil {
		return nil, err
	}
	api := "GRPC"
	if p.Delta {
		api = "DELTA_GRPC"
	}
	if t := p.TLS; t != nil {
		files := t.Cert != "" || t.Key != "" || t.CA != ""
		switch {
		case files && (t.Cert == "" || t.Key == "" || t.CA == ""):
			return nil, fmt.Errorf("--xds-tls-cert, --xds-tls-key and --xds-tls-ca go together")
		case (files && (t.Dir != "" || t.Inline != nil)) || (t.Dir != "" && t.Inline != nil):
			return nil, fmt.Errorf("xDS TLS: give certificate files, a directory or embedded certificates, not several")
		case !files && t.Dir == "" && t.Inline == nil:
			return nil, fmt.Errorf("xDS TLS: no certificate given")
		case t.Dir != "" && !filepath.IsAbs(t.Dir):
			return nil, fmt.Errorf("--out-dir: must be an absolute path in the bootstrap, got %q", t.Dir)
		}
		if t.ServerName == "" {
			for _, e := range xds[1:] {
				if e.Host != host {
					return nil, fmt.Errorf("--xds-tls-server-name: the xDS addresses are on different hosts (%s, %s): name the one every lbplane replica's certificate carries (lbplane serve --xds-server-name)", host, e.Host)
				}
			}
			t.ServerName = host
		}
	}
	switch p.ClusterStats {
	case "":
		p.ClusterStats = ClusterStatsAll
	case ClusterStatsAll, ClusterStatsUsed:
	default:
		return nil, fmt.Errorf("--cluster-stats: want %s or %s, got %q", ClusterStatsAll, ClusterStatsUsed, p.ClusterStats)
	}
	resolvers, err := dnsResolvers(p.DNSResolvers)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	err = tmpl.Execute(&buf, map[string]any{"DNSResolvers": resolvers, "NodeID": p.NodeID, "Group": p.Group, "XDS": xds,
		"APIType": api, "AdminPort": p.AdminPort, "StatsPort": p.StatsPort, "StatsAddress": p.StatsAddress, "MaxConnections": p.MaxConnections,
		"MaxConnectionsSource": source, "MaxHeapBytes": p.MaxHeapBytes, "TLS": p.TLS, "ShareAdminPort": p.ShareAdminPort,
		"AdminSocket": p.AdminSocket, "InsecureAdminTCP": p.InsecureAdminTCP,
		"Zone": p.Zone, "LocalCluster": LocalCluster, "ClusterStats": p.ClusterStats,
		"ScaledIdle": p.ScaledIdleTimeout.String(), "ScaleFrom": scaleFrom, "ScaleFull": scaleFull,
		"ScaleFromPct": int(scaleFrom * 100), "ScaleFullPct": int(scaleFull * 100),
		"SoftHeapBytes": int64(float64(p.MaxHeapBytes) * scaleFull), "HeapReleasePerSecond": heapReleasePerSecond,
		"ShedAccept": shedAccept, "ShedDispatch": shedDispatch, "ShedAcceptPct": int(shedAccept * 100), "ShedDispatchPct": int(shedDispatch * 100)})
	return buf.Bytes(), err
}

// DNSResolver is one DNS server of the bootstrap's resolver.
type DNSResolver struct {
	Address string
	Port    int
}

// dnsResolvers parses the --dns-resolver values: an IP address, with an optional port.
func dnsResolvers(in []string) ([]DNSResolver, error) {
	var out []DNSResolver
	for _, r := range in {
		host, port := r, "53"
		if h, p, err := net.SplitHostPort(r); err == nil {
			host, port = h, p
		}
		pn, err := strconv.Atoi(port)
		if net.ParseIP(host) == nil || err != nil || pn < 1 || pn > 65535 {
			return nil, fmt.Errorf("--dns-resolver: want an IP address with an optional port (10.0.0.2, 10.0.0.2:5353, [fd00::2]:53), got %q", r)
		}
		out = append(out, DNSResolver{Address: host, Port: pn})
	}
	return out, nil
}

// XDSEndpoint is one address of lbplane's xDS cluster.
type XDSEndpoint struct {
	Host string
	Port int
}

// xdsEndpoints parses --xds-address: one or more comma-separated host:port (every lbplane replica), or one
// DNS name whose answers are the replicas (the cluster is STRICT_DNS: every answer is an endpoint).
func xdsEndpoints(s string) ([]XDSEndpoint, error) {
	var out []XDSEndpoint
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("--xds-address: %w", err)
		}
		pn, err := strconv.Atoi(port)
		if err != nil || pn < 1 || pn > 65535 {
			return nil, fmt.Errorf("--xds-address: invalid port %q", port)
		}
		if host == "" {
			return nil, fmt.Errorf("--xds-address %q: no host", a)
		}
		e := XDSEndpoint{Host: host, Port: pn}
		if slices.Contains(out, e) {
			return nil, fmt.Errorf("--xds-address: %s is given twice", a)
		}
		out = append(out, e)
	}
	return out, nil
}
