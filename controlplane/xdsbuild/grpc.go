package xdsbuild

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// The gRPC profile: what a group's proxyless gRPC clients (grpc-go, grpc-java, grpc-c++ reading xDS
// themselves, `xds:///host:port`) are served instead of the Envoy resources. gRPC reads the same types with
// its own rules (gRFC A27, A28, A42, A52; grpc-go's xdsresource unmarshallers), which are stricter than
// Envoy's in some places and ignore much of the rest:
//   - a client asks for the listener named after its target, so every exact host name of an HTTP port is an
//     API listener "host:port" with its one virtual host inline, behind the router filter only;
//   - every locality has a locality and a weight (a locality without one is refused, one without a weight
//     ignored): the weight is 1, or the zone's weight when the backend has zone weights;
//   - load balancing policies a gRPC client lacks get a fallback it has, after them in the same list (a
//     client takes the first it supports): Maglev → ring hash, Random → round robin; zone weights wrap the
//     policy in wrr_locality, the policy gRPC weighs localities with;
//   - a route's timeout is max_stream_duration, its retry conditions gRPC status codes (UNAVAILABLE is what a
//     gRPC client sees for every failure Envoy's conditions name); hashing reads headers (metadata) only;
//   - what a gRPC client cannot take is left out and named by GRPCRefused: backends with upstream TLS
//     (gRPC wants certificate provider instances, lbplane sends SDS secrets), backends of host names (an
//     Envoy-only DNS cluster) and backends sent a PROXY header (an Envoy transport socket). lint.GRPC
//     reports each per policy field, with what gRPC ignores.
// Envoy's own resources do not change: the profile is built from the same IR by the same builders, and
// adapted here.

// GRPCRefused says why a cluster is not served to gRPC clients, or "" when it is.
func GRPCRefused(c *ir.Cluster) string {
	switch {
	case c.TLS != nil:
		return "upstream TLS is sent as SDS secrets, which gRPC clients refuse (they take certificate provider instances)"
	case c.DNS != nil:
		return "backends of host names are resolved by Envoy (a DNS cluster), which gRPC clients do not have"
	case c.ProxyProtocol != "":
		return "a PROXY protocol header is sent by an Envoy transport socket, which gRPC clients refuse"
	}
	return ""
}

// GRPC builds the gRPC profile of a group (see above), validated, as a state ready to publish.
func GRPC(g *ir.Group) (*xdscache.State, error) {
	out := map[string][]proto.Message{}
	served := map[string]bool{}
	for _, c := range g.Clusters {
		if GRPCRefused(c) != "" {
			continue
		}
		served[c.Name] = true
		out[resource.ClusterType] = append(out[resource.ClusterType], grpcCluster(c))
		out[resource.EndpointType] = append(out[resource.EndpointType], grpcLoadAssignment(c))
	}
	for _, l := range g.Listeners {
		if l.Protocol != ir.HTTP {
			continue // a gRPC client speaks HTTP/2 only
		}
		for _, vh := range l.VirtualHosts {
			for _, d := range vh.Domains {
				if strings.Contains(d, "*") {
					continue // a client asks for one name; a wildcard matches none it can ask for
				}
				out[resource.ListenerType] = append(out[resource.ListenerType], grpcListener(l, vh, d, served))
			}
		}
	}
	for _, list := range out {
		for _, m := range list {
			if v, ok := m.(interface{ ValidateAll() error }); ok {
				if err := v.ValidateAll(); err != nil {
					return nil, fmt.Errorf("gRPC profile: %s: %w", xdsName(m), err)
				}
			}
		}
	}
	return xdscache.NewState(out)
}

// GRPCListenerName is the listener a gRPC client dialing xds:///host:port asks for.
func GRPCListenerName(host string, port uint32) string {
	return net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10))
}

func grpcCluster(c *ir.Cluster) *clusterv3.Cluster {
	out := Cluster(c)
	p := out.GetLoadBalancingPolicy().GetPolicies()
	for _, pol := range p {
		// gRPC takes xxHash named: Envoy's DEFAULT_HASH is xxHash too, but gRPC refuses the name.
		rh := &ringhashv3.RingHash{}
		if tc := pol.GetTypedExtensionConfig(); tc.GetTypedConfig().MessageIs(rh) && tc.GetTypedConfig().UnmarshalTo(rh) == nil {
			rh.HashFunction = ringhashv3.RingHash_XX_HASH
			tc.TypedConfig = mustAny(rh)
		}
	}
	var fallback *corev3.TypedExtensionConfig
	switch c.Algorithm {
	case ir.Maglev:
		rh := &ringhashv3.RingHash{HashFunction: ringhashv3.RingHash_XX_HASH}
		if c.MaglevTableSize > 0 {
			// The ring as fine as the Maglev table was.
			rh.MinimumRingSize = wrapperspb.UInt64(c.MaglevTableSize)
		}
		fallback = typed("envoy.load_balancing_policies.ring_hash", rh)
	case ir.Random:
		fallback = typed("envoy.load_balancing_policies.round_robin", &roundrobinv3.RoundRobin{})
	}
	if fallback != nil {
		p = append(p, &clusterv3.LoadBalancingPolicy_Policy{TypedExtensionConfig: fallback})
	}
	if len(c.ZoneWeights) > 0 && c.Algorithm != ir.RingHash && c.Algorithm != ir.Maglev {
		// gRPC weighs localities only under wrr_locality, with the endpoint picking policy inside it.
		child := proto.Clone(p[len(p)-1].GetTypedExtensionConfig()).(*corev3.TypedExtensionConfig)
		p = append([]*clusterv3.LoadBalancingPolicy_Policy{{TypedExtensionConfig: typed("envoy.load_balancing_policies.wrr_locality",
			&wrrlocalityv3.WrrLocality{EndpointPickingPolicy: &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{TypedExtensionConfig: child}}}})}}, p...)
	}
	out.LoadBalancingPolicy = &clusterv3.LoadBalancingPolicy{Policies: p}
	return out
}

func grpcLoadAssignment(c *ir.Cluster) *endpointv3.ClusterLoadAssignment {
	cla := LoadAssignment(c)
	for _, loc := range cla.Endpoints {
		if loc.Locality == nil {
			loc.Locality = &corev3.Locality{}
		}
		if loc.LoadBalancingWeight == nil && len(c.ZoneWeights) == 0 {
			loc.LoadBalancingWeight = wrapperspb.UInt32(1)
		}
	}
	return cla
}

// grpcListener is the API listener of one host name of an HTTP port, its virtual host inline.
func grpcListener(l *ir.Listener, vh *ir.VirtualHost, host string, served map[string]bool) *listenerv3.Listener {
	name := GRPCListenerName(host, l.Port)
	v := &routev3.VirtualHost{Name: vh.Name, Domains: []string{name, host}}
	for _, r := range vh.Routes {
		if rt := grpcRoute(r, served); rt != nil {
			v.Routes = append(v.Routes, rt)
		}
	}
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix:     l.Name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{v}}},
		HttpFilters:    []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})}}},
	}
	return &listenerv3.Listener{Name: name, ApiListener: &listenerv3.ApiListener{ApiListener: mustAny(hcm)}}
}

// grpcRoute is a route as a gRPC client reads it: Envoy's match, and an action of what gRPC reads. A route
// whose clusters are none of those served is left out (its calls would fail on a missing cluster).
func grpcRoute(r *ir.Route, served map[string]bool) *routev3.Route {
	env := route(r)
	a := &routev3.RouteAction{RetryPolicy: grpcRetryPolicy(r.Retry)}
	for _, hp := range env.GetRoute().GetHashPolicy() {
		// gRPC hashes metadata: the path and authority pseudo-headers are not in it.
		if h := hp.GetHeader(); h != nil && !strings.HasPrefix(h.HeaderName, ":") {
			a.HashPolicy = append(a.HashPolicy, hp)
		}
	}
	if r.Timeout > 0 {
		a.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(r.Timeout)}
	}
	wc := &routev3.WeightedCluster{}
	for _, c := range r.Clusters {
		if served[c.Name] && (c.Weight > 0 || len(r.Clusters) == 1) {
			wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: c.Name, Weight: wrapperspb.UInt32(max(c.Weight, 1))})
		}
	}
	switch len(wc.Clusters) {
	case 0:
		return nil
	case 1:
		a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: wc.Clusters[0].Name}
	default:
		a.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	return &routev3.Route{Name: env.Name, Match: env.Match, Action: &routev3.Route_Route{Route: a}}
}

// grpcRetryPolicy: every condition lbplane retries on (a refused or reset connection or stream, a 5xx, a
// gateway error, a 429/502/503/504 status) reaches a gRPC client as UNAVAILABLE. gRPC wants at least one
// retry; a route that retries none gets no policy.
func grpcRetryPolicy(r *ir.Retry) *routev3.RetryPolicy {
	if r == nil || r.Attempts == 0 || len(r.On) == 0 {
		return nil
	}
	rp := &routev3.RetryPolicy{RetryOn: "unavailable", NumRetries: wrapperspb.UInt32(r.Attempts)}
	if r.BackoffBase > 0 {
		rp.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(r.BackoffBase)}
		if r.BackoffMax >= r.BackoffBase {
			rp.RetryBackOff.MaxInterval = durationpb.New(r.BackoffMax)
		}
	}
	return rp
}
