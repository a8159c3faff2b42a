package ir

import (
	"cmp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Source says which policy, backend and route an IR object came from, so that status, explain and NACK
// attribution can name them without parsing resource names (as Envoy Gateway's ResourceMetadata does).
// Listeners have none: a listener is one port shared by every policy on it; its virtual hosts say whose
// they are.
type Source struct {
	// Namespace and Name are the policy's.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Backend is the spec backend a cluster is made of; empty for a route's session cluster, which merges
	// several.
	Backend string `json:"backend,omitempty"`
	// Route is the index of the route in spec.routes; nil for the default route of a policy without routes,
	// and for what is not a route.
	Route *int `json:"route,omitempty"`
}

// Policy is the identity of the policy s names.
func (s Source) Policy() types.NamespacedName {
	return types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
}

// IsShared tells whether policies share c: its Source then names no policy (see Group.Shared).
func (c *Cluster) IsShared() bool { return c.Source.Namespace == "" && c.Source.Name == "" }

// ClusterSource returns the source cluster c of g has in the policy namespace/name: its Source, or for a
// shared cluster the policy's entry of Shared; false when the policy does not use it.
func (g *Group) ClusterSource(c *Cluster, namespace, name string) (Source, bool) {
	if !c.IsShared() {
		return c.Source, c.Source.Namespace == namespace && c.Source.Name == name
	}
	for _, s := range g.Shared[c.Name] {
		if s.Namespace == namespace && s.Name == name {
			return s, true
		}
	}
	return Source{}, false
}

// ClusterSources returns the source of cluster c of g in every policy that uses it.
func (g *Group) ClusterSources(c *Cluster) []Source {
	if c.IsShared() {
		return g.Shared[c.Name]
	}
	return []Source{c.Source}
}

// CompareSources orders sources by namespace, name, backend and route.
func CompareSources(a, b Source) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Backend, b.Backend),
		cmp.Compare(routeIndex(a.Route), routeIndex(b.Route)))
}

func routeIndex(r *int) int {
	if r == nil {
		return -1
	}
	return *r
}

// RouteSource returns the source of route index i of the policy s names.
func (s Source) RouteSource(i int) Source {
	s.Backend = ""
	s.Route = &i
	return s
}

// Kind is the kind of Envoy resource a name is looked up as (see Group.Owners): listeners and their route
// tables share names, as clusters and their endpoints do.
type Kind int

const (
	KindListener Kind = iota
	KindRoutes
	KindCluster
	KindEndpoints
	KindSecret
	// KindScope is a scope (SRDS) of a listener served as scoped routes (see Listener.Scopable).
	KindScope
)

// Owner is one IR object an Envoy resource is made of, with its source. Names are those of the virtual
// host, route or TLS filter chain certificate, so that a message naming one can be matched to it.
type Owner struct {
	Source Source
	// Names are what Envoy may call the object in a message: a virtual host's name and its routes'.
	Names []string
}

// Owners returns what the resource of the given kind and name is made of in g: a cluster's (and its
// endpoints') source; the virtual hosts of a listener or route table (a TCP listener: its clusters'
// sources); for a secret, the virtual hosts whose certificate it is and the clusters that use it. A shared
// listener has an owner per policy on it. Nothing is parsed out of the name.
func (g *Group) Owners(kind Kind, name string) []Owner {
	var out []Owner
	switch kind {
	case KindCluster, KindEndpoints:
		if c := g.cluster(name); c != nil {
			out = append(out, g.clusterOwners(c)...)
		}
	case KindListener, KindRoutes:
		for _, l := range g.Listeners {
			if (kind == KindListener && l.Name == name) || (kind == KindRoutes && l.VirtualHosts != nil && l.RouteConfigName() == name) {
				out = append(out, g.listenerOwners(l, nil)...)
			}
		}
		if kind == KindRoutes && len(out) == 0 {
			out = g.hostOwners(name, func(l *Listener, vh *VirtualHost) bool { return l.HostRouteConfigName(vh) == name })
		}
	case KindScope:
		out = g.hostOwners(name, func(l *Listener, vh *VirtualHost) bool {
			return slices.ContainsFunc(vh.Domains, func(d string) bool { return l.ScopeName(d) == name })
		})
	case KindSecret:
		for _, l := range g.Listeners {
			for _, ch := range l.TLS.chains() {
				if ch.Secret == name {
					out = append(out, g.listenerOwners(l, ch.ServerNames)...)
				}
			}
		}
		for _, c := range g.Clusters {
			if t := c.TLS; t != nil && (t.CASecret == name || t.ClientCertSecret == name) {
				out = append(out, g.clusterOwners(c)...)
			}
		}
	}
	return out
}

// hostOwners finds the virtual host a per-host resource of a scoped listener (a host's route table or
// scope) was built from: the listener's name is a prefix of the resource's.
func (g *Group) hostOwners(name string, is func(*Listener, *VirtualHost) bool) []Owner {
	for _, l := range g.Listeners {
		if !strings.HasPrefix(name, l.Name+"/") {
			continue
		}
		for _, vh := range l.VirtualHosts {
			if is(l, vh) {
				return g.listenerOwners(&Listener{Name: l.Name, VirtualHosts: []*VirtualHost{vh}}, nil)
			}
		}
	}
	return nil
}

// listenerOwners lists the virtual hosts of l (only those serving one of serverNames, when given and some
// do), or a TCP listener's clusters.
func (g *Group) listenerOwners(l *Listener, serverNames []string) []Owner {
	var out []Owner
	if l.TCP != nil {
		for _, wc := range l.TCP.Clusters {
			if c := g.cluster(wc.Name); c != nil {
				out = append(out, g.clusterOwners(c)...)
			}
		}
		return out
	}
	for _, vh := range l.VirtualHosts {
		if len(serverNames) > 0 && !anyIn(serverNames, vh.Domains) {
			continue
		}
		o := Owner{Source: vh.Source, Names: []string{vh.Name}}
		for _, r := range vh.Routes {
			o.Names = append(o.Names, r.Name)
		}
		out = append(out, o)
	}
	if len(out) == 0 && len(serverNames) > 0 {
		return g.listenerOwners(l, nil)
	}
	return out
}

// clusterOwners is an owner per policy that uses c.
func (g *Group) clusterOwners(c *Cluster) []Owner {
	var out []Owner
	for _, s := range g.ClusterSources(c) {
		out = append(out, Owner{Source: s})
	}
	return out
}

// cluster finds a cluster by name: Clusters are sorted by name, but a group built by hand may not be.
func (g *Group) cluster(name string) *Cluster {
	lo, hi := 0, len(g.Clusters)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if g.Clusters[m].Name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(g.Clusters) && g.Clusters[lo].Name == name {
		return g.Clusters[lo]
	}
	for _, c := range g.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (t *ListenerTLS) chains() []TLSChain {
	if t == nil {
		return nil
	}
	return t.Chains
}

func anyIn(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}
