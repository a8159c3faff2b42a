package xdsbuild

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	httpratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/local_ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// Local rate limits: a TCP listener's connections, and an HTTP route's requests overall and per client.

const localRateLimitFilter = "envoy.filters.http.local_ratelimit"

// tokenBucket is Envoy's form of a bucket.
func tokenBucket(r ir.RateLimit) *typev3.TokenBucket {
	return &typev3.TokenBucket{MaxTokens: r.MaxTokens, TokensPerFill: wrapperspb.UInt32(r.Tokens), FillInterval: durationpb.New(r.Interval)}
}

// always enables or enforces a filter for every request.
func always() *corev3.RuntimeFractionalPercent {
	return &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED}}
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

// rateLimitHTTPFilter is the connection manager's local rate limit filter, off unless a route turns it on:
// each limited route carries its own bucket (typed_per_filter_config).
func rateLimitHTTPFilter(l *ir.Listener) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: localRateLimitFilter,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&httpratelimitv3.LocalRateLimit{StatPrefix: l.Name})}}
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
