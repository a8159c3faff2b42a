package trafficmodel

import (
	"fmt"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	statefulsessionv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/stateful_session/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	cookiesessionv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/stateful_session/cookie/v3"
	headersessionv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/stateful_session/header/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
)

// Policy is the traffic model of one policy: its routes, and each backend cluster for the given health.
type Policy struct {
	Namespace string
	Name      string
	Group     string
	// Domains of the policy's virtual host (HTTP).
	Domains []string
	Routes  []*Route
	// Clusters by cluster name.
	Clusters map[string]*Cluster
	// BackendOf names the spec backend of each cluster (a merged session cluster is named after its route).
	BackendOf map[string]string
	// SpecRoutes is the index in the policy's spec.routes of each route, by its name in Envoy (see Built).
	SpecRoutes map[string]int
	// envoys are the Envoys the model is for (From).
	envoys Envoys
}

// From makes the model the one of the Envoys e: each cluster's shares are theirs (Cluster.From).
func (p *Policy) From(e Envoys) *Policy {
	p.envoys = e
	for _, c := range p.Clusters {
		c.From(e)
	}
	return p
}

// envoysNote names the Envoys the model is for when some backend's shares depend on the Envoy's zone;
// empty otherwise.
func (p *Policy) envoysNote() string {
	for _, c := range p.Clusters {
		if c.ZoneAware {
			return p.envoys.String()
		}
	}
	return ""
}

// BackendCaveats are what a prediction of one backend leaves out (Caveats).
type BackendCaveats struct {
	Backend string   `json:"backend"`
	Caveats []string `json:"caveats"`
}

// caveats are Caveats for each backend that has some, by backend name.
func (p *Policy) caveats() []BackendCaveats {
	var out []BackendCaveats
	for _, name := range sortedKeys(p.Clusters) {
		if cs := Caveats(p.Clusters[name]); len(cs) > 0 {
			out = append(out, BackendCaveats{Backend: p.BackendOf[name], Caveats: cs})
		}
	}
	return out
}

// WeightedCluster is one destination of a route and its weight.
type WeightedCluster struct {
	Name   string `json:"name"`
	Weight uint32 `json:"weight"`
}

// Route is one built route of the policy (a TCP policy has one, matching every connection).
type Route struct {
	Name string
	// Match is the route's match as built; nil for TCP (every connection).
	Match    *routev3.RouteMatch
	Clusters []WeightedCluster
	// Hash is the route's hash policy as built; a TCP hash on the client address is given in the same form.
	Hash    []*routev3.RouteAction_HashPolicy
	Session *Session
	// Answer says how Envoy answers a route that forwards nothing (a redirect, a direct response); empty for
	// a route to backends.
	Answer string
}

// Session is the stateful session a route keeps: in a cookie or a header.
type Session struct {
	Kind string // "cookie" or "header"
	Name string
}

// Built is what xdsbuild made for one policy: the route configuration's virtual host (HTTP) or the TCP
// proxy (TCP), and each cluster with its assignment. Backups and BackendOf are labels for people: the model
// reads Envoy's behaviour from the protos alone.
type Built struct {
	Namespace, Name, Group string
	VirtualHost            *routev3.VirtualHost
	// TCP and TCPName (the listener's name) for a TCP policy.
	TCP     *tcpv3.TcpProxy
	TCPName string
	// Clusters and Assignments by cluster name; a cluster of host names has no assignment.
	Clusters    map[string]*clusterv3.Cluster
	Assignments map[string]*endpointv3.ClusterLoadAssignment
	BackendOf   map[string]string
	Backups     map[string]Backups
	// SpecRoutes is the index in the policy's spec.routes of each route of VirtualHost, by its name in Envoy,
	// from the IR's sources: a route made of no spec route (a policy without routes) is not in it.
	SpecRoutes map[string]int
}

// FromBuilt models a policy from its built resources, with the endpoints in down out.
func FromBuilt(b *Built, down Down) (*Policy, error) {
	p := &Policy{Namespace: b.Namespace, Name: b.Name, Group: b.Group, Clusters: map[string]*Cluster{}, BackendOf: map[string]string{},
		SpecRoutes: b.SpecRoutes}
	if vh := b.VirtualHost; vh != nil {
		p.Domains = vh.GetDomains()
		for _, r := range vh.GetRoutes() {
			rt, err := routeOf(r)
			if err != nil {
				return nil, err
			}
			p.Routes = append(p.Routes, rt)
		}
	}
	if tp := b.TCP; tp != nil {
		rt := &Route{Name: b.TCPName}
		if c := tp.GetCluster(); c != "" {
			rt.Clusters = []WeightedCluster{{Name: c, Weight: 1}}
		}
		for _, c := range tp.GetWeightedClusters().GetClusters() {
			rt.Clusters = append(rt.Clusters, WeightedCluster{Name: c.GetName(), Weight: c.GetWeight()})
		}
		for _, h := range tp.GetHashPolicy() {
			if h.GetSourceIp() != nil {
				rt.Hash = append(rt.Hash, &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{
					ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}})
			}
		}
		p.Routes = append(p.Routes, rt)
	}
	for _, r := range p.Routes {
		for _, wc := range r.Clusters {
			if _, ok := p.Clusters[wc.Name]; ok || wc.Name == ir.ErrorCluster {
				continue
			}
			c := b.Clusters[wc.Name]
			if c == nil {
				return nil, fmt.Errorf("route %s names cluster %s, which was not built", r.Name, wc.Name)
			}
			m, err := NewCluster(c, b.Assignments[wc.Name], down, b.Backups[wc.Name])
			if err != nil {
				return nil, err
			}
			p.Clusters[wc.Name] = m
			p.BackendOf[wc.Name] = b.BackendOf[wc.Name]
			if p.BackendOf[wc.Name] == "" {
				p.BackendOf[wc.Name] = r.Name
			}
		}
	}
	return p, nil
}

// routeOf reads one built route: its match, destinations, hash policy and session.
func routeOf(r *routev3.Route) (*Route, error) {
	a := r.GetRoute()
	if a == nil {
		rt := &Route{Name: r.GetName(), Match: r.GetMatch()}
		switch {
		case r.GetRedirect() != nil:
			rt.Answer = "Envoy answers with a redirect"
		case r.GetDirectResponse() != nil:
			rt.Answer = fmt.Sprintf("Envoy answers %d itself", r.GetDirectResponse().GetStatus())
		default:
			return nil, fmt.Errorf("route %s neither forwards nor answers", r.GetName())
		}
		return rt, nil
	}
	rt := &Route{Name: r.GetName(), Match: r.GetMatch(), Hash: a.GetHashPolicy()}
	if c := a.GetCluster(); c != "" {
		rt.Clusters = []WeightedCluster{{Name: c, Weight: 1}}
	}
	for _, c := range a.GetWeightedClusters().GetClusters() {
		rt.Clusters = append(rt.Clusters, WeightedCluster{Name: c.GetName(), Weight: c.GetWeight().GetValue()})
	}
	for _, cfg := range r.GetTypedPerFilterConfig() {
		var ps statefulsessionv3.StatefulSessionPerRoute
		if cfg.UnmarshalTo(&ps) != nil {
			continue
		}
		st := ps.GetStatefulSession().GetSessionState().GetTypedConfig()
		if st == nil {
			continue
		}
		var ck cookiesessionv3.CookieBasedSessionState
		var hd headersessionv3.HeaderBasedSessionState
		switch {
		case st.UnmarshalTo(&ck) == nil:
			rt.Session = &Session{Kind: "cookie", Name: ck.GetCookie().GetName()}
		case st.UnmarshalTo(&hd) == nil:
			rt.Session = &Session{Kind: "header", Name: hd.GetName()}
		}
	}
	return rt, nil
}

// Build gathers what xdsbuild makes of the policy namespace/name in cfg: its routes (found by the virtual
// host's or cluster's ir.Source), and each cluster with its assignment.
func Build(cfg *ir.Config, namespace, name string) (*Built, error) {
	return BuildFrom(cfg, namespace, name, nil)
}

// Lookup returns one resource of a proxy group as it is served, by type URL and name; nil when there is
// none. The message is not modified.
type Lookup func(group, typeURL, name string) proto.Message

// BuildFrom is Build reading the policy's resources as served (the engine's published state) through
// served, decoded one by one: the IR only says which are the policy's. A nil served builds them from the
// IR, as xdsbuild does.
func BuildFrom(cfg *ir.Config, namespace, name string, served Lookup) (*Built, error) {
	for _, g := range cfg.Groups {
		b := &Built{Namespace: namespace, Name: name, Group: g.Name, Clusters: map[string]*clusterv3.Cluster{},
			Assignments: map[string]*endpointv3.ClusterLoadAssignment{}, BackendOf: map[string]string{}, Backups: map[string]Backups{}}
		mine := func(s ir.Source) bool { return s.Namespace == namespace && s.Name == name }
		found := false
		var err error
		for _, l := range g.Listeners {
			if l.TCP != nil {
				if len(l.TCP.Clusters) == 0 {
					continue
				}
				i, ok := slices.BinarySearchFunc(g.Clusters, l.TCP.Clusters[0].Name, func(c *ir.Cluster, n string) int { return strings.Compare(c.Name, n) })
				if !ok {
					continue
				}
				if _, used := g.ClusterSource(g.Clusters[i], namespace, name); !used {
					continue
				}
				lis := xdsbuild.Listener
				if served != nil {
					lis = func(l *ir.Listener) *listenerv3.Listener {
						m, _ := served(g.Name, resource.ListenerType, l.Name).(*listenerv3.Listener)
						return m
					}
				}
				if b.TCP, b.TCPName, found = tcpProxyOf(lis(l)), l.Name, true; b.TCP == nil {
					return nil, fmt.Errorf("listener %s of %s/%s is not served", l.Name, namespace, name)
				}
				continue
			}
			for _, vh := range l.VirtualHosts {
				if !mine(vh.Source) {
					continue
				}
				if b.VirtualHost, err = virtualHostOf(g, l, vh, served); err != nil {
					return nil, err
				}
				for _, r := range vh.Routes {
					if r.Source.Route != nil {
						if b.SpecRoutes == nil {
							b.SpecRoutes = map[string]int{}
						}
						b.SpecRoutes[r.Name] = *r.Source.Route
					}
				}
				found = true
			}
		}
		if !found {
			continue
		}
		for _, c := range g.Clusters {
			src, used := g.ClusterSource(c, namespace, name)
			if !used {
				continue
			}
			if served == nil {
				b.Clusters[c.Name] = xdsbuild.Cluster(c)
				if c.DNS == nil {
					b.Assignments[c.Name] = xdsbuild.LoadAssignment(c)
				}
			} else {
				cl, _ := served(g.Name, resource.ClusterType, c.Name).(*clusterv3.Cluster)
				if cl == nil {
					return nil, fmt.Errorf("cluster %s of %s/%s is not served", c.Name, namespace, name)
				}
				b.Clusters[c.Name] = cl
				if c.DNS == nil {
					cla, _ := served(g.Name, resource.EndpointType, c.Name).(*endpointv3.ClusterLoadAssignment)
					if cla == nil {
						return nil, fmt.Errorf("endpoints of cluster %s of %s/%s are not served", c.Name, namespace, name)
					}
					b.Assignments[c.Name] = cla
				}
			}
			b.BackendOf[c.Name] = src.Backend
			b.Backups[c.Name] = BackupsOf(c)
		}
		return b, nil
	}
	return nil, fmt.Errorf("policy %s/%s is not served (not in the translated config: not accepted, or not in the input)", namespace, name)
}

// virtualHostOf is the virtual host of vh as served (in its port's route table, or its own one on a port
// served as scoped routes), or as xdsbuild builds it when served is nil or vh needs no scope.
func virtualHostOf(g *ir.Group, l *ir.Listener, vh *ir.VirtualHost, served Lookup) (*routev3.VirtualHost, error) {
	built := func() *routev3.VirtualHost {
		return xdsbuild.RouteConfig(&ir.Listener{Name: l.Name, VirtualHosts: []*ir.VirtualHost{vh}}).GetVirtualHosts()[0]
	}
	if served == nil {
		return built(), nil
	}
	name := l.RouteConfigName()
	if scoped := g.ScopedPort(); scoped != 0 && l.Port == scoped {
		if vh.ImpliedByScopes() {
			return built(), nil // served as no scope: Envoy's answer to a host without one is the same bare 404
		}
		name = l.HostRouteConfigName(vh)
	}
	rc, _ := served(g.Name, resource.RouteType, name).(*routev3.RouteConfiguration)
	for _, v := range rc.GetVirtualHosts() {
		if v.GetName() == vh.Name {
			return v, nil
		}
	}
	return nil, fmt.Errorf("virtual host %s is not served in route table %s", vh.Name, name)
}

// BackupsOf names the backup endpoints of an IR cluster.
func BackupsOf(c *ir.Cluster) Backups {
	var out Backups
	for _, e := range c.Endpoints {
		if e.Backup {
			if out == nil {
				out = Backups{}
			}
			out[HostKey(e.Address, e.Port)] = true
		}
	}
	return out
}

// tcpProxyOf finds the TCP proxy of a built listener.
func tcpProxyOf(l *listenerv3.Listener) *tcpv3.TcpProxy {
	chains := l.GetFilterChains()
	if l.GetDefaultFilterChain() != nil {
		chains = append(chains, l.GetDefaultFilterChain())
	}
	for _, ch := range chains {
		for _, f := range ch.GetFilters() {
			var tp tcpv3.TcpProxy
			if f.GetTypedConfig() != nil && f.GetTypedConfig().UnmarshalTo(&tp) == nil {
				return &tp
			}
		}
	}
	return nil
}

// ForPolicy builds the model of the policy namespace/name from what xdsbuild makes of cfg, with the
// endpoints in down out.
func ForPolicy(cfg *ir.Config, namespace, name string, down Down) (*Policy, error) {
	return ForPolicyServed(cfg, namespace, name, down, nil)
}

// ForPolicyServed is ForPolicy from the resources as served (BuildFrom).
func ForPolicyServed(cfg *ir.Config, namespace, name string, down Down, served Lookup) (*Policy, error) {
	b, err := BuildFrom(cfg, namespace, name, served)
	if err != nil {
		return nil, err
	}
	return FromBuilt(b, down)
}

// Route returns the route with this name, or nil.
func (p *Policy) Route(name string) *Route {
	i := slices.IndexFunc(p.Routes, func(r *Route) bool { return r.Name == name })
	if i < 0 {
		return nil
	}
	return p.Routes[i]
}

// EndpointShare is the expected share of a route's requests one endpoint gets.
type EndpointShare struct {
	Route    string  `json:"route"`
	Backend  string  `json:"backend"`
	Cluster  string  `json:"cluster"`
	Address  string  `json:"address"`
	Zone     string  `json:"zone,omitempty"`
	Priority int     `json:"priority"`
	Backup   bool    `json:"backup,omitempty"`
	Weight   uint32  `json:"weight"`
	Healthy  bool    `json:"healthy"`
	Reason   string  `json:"reason,omitempty"`
	Share    float64 `json:"share"`
	// KeepsSessions: a session pinned to the endpoint stays there (it is healthy, or draining in a backend
	// that keeps the sessions of draining endpoints).
	KeepsSessions bool `json:"keepsSessions,omitempty"`
	// ResolvedByEnvoy: Address is a host name, whose addresses Envoy resolves at run time and splits the
	// share over.
	ResolvedByEnvoy bool `json:"resolvedByEnvoy,omitempty"`
	// Warming is the part of its weight a slow-starting endpoint has (Policy.Joined); 0: its full weight.
	Warming float64 `json:"warming,omitempty"`
}

// Shares returns, route by route, every endpoint's expected share of the route's requests: the backend's
// route weight times the endpoint's share of the backend.
func (p *Policy) Shares() []EndpointShare {
	var out []EndpointShare
	for _, r := range p.Routes {
		var sum uint64
		for _, wc := range r.Clusters {
			sum += uint64(wc.Weight)
		}
		for _, wc := range r.Clusters {
			c := p.Clusters[wc.Name]
			if c == nil { // the error share: Envoy answers it 500, no endpoint gets it
				continue
			}
			w := float64(wc.Weight) / float64(sum)
			for i, s := range c.Shares() {
				h := c.Hosts[i]
				out = append(out, EndpointShare{Route: r.Name, Backend: p.BackendOf[c.Name], Cluster: c.Name, Address: h.Address,
					Zone: h.Zone, Priority: h.Priority, Backup: h.Backup, Weight: h.Weight, Healthy: h.Healthy, Reason: h.Reason, Share: w * s,
					KeepsSessions: c.KeepsSession(i), ResolvedByEnvoy: c.ResolvedByEnvoy, Warming: h.Warming})
			}
		}
	}
	return out
}
