package ir

import (
	"reflect"
	"strings"

	"github.com/lbplane/lbplane/controlplane/objkey"
)

// ScopedRoutesAbove is the number of virtual hosts on one HTTP port above which the port's hosts are served
// as scoped routes (SRDS): one small route table per host, chosen by the request's host, instead of one
// route table holding every host. Envoy takes a route table whole: with one table, a change to one host
// re-sends and re-parses all of them (about 100 bytes each, 1 MB at 10,000 hosts). With scopes a change to
// one host sends that host's table alone. Small ports keep the single table, so configs of up to this many
// hosts per port (every example and golden output before this existed) are built exactly as before.
const ScopedRoutesAbove = 100

// Scopable says whether l's hosts can be served as scoped routes: an HTTP port with more than
// ScopedRoutesAbove virtual hosts, every one named by exact host names only. Envoy finds a scope by the
// exact value of a key taken from the Host header, so a wildcard ("*.example.com") or the catch-all ("*")
// cannot be a scope, and a port with one keeps the single route table (where Envoy matches wildcards).
// Names with ':' or brackets (an IPv6 literal) are left out too: the key is the part of the Host header
// before its first ':'.
func (l *Listener) Scopable() bool {
	if l.Protocol != HTTP || len(l.VirtualHosts) <= ScopedRoutesAbove {
		return false
	}
	for _, vh := range l.VirtualHosts {
		if !vh.Scopable() {
			return false
		}
	}
	return true
}

// Scopable says whether every host name of vh can be a scope key (see Listener.Scopable), or vh needs no
// scope (see ImpliedByScopes).
func (vh *VirtualHost) Scopable() bool {
	if vh.ImpliedByScopes() {
		return true
	}
	if len(vh.Domains) == 0 {
		return false
	}
	for _, d := range vh.Domains {
		if d == "" || strings.ContainsAny(d, "*:[]") || strings.ToLower(d) != d {
			return false
		}
	}
	return true
}

// ImpliedByScopes says whether vh is the catch-all host ("*") and answers every request with a bare 404, as
// a Gateway listener with no host name does for names no route serves. On a port served as scoped routes,
// such a host gets no scope and no route table: a request whose host finds no scope gets Envoy's 404, the
// same answer. Without this, one such host kept a Gateway of thousands of host names in a single table.
func (vh *VirtualHost) ImpliedByScopes() bool {
	if len(vh.Domains) != 1 || vh.Domains[0] != "*" || vh.UpstreamHostHeader != "" || len(vh.Routes) != 1 {
		return false
	}
	r := *vh.Routes[0]
	if (r.PathType != "" && r.PathType != PathPrefix) || (r.Path != "" && r.Path != "/") {
		return false
	}
	// What shapes only a request sent upstream does nothing to an answer of Envoy's own; anything else
	// (a header match, a rate limit, response headers) keeps the host a host.
	r.Name, r.Source, r.PathType, r.Path, r.Timeout, r.IdleTimeout, r.Retry, r.HashKeys = "", Source{}, "", "", 0, nil, nil, nil
	return reflect.DeepEqual(r, Route{DirectResponse: &DirectResponse{Status: 404}})
}

// ScopedPort returns the port of the listener of g whose hosts are served as scoped routes, or 0 for none.
// It is at most one per group: Envoy subscribes to scopes (ScopedRouteConfiguration) as a wildcard, so every
// listener using scopes would receive the scopes of every other one and route their hosts too. The
// scopable listener with the lowest port is the one; others keep their single route table.
func (g *Group) ScopedPort() uint32 {
	for _, l := range g.Listeners { // sorted by port
		if l.Scopable() {
			return l.Port
		}
	}
	return 0
}

// ScopedRoutesName names the scoped route set (SRDS) of a listener.
func (l *Listener) ScopedRoutesName() string { return l.Name }

// HostRouteConfigName is the RDS resource of one virtual host of a listener served as scoped routes.
func (l *Listener) HostRouteConfigName(vh *VirtualHost) string { return objkey.Join(l.Name, vh.Name) }

// ScopeName is the SRDS resource that sends requests for one host name of a listener to its virtual host's
// route table.
func (l *Listener) ScopeName(domain string) string { return objkey.Join(l.Name, domain) }
