package trafficmodel

import (
	"fmt"
	"slices"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// Policy is the traffic model of one policy: its routes, and each backend cluster for the given health.
type Policy struct {
	Namespace string
	Name      string
	Group     string
	// Domains of the policy's virtual host (HTTP).
	Domains []string
	Routes  []*Route
	// Clusters by IR cluster name.
	Clusters map[string]*Cluster
	// BackendOf names the spec backend of each cluster (a merged session cluster is named after its route).
	BackendOf map[string]string
}

// Route is one route of the policy (a TCP policy has one, matching every connection).
type Route struct {
	Name     string
	IR       *ir.Route
	Clusters []ir.WeightedCluster
	HashKeys []ir.HashKey
	Session  *ir.Session
}

// ForPolicy builds the model of the policy namespace/name from the IR, with the endpoints in down out.
func ForPolicy(cfg *ir.Config, namespace, name string, down Down) (*Policy, error) {
	for _, g := range cfg.Groups {
		p := &Policy{Namespace: namespace, Name: name, Group: g.Name, Clusters: map[string]*Cluster{}, BackendOf: map[string]string{}}
		byName := map[string]*ir.Cluster{}
		for _, c := range g.Clusters {
			byName[c.Name] = c
		}
		for _, l := range g.Listeners {
			if l.TCP != nil {
				if len(l.TCP.Clusters) == 0 {
					continue
				}
				c := byName[l.TCP.Clusters[0].Name]
				if c == nil || c.Source.Namespace != namespace || c.Source.Name != name {
					continue
				}
				p.Routes = []*Route{{Name: l.Name, Clusters: l.TCP.Clusters, HashKeys: l.TCP.HashKeys}}
			}
			for _, vh := range l.VirtualHosts {
				if vh.Source.Namespace != namespace || vh.Source.Name != name {
					continue
				}
				p.Domains = vh.Domains
				for _, r := range vh.Routes {
					p.Routes = append(p.Routes, &Route{Name: r.Name, IR: r, Clusters: r.Clusters, HashKeys: r.HashKeys, Session: r.Session})
				}
			}
		}
		if len(p.Routes) == 0 {
			continue
		}
		for _, r := range p.Routes {
			for _, wc := range r.Clusters {
				c := byName[wc.Name]
				if c == nil {
					return nil, fmt.Errorf("route %s names cluster %s, which is not in the IR", r.Name, wc.Name)
				}
				if _, ok := p.Clusters[c.Name]; !ok {
					p.Clusters[c.Name] = NewCluster(c, down)
					p.BackendOf[c.Name] = c.Source.Backend
					if c.Source.Backend == "" {
						p.BackendOf[c.Name] = r.Name
					}
				}
			}
		}
		return p, nil
	}
	return nil, fmt.Errorf("policy %s/%s is not served (not in the translated config: not accepted, or not in the input)", namespace, name)
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
	Route   string  `json:"route"`
	Backend string  `json:"backend"`
	Cluster string  `json:"cluster"`
	Address string  `json:"address"`
	Zone    string  `json:"zone,omitempty"`
	Weight  uint32  `json:"weight"`
	Healthy bool    `json:"healthy"`
	Reason  string  `json:"reason,omitempty"`
	Share   float64 `json:"share"`
	// ResolvedByEnvoy: Address is a host name, whose addresses Envoy resolves at run time and splits the
	// share over.
	ResolvedByEnvoy bool `json:"resolvedByEnvoy,omitempty"`
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
			w := float64(wc.Weight) / float64(sum)
			for i, s := range c.Shares() {
				h := c.Hosts[i]
				out = append(out, EndpointShare{Route: r.Name, Backend: p.BackendOf[c.Name], Cluster: c.Name, Address: h.Address,
					Zone: h.Zone, Weight: h.Weight, Healthy: h.Healthy, Reason: h.Reason, Share: w * s, ResolvedByEnvoy: c.ResolvedByEnvoy})
			}
		}
	}
	return out
}
