// Package xdsbuild turns one proxy group of the IR into Envoy resources, one small builder per type. It is
// pure and never fails on user input: the IR is already valid. The output is checked with the protos' own
// validation rules before anyone publishes it.
package xdsbuild

import (
	"errors"
	"fmt"
	"sort"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	maglevv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/maglev/v3"
	randomv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/random/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// Types lists the resource types lbplane serves, in the order Envoy must receive them so that nothing refers
// to what it does not have yet: clusters, their endpoints, listeners, then the routes listeners read.
var Types = []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType}

// Resources holds the Envoy resources of one proxy group by type URL, each list sorted by name.
type Resources map[string][]proto.Message

// edsInitialFetchTimeout bounds how long a new or changed cluster waits for its endpoints. lbplane answers
// every EDS name it is asked for, so this only matters when the control plane is unreachable; then a cluster
// should come up empty rather than block the listeners behind it forever.
const edsInitialFetchTimeout = 15 * time.Second

// Build returns the resources of one group, validated.
func Build(g *ir.Group) (Resources, error) {
	out := Resources{}
	for _, c := range g.Clusters {
		out[resource.ClusterType] = append(out[resource.ClusterType], Cluster(c))
		out[resource.EndpointType] = append(out[resource.EndpointType], LoadAssignment(c))
	}
	for _, l := range g.Listeners {
		out[resource.ListenerType] = append(out[resource.ListenerType], Listener(l))
		if l.Protocol == ir.HTTP {
			out[resource.RouteType] = append(out[resource.RouteType], RouteConfig(l))
		}
	}
	var errs []error
	for typ, list := range out {
		sort.Slice(list, func(i, j int) bool { return cachev3.GetResourceName(list[i]) < cachev3.GetResourceName(list[j]) })
		for _, m := range list {
			if v, ok := m.(interface{ ValidateAll() error }); ok {
				if err := v.ValidateAll(); err != nil {
					errs = append(errs, fmt.Errorf("%s %s: %w", typ, cachev3.GetResourceName(m), err))
				}
			}
		}
	}
	return out, errors.Join(errs...)
}

func ads(initialFetchTimeout time.Duration) *corev3.ConfigSource {
	cs := &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
	if initialFetchTimeout > 0 {
		cs.InitialFetchTimeout = durationpb.New(initialFetchTimeout)
	}
	return cs
}

func typed(name string, m proto.Message) *corev3.TypedExtensionConfig {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("marshal %s: %v", name, err))
	}
	return &corev3.TypedExtensionConfig{Name: name, TypedConfig: a}
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", m, err))
	}
	return a
}

// Cluster builds the cluster of one backend; its endpoints come over EDS under the same name.
func Cluster(c *ir.Cluster) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 c.Name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads(edsInitialFetchTimeout), ServiceName: c.Name},
		ConnectTimeout:       durationpb.New(c.ConnectTimeout),
		LoadBalancingPolicy:  loadBalancingPolicy(c),
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			Priority:           corev3.RoutingPriority_DEFAULT,
			MaxConnections:     wrapperspb.UInt32(c.CircuitBreakers.MaxConnections),
			MaxPendingRequests: wrapperspb.UInt32(c.CircuitBreakers.MaxPendingRequests),
			MaxRequests:        wrapperspb.UInt32(c.CircuitBreakers.MaxRequests),
			MaxRetries:         wrapperspb.UInt32(c.CircuitBreakers.MaxRetries),
		}}},
	}
}

func loadBalancingPolicy(c *ir.Cluster) *clusterv3.LoadBalancingPolicy {
	var p *corev3.TypedExtensionConfig
	switch c.Algorithm {
	case ir.LeastRequest:
		p = typed("envoy.load_balancing_policies.least_request", &leastrequestv3.LeastRequest{ChoiceCount: wrapperspb.UInt32(c.ChoiceCount)})
	case ir.Random:
		p = typed("envoy.load_balancing_policies.random", &randomv3.Random{})
	case ir.RingHash:
		p = typed("envoy.load_balancing_policies.ring_hash", &ringhashv3.RingHash{})
	case ir.Maglev:
		p = typed("envoy.load_balancing_policies.maglev", &maglevv3.Maglev{})
	default:
		p = typed("envoy.load_balancing_policies.round_robin", &roundrobinv3.RoundRobin{})
	}
	return &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{TypedExtensionConfig: p}}}
}

// LoadAssignment builds the EDS resource of one backend.
func LoadAssignment(c *ir.Cluster) *endpointv3.ClusterLoadAssignment {
	lbs := make([]*endpointv3.LbEndpoint, 0, len(c.Endpoints))
	for _, e := range c.Endpoints {
		lbs = append(lbs, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: socketAddress(e.Address, e.Port),
			}},
			LoadBalancingWeight: wrapperspb.UInt32(e.Weight),
		})
	}
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: c.Name}
	if len(lbs) > 0 {
		cla.Endpoints = []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}
	}
	return cla
}

func socketAddress(addr string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       addr,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// Listener builds the listener of one port.
func Listener(l *ir.Listener) *listenerv3.Listener {
	var filter *listenerv3.Filter
	if l.Protocol == ir.TCP {
		filter = &listenerv3.Filter{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(tcpProxy(l))}}
	} else {
		filter = &listenerv3.Filter{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(httpConnectionManager(l))}}
	}
	return &listenerv3.Listener{
		Name:         l.Name,
		Address:      socketAddress(l.Address, l.Port),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{filter}}},
	}
}

func tcpProxy(l *ir.Listener) *tcpv3.TcpProxy {
	tp := &tcpv3.TcpProxy{StatPrefix: l.Name}
	if len(l.TCP.Clusters) == 1 {
		tp.ClusterSpecifier = &tcpv3.TcpProxy_Cluster{Cluster: l.TCP.Clusters[0].Name}
	} else {
		wc := &tcpv3.TcpProxy_WeightedCluster{}
		for _, c := range l.TCP.Clusters {
			wc.Clusters = append(wc.Clusters, &tcpv3.TcpProxy_WeightedCluster_ClusterWeight{Name: c.Name, Weight: c.Weight})
		}
		tp.ClusterSpecifier = &tcpv3.TcpProxy_WeightedClusters{WeightedClusters: wc}
	}
	for _, k := range l.TCP.HashKeys {
		if k.SourceIP {
			tp.HashPolicy = append(tp.HashPolicy, &typev3.HashPolicy{PolicySpecifier: &typev3.HashPolicy_SourceIp_{SourceIp: &typev3.HashPolicy_SourceIp{}}})
		}
	}
	return tp
}

func httpConnectionManager(l *ir.Listener) *hcmv3.HttpConnectionManager {
	return &hcmv3.HttpConnectionManager{
		StatPrefix: l.Name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    ads(0),
			RouteConfigName: l.RouteConfigName(),
		}},
		// A front load balancer: the peer address is the client, and X-Forwarded-For gets it appended.
		UseRemoteAddress: wrapperspb.Bool(true),
		// Request IDs cost a UUID per request and are only useful with tracing, which is off.
		GenerateRequestId: wrapperspb.Bool(false),
		// Clients send "host:port" on non-default ports; hostnames are matched without it.
		StripPortMode: &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name: "envoy.filters.http.router",
			// Dynamic stats add per-request stat lookups (per virtual cluster, per zone) nobody reads here.
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{DynamicStats: wrapperspb.Bool(false)})},
		}},
	}
}

// RouteConfig builds the route table of one HTTP port: one virtual host per policy.
func RouteConfig(l *ir.Listener) *routev3.RouteConfiguration {
	rc := &routev3.RouteConfiguration{
		Name: l.RouteConfigName(),
		// Routes never need a cluster that is not there yet (clusters are sent first), and validating each
		// cluster on every route update costs time at scale.
		ValidateClusters: wrapperspb.Bool(false),
	}
	for _, vh := range l.VirtualHosts {
		v := &routev3.VirtualHost{Name: vh.Name, Domains: vh.Domains}
		for _, r := range vh.Routes {
			v.Routes = append(v.Routes, route(r))
		}
		rc.VirtualHosts = append(rc.VirtualHosts, v)
	}
	return rc
}

func route(r *ir.Route) *routev3.Route {
	m := &routev3.RouteMatch{}
	if r.PathType == ir.PathExact {
		m.PathSpecifier = &routev3.RouteMatch_Path{Path: r.Path}
	} else {
		m.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: r.Path}
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, headerMatcher(h))
	}
	action := &routev3.RouteAction{Timeout: durationpb.New(r.Timeout)}
	if len(r.Clusters) == 1 {
		action.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: r.Clusters[0].Name}
	} else {
		wc := &routev3.WeightedCluster{}
		for _, c := range r.Clusters {
			wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: c.Name, Weight: wrapperspb.UInt32(c.Weight)})
		}
		action.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	for _, k := range r.HashKeys {
		if k.SourceIP {
			action.HashPolicy = append(action.HashPolicy, &routev3.RouteAction_HashPolicy{
				PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{
					ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true},
				},
			})
		}
	}
	return &routev3.Route{Name: r.Name, Match: m, Action: &routev3.Route_Route{Route: action}}
}

func headerMatcher(h ir.HeaderMatch) *routev3.HeaderMatcher {
	hm := &routev3.HeaderMatcher{Name: h.Name, InvertMatch: h.Invert}
	switch h.Type {
	case ir.HeaderPresent:
		hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}
	case ir.HeaderPrefix:
		hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: h.Value}}}
	case ir.HeaderRegex:
		hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: h.Value}}}}
	default:
		hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: h.Value}}}
	}
	return hm
}
