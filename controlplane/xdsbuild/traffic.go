package xdsbuild

import (
	"net/netip"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
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
// inspection or any byte reaches a filter chain) and restricts the listener to the trusted senders.
//
// Every filter chain matches on direct_source_prefix_ranges: the connection's own peer, which the PROXY
// header does not change (source_prefix_ranges would match the address the header claims). A connection from
// elsewhere matches no chain and Envoy closes it, before any network filter has seen the claimed address. A
// default filter chain would catch it, so the default becomes a chain that matches only on the source (an
// empty server_names matches any SNI, after the chains that name theirs).
func trafficListener(l *ir.Listener, out *listenerv3.Listener) {
	if !l.Edge.AcceptProxyProtocol {
		return
	}
	pp := &listenerv3.ListenerFilter{Name: "envoy.filters.listener.proxy_protocol", ConfigType: &listenerv3.ListenerFilter_TypedConfig{
		TypedConfig: mustAny(&proxyprotocolv3.ProxyProtocol{AllowRequestsWithoutProxyProtocol: l.Edge.ProxyProtocolOptional, StatPrefix: l.Name})}}
	out.ListenerFilters = append([]*listenerv3.ListenerFilter{pp}, out.ListenerFilters...)
	if d := out.DefaultFilterChain; d != nil {
		out.FilterChains = append(out.FilterChains, d)
		out.DefaultFilterChain = nil
	}
	var ranges []*corev3.CidrRange
	for _, c := range strings.Split(l.Edge.ProxyProtocolTrusted, ",") {
		pfx, err := netip.ParsePrefix(c)
		if err != nil {
			continue // validated by the API; a prefix that does not parse trusts nobody
		}
		ranges = append(ranges, &corev3.CidrRange{AddressPrefix: pfx.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(pfx.Bits()))})
	}
	if len(ranges) == 0 {
		// Nothing trusted: a range no connection comes from, so that every connection is closed.
		ranges = []*corev3.CidrRange{{AddressPrefix: "0.0.0.0", PrefixLen: wrapperspb.UInt32(32)}}
	}
	for _, fc := range out.FilterChains {
		if fc.FilterChainMatch == nil {
			fc.FilterChainMatch = &listenerv3.FilterChainMatch{}
		}
		fc.FilterChainMatch.DirectSourcePrefixRanges = ranges
	}
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
		out.TypedPerFilterConfig[localRateLimitFilter] = mustAny(routeRateLimit(rl, r.ClientRateLimit))
	}
}

// routeRateLimit is a route's local rate limit: its own bucket (the filter's default bucket) and, with a
// per-client limit, a bucket per client address. The remote_address action makes one descriptor entry from
// the downstream address; the descriptor with that key and no value is a wildcard, for which Envoy creates a
// bucket per distinct address, up to max_dynamic_descriptors (an LRU). The route's bucket is consumed too
// (always_consume_default_token_bucket), so a request needs a token from both.
func routeRateLimit(rl *ir.RateLimit, client *ir.ClientRateLimit) *httpratelimitv3.LocalRateLimit {
	out := &httpratelimitv3.LocalRateLimit{StatPrefix: "route", TokenBucket: tokenBucket(*rl), FilterEnabled: always(), FilterEnforced: always()}
	if rl.Headers {
		out.EnableXRatelimitHeaders = ratelimitcommonv3.XRateLimitHeadersRFCVersion_DRAFT_VERSION_03
	}
	if client != nil {
		out.RateLimits = []*routev3.RateLimit{{Actions: []*routev3.RateLimit_Action{{
			ActionSpecifier: &routev3.RateLimit_Action_RemoteAddress_{RemoteAddress: &routev3.RateLimit_Action_RemoteAddress{}}}}}}
		out.Descriptors = []*ratelimitcommonv3.LocalRateLimitDescriptor{{
			Entries:     []*ratelimitcommonv3.RateLimitDescriptor_Entry{{Key: "remote_address"}},
			TokenBucket: tokenBucket(client.Bucket)}}
		out.AlwaysConsumeDefaultTokenBucket = wrapperspb.Bool(true)
		out.MaxDynamicDescriptors = wrapperspb.UInt32(client.MaxClients)
	}
	return out
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
