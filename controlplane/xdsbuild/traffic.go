package xdsbuild

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	httpratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/local_ratelimit/v3"
	cswrrv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/client_side_weighted_round_robin/v3"
	previousprioritiesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	upstreamproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lbplane/lbplane/controlplane/ir"
)

const localRateLimitFilter = "envoy.filters.http.local_ratelimit"

func tokenBucket(r ir.RateLimit) *typev3.TokenBucket {
	return &typev3.TokenBucket{MaxTokens: r.MaxTokens, TokensPerFill: wrapperspb.UInt32(r.Tokens), FillInterval: durationpb.New(r.Interval)}
}

func always() *corev3.RuntimeFractionalPercent {
	return &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED}}
}

// trafficListener adds the PROXY protocol listener filter (first: it must read the header before TLS
// inspection or any byte reaches a filter chain) and, on TCP, the connection rate limit.
func trafficListener(l *ir.Listener, out *listenerv3.Listener) {
	if !l.Edge.AcceptProxyProtocol {
		return
	}
	pp := &listenerv3.ListenerFilter{Name: "envoy.filters.listener.proxy_protocol", ConfigType: &listenerv3.ListenerFilter_TypedConfig{
		TypedConfig: mustAny(&proxyprotocolv3.ProxyProtocol{AllowRequestsWithoutProxyProtocol: l.Edge.ProxyProtocolOptional, StatPrefix: l.Name})}}
	out.ListenerFilters = append([]*listenerv3.ListenerFilter{pp}, out.ListenerFilters...)
}

// connectionRateLimit goes before tcp_proxy, so that a connection without a token is closed before any
// upstream connection is made.
func connectionRateLimit(l *ir.Listener, filters []*listenerv3.Filter) []*listenerv3.Filter {
	r := l.Edge.ConnectionRateLimit
	if l.Protocol != ir.TCP || r.Tokens == 0 {
		return filters
	}
	f := &listenerv3.Filter{Name: "envoy.filters.network.local_ratelimit", ConfigType: &listenerv3.Filter_TypedConfig{
		TypedConfig: mustAny(&netratelimitv3.LocalRateLimit{StatPrefix: l.Name, TokenBucket: tokenBucket(r)})}}
	out := make([]*listenerv3.Filter, 0, len(filters)+1)
	out = append(out, filters[:len(filters)-1]...)
	return append(out, f, filters[len(filters)-1])
}

func usesRateLimit(l *ir.Listener) bool {
	for _, vh := range l.VirtualHosts {
		for _, r := range vh.Routes {
			if r.RateLimit != nil {
				return true
			}
		}
	}
	return false
}

// rateLimitHTTPFilter is the connection manager's local rate limit filter, off unless a route turns it on:
// each limited route carries its own bucket (typed_per_filter_config).
func rateLimitHTTPFilter(l *ir.Listener) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: localRateLimitFilter,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&httpratelimitv3.LocalRateLimit{StatPrefix: l.Name})}}
}

// trafficRoute adds a route's rate limit, mirrors and retry priority.
func trafficRoute(r *ir.Route, action *routev3.RouteAction, out *routev3.Route) {
	for _, m := range r.Mirrors {
		action.RequestMirrorPolicies = append(action.RequestMirrorPolicies, &routev3.RouteAction_RequestMirrorPolicy{Cluster: m.Cluster,
			RuntimeFraction: &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: m.Percent, Denominator: typev3.FractionalPercent_HUNDRED}}})
	}
	if rt := r.Retry; rt != nil && rt.AvoidPreviousPriorities && action.RetryPolicy != nil {
		action.RetryPolicy.RetryPriority = &routev3.RetryPolicy_RetryPriority{Name: "envoy.retry_priorities.previous_priorities",
			ConfigType: &routev3.RetryPolicy_RetryPriority_TypedConfig{TypedConfig: mustAny(&previousprioritiesv3.PreviousPrioritiesConfig{UpdateFrequency: 1})}}
	}
	if rl := r.RateLimit; rl != nil {
		if out.TypedPerFilterConfig == nil {
			out.TypedPerFilterConfig = map[string]*anypb.Any{}
		}
		out.TypedPerFilterConfig[localRateLimitFilter] = mustAny(&httpratelimitv3.LocalRateLimit{StatPrefix: "route", TokenBucket: tokenBucket(*rl),
			FilterEnabled: always(), FilterEnforced: always()})
	}
}

// trafficCluster adds per-endpoint stats, the connection lifetime, the PROXY protocol and the client
// certificate's place in the cluster.
func trafficCluster(c *ir.Cluster, out *clusterv3.Cluster) {
	if c.PerEndpointStats {
		out.TrackClusterStats = &clusterv3.TrackClusterStats{PerEndpointStats: true}
	}
	if c.ProxyProtocol == "" {
		return
	}
	inner := out.TransportSocket
	if inner == nil {
		inner = &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(&rawbufferv3.RawBuffer{})}}
	}
	version := corev3.ProxyProtocolConfig_V2
	if c.ProxyProtocol == "V1" {
		version = corev3.ProxyProtocolConfig_V1
	}
	out.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.upstream_proxy_protocol", ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: mustAny(&upstreamproxyv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{Version: version}, TransportSocket: inner})}}
}

func utilizationPolicy(c *ir.Cluster) *corev3.TypedExtensionConfig {
	u := c.Utilization
	cfg := &cswrrv3.ClientSideWeightedRoundRobin{}
	if u != nil {
		cfg.BlackoutPeriod = durationpb.New(u.BlackoutPeriod)
		cfg.WeightUpdatePeriod = durationpb.New(u.WeightUpdatePeriod)
		cfg.WeightExpirationPeriod = durationpb.New(u.WeightExpirationPeriod)
		cfg.ErrorUtilizationPenalty = wrapperspb.Float(float32(u.ErrorUtilizationPenalty))
	}
	return typed("envoy.load_balancing_policies.client_side_weighted_round_robin", cfg)
}
