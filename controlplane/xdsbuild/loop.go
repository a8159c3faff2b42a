package xdsbuild

import (
	"fmt"
	"sync"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	mutationrulesv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	headermutationv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// A request that loops through the same Envoys (a backend that is the Envoy's own listener, or two
// Envoys that are each other's backends) is stopped by a hop limit, as HTTP proxies do with Max-Forwards
// or Via: every HTTP listener adds a "1" to HopHeader of each request it forwards (the header is rewritten
// from its own value: Envoy's header matchers see only one line of a header sent several times), and
// answers 508 Loop Detected to a request that arrives with MaxHops of them. lbplane refuses the backends it knows to be the
// Envoy's own host (reach.Rules.Self); the limit stops the loops it cannot see (an address it does not
// know the Envoy has, a chain through other proxies). Without it one request took 3,258 hops and 6 of
// them took an Envoy to 18,802 of its 20,000 file descriptors.
const (
	HopHeader = "x-lbplane-hops"
	MaxHops   = 10
	// loopStatus is 508 Loop Detected (RFC 5842).
	loopStatus = 508
)

// LoopBody is the answer to a looping request.
var LoopBody = fmt.Sprintf("loop detected: this request passed through lbplane's Envoys %d times (%s); a backend of its route is probably this Envoy itself\n", MaxHops, HopHeader)

// hopFilters are the first HTTP filters of every listener: the check, then the count. Built once and
// shared by every listener (never modified).
var hopFilters = sync.OnceValue(func() []*hcmv3.HttpFilter {
	check := &faultv3.HTTPFault{
		Abort: &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: loopStatus},
			Percentage: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED}},
		Headers: []*routev3.HeaderMatcher{{Name: HopHeader, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
			StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{
				Regex: fmt.Sprintf(".*1{%d}.*", MaxHops)}}}}}},
	}
	// The header's value as it came ("-" when absent), and one more "1": a client can start the count
	// higher, never reset it.
	count := &headermutationv3.HeaderMutation{Mutations: &headermutationv3.Mutations{RequestMutations: []*mutationrulesv3.HeaderMutation{{
		Action: &mutationrulesv3.HeaderMutation_Append{Append: &corev3.HeaderValueOption{
			Header: &corev3.HeaderValue{Key: HopHeader, Value: "%REQ(" + HopHeader + ")%1"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}},
	}}}}
	return []*hcmv3.HttpFilter{
		{Name: "envoy.filters.http.fault", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(check)}},
		{Name: "envoy.filters.http.header_mutation", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(count)}},
	}
})

// loopReply gives the 508 of the hop limit a body that says what happened (Envoy's own is "fault filter
// abort"), and makes it an answer no hop retries. Built once and shared by every listener.
var loopReply = sync.OnceValue(func() *hcmv3.LocalReplyConfig {
	return &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{{
		Filter: &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_AndFilter{AndFilter: &accesslogv3.AndFilter{
			Filters: []*accesslogv3.AccessLogFilter{
				{FilterSpecifier: &accesslogv3.AccessLogFilter_StatusCodeFilter{StatusCodeFilter: &accesslogv3.StatusCodeFilter{
					Comparison: &accesslogv3.ComparisonFilter{Op: accesslogv3.ComparisonFilter_EQ,
						Value: &corev3.RuntimeUInt32{DefaultValue: loopStatus, RuntimeKey: "lbplane.loop_status"}}}}},
				{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: []string{"FI"}}}},
			}}}},
		Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: LoopBody}},
		// Envoy never retries an answer with x-envoy-ratelimited, even on a route that retries 5xx: each hop
		// retrying the 508 of the next would multiply the loop instead of ending it.
		HeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-envoy-ratelimited", Value: "true"},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}},
	}}}
})
