// Package translate turns a set of policies into the IR and a status for each policy. It is a pure function:
// no I/O, no clock, no mutation of its input. User errors become status; they never stop other policies.
package translate

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

func addPolicy(c *ir.Config, p *v1alpha1.LoadBalancerPolicy, r *PolicyResult, secrets map[string]*ir.Secret, refs Refs) {
	s := &p.Spec
	g, ok := c.Groups[s.ProxyGroup]
	if !ok {
		g = &ir.Group{Name: s.ProxyGroup}
		c.Groups[s.ProxyGroup] = g
	}
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		g.Secrets = append(g.Secrets, secrets[name])
	}
	r.ResolvedRefs, r.ResolvedRefsReason, r.ResolvedRefsMessage = true, ReasonResolvedRefs, "all backends resolved"
	var missing, forbidden []string
	hashKeys := map[string][]ir.HashKey{}
	byName := map[string]*ir.Cluster{}
	// keepSessions: the backend of each cluster keeps sessions on its draining endpoints (drainingSessions).
	keepSessions := map[string]bool{}
	overrides := refs.Overrides[objkey.Of(p)]
	matched := make([]int32, len(overrides))
	for i := range s.Backends {
		b := &s.Backends[i]
		cl := cluster(p, b, refs)
		missing, forbidden = append(missing, cl.DNSMissing...), append(forbidden, cl.DNSForbidden...)
		cl.Source = ir.Source{Namespace: p.Namespace, Name: p.Name, Backend: b.Name}
		byName[cl.Name] = cl.Cluster
		keepSessions[cl.Name] = b.DrainingSessions != v1alpha1.DrainingSessionsMove
		if b.Service != nil {
			eps, msg := serviceEndpoints(p, b, refs)
			for i := range eps {
				probed(cl.Cluster, b, &eps[i])
			}
			cl.Endpoints = append(cl.Endpoints, eps...)
			if msg != "" {
				missing = append(missing, fmt.Sprintf("spec.backends[%d].service: %s", i, msg))
			}
		}
		if len(cl.HashKeysFromPolicy) > 0 {
			hashKeys[cl.Name] = cl.HashKeysFromPolicy
		}
		maintenance := 0
		if len(overrides) > 0 {
			cl.Endpoints, maintenance = applyOverrides(b.Name, cl.Endpoints, overrides, matched)
		}
		// Endpoints under maintenance are the policy's still, out of rotation.
		r.Endpoints += int32(len(cl.Endpoints) + maintenance)
		r.ResolvedByEnvoy = r.ResolvedByEnvoy || cl.DNS != nil
		for _, e := range cl.Endpoints {
			if !e.Draining {
				r.HealthyEndpoints++
			}
		}
		r.Clusters = append(r.Clusters, cl.Name)
		r.Backends = append(r.Backends, b.Name)
		g.Clusters = append(g.Clusters, cl.Cluster)
	}
	if len(overrides) > 0 {
		st := make([]v1alpha1.EndpointOverrideStatus, len(overrides))
		for i, o := range overrides {
			st[i] = v1alpha1.EndpointOverrideStatus{EndpointOverride: o, Endpoints: matched[i]}
		}
		r.rareFields().overrides = st
	}
	switch {
	case len(forbidden) > 0:
		// Before missing ones: an answer the rules refuse is what the operator must see first.
		r.ResolvedRefs, r.ResolvedRefsReason, r.ResolvedRefsMessage = false, ReasonForbiddenAddress, strings.Join(append(forbidden, missing...), "; ")
	case len(missing) > 0:
		r.ResolvedRefs, r.ResolvedRefsReason, r.ResolvedRefsMessage = false, ReasonBackendMissing, strings.Join(missing, "; ")
	}
	// The backends' cluster names in spec order: r.Clusters holds only them so far (session clusters are
	// added with the routes, below).
	backendClusters := r.Clusters[len(r.Clusters)-len(s.Backends):]
	l := listenerFor(g, p)
	l.NoRouterDynamicStats = refs.NoRouterDynamicStats
	l.AccessLog = accessLogOf(l.Edge, refs.AccessLog)
	r.Listener = l.Name
	if l.Protocol == ir.TCP {
		l.TCP = &ir.TCPRoute{Clusters: allBackends(backendClusters)}
		l.TCP.HashKeys = hashKeysFor(l.TCP.Clusters, hashKeys)
		return
	}
	if t := s.Listener.TLS; t != nil {
		addChains(l, p, t)
	}
	src := ir.Source{Namespace: p.Namespace, Name: p.Name}
	// The default route's name extends the virtual host's: both are one string ("ns/name/default"), the
	// host's name a prefix of it, instead of two allocations per policy.
	const defaultSuffix = "/default"
	both := objkey.Name(objkey.Of(p), "default")
	vh := &ir.VirtualHost{Name: both[:len(both)-len(defaultSuffix)], Source: src, Domains: domains(s.Listener.Hostnames)}
	if s.DebugHeaders {
		vh.UpstreamHostHeader = v1alpha1.UpstreamHostHeader
	}
	if len(s.Routes) == 0 {
		all := allBackends(backendClusters)
		vh.Routes = []*ir.Route{{Name: both, Source: src, PathType: ir.PathPrefix, Path: "/", Clusters: all,
			Timeout: v1alpha1.DefaultRouteTimeout, HashKeys: hashKeysFor(all, hashKeys), Retry: defaultRouteRetry}}
	}
	for i, rt := range s.Routes {
		route := route(p, &rt, hashKeys)
		route.Source = src.RouteSource(i)
		sp := rt.SessionPersistence
		if sp != nil && sp.AcrossBackends && len(rt.Backends) > 1 {
			// Every backend of the route, those at weight 0 too: their endpoints keep their sessions.
			all := make([]ir.WeightedCluster, len(rt.Backends))
			for j, ref := range rt.Backends {
				all[j] = ir.WeightedCluster{Name: clusterName(p, ref.Name), Weight: uint32(*ref.Weight)}
			}
			merged := mergeClusters(objkey.Name(objkey.Of(p), rt.Name, "session"), all, byName)
			merged.Source = route.Source
			merged.KeepDrainingSessions = keepSessions[all[0].Name]
			g.Clusters = append(g.Clusters, merged)
			r.addSession(merged.Name, rt.Name)
			route.Clusters = []ir.WeightedCluster{{Name: merged.Name, Weight: 1}}
		} else if sp != nil {
			for _, wc := range route.Clusters {
				byName[wc.Name].KeepDrainingSessions = keepSessions[wc.Name]
			}
		}
		vh.Routes = append(vh.Routes, route)
	}
	l.VirtualHosts = append(l.VirtualHosts, vh)
}
