package xdsbuild

import (
	"regexp"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	statefulsessionv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/stateful_session/v3"
	cookiesessionv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/stateful_session/cookie/v3"
	headersessionv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/stateful_session/header/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previousprioritiesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/type/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// RouteConfig builds the route table of one HTTP port: one virtual host per policy.
func RouteConfig(l *ir.Listener) *routev3.RouteConfiguration {
	rc := &routev3.RouteConfiguration{
		Name: l.RouteConfigName(),
		// Routes never need a cluster that is not there yet (clusters are sent first), and validating each
		// cluster on every route update costs time at scale.
		ValidateClusters: wrapperspb.Bool(false),
		// Clients send "host:port" on non-default ports; virtual hosts are picked without the port, and the
		// Host header reaches the backend as the client sent it.
		IgnorePortInHostMatching: true,
	}
	for _, vh := range l.VirtualHosts {
		v := &routev3.VirtualHost{Name: vh.Name, Domains: vh.Domains, Metadata: sourceMetadata(vh.Source)}
		if vh.UpstreamHostHeader != "" {
			// %UPSTREAM_HOST% is the address:port Envoy picked (the last try's, after retries).
			v.ResponseHeadersToAdd = []*corev3.HeaderValueOption{{
				Header:       &corev3.HeaderValue{Key: vh.UpstreamHostHeader, Value: "%UPSTREAM_HOST%"},
				AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
			}}
		}
		for _, r := range vh.Routes {
			v.Routes = append(v.Routes, route(r))
		}
		rc.VirtualHosts = append(rc.VirtualHosts, v)
	}
	return rc
}

func route(r *ir.Route) *routev3.Route {
	m := routeMatch(r)
	if r.Redirect != nil || r.DirectResponse != nil {
		return answeringRoute(r, m)
	}
	action := &routev3.RouteAction{Timeout: durationpb.New(r.Timeout), HashPolicy: hashPolicies(r.HashKeys), RetryPolicy: retryPolicy(r.Retry)}
	if r.IdleTimeout != nil {
		action.IdleTimeout = durationpb.New(*r.IdleTimeout)
	}
	if len(r.Clusters) == 1 && r.ErrorWeight == 0 {
		action.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: r.Clusters[0].Name}
	} else {
		wc := &routev3.WeightedCluster{}
		for _, c := range r.Clusters {
			wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: c.Name, Weight: wrapperspb.UInt32(c.Weight)})
		}
		if r.ErrorWeight > 0 {
			// A cluster Envoy does not have: its share is answered 500.
			wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: ir.ErrorCluster, Weight: wrapperspb.UInt32(r.ErrorWeight)})
			action.ClusterNotFoundResponseCode = routev3.RouteAction_INTERNAL_SERVER_ERROR
		}
		action.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	if r.Rewrite != nil {
		rewrite(r, action)
	}
	out := &routev3.Route{Name: r.Name, Match: m, Action: &routev3.Route_Route{Route: action}}
	out.RequestHeadersToAdd, out.RequestHeadersToRemove = headerChanges(r.RequestHeaders)
	out.ResponseHeadersToAdd, out.ResponseHeadersToRemove = headerChanges(r.ResponseHeaders)
	if s := r.Session; s != nil {
		out.TypedPerFilterConfig = map[string]*anypb.Any{statefulSessionFilter: mustAny(&statefulsessionv3.StatefulSessionPerRoute{
			Override: &statefulsessionv3.StatefulSessionPerRoute_StatefulSession{StatefulSession: &statefulsessionv3.StatefulSession{SessionState: sessionState(s)}},
		})}
	}
	routeMirrorsAndLimits(r, action, out)
	return out
}

func sessionState(s *ir.Session) *corev3.TypedExtensionConfig {
	if s.Header != "" {
		return typed("envoy.http.stateful_session.header", &headersessionv3.HeaderBasedSessionState{Name: s.Header})
	}
	c := &httpv3.Cookie{Name: s.Cookie, Path: s.Path}
	if s.TTL != nil {
		c.Ttl = durationpb.New(*s.TTL)
	}
	return typed("envoy.http.stateful_session.cookie", &cookiesessionv3.CookieBasedSessionState{Cookie: c})
}

func hashPolicies(keys []ir.HashKey) []*routev3.RouteAction_HashPolicy {
	var out []*routev3.RouteAction_HashPolicy
	for _, k := range keys {
		hp := &routev3.RouteAction_HashPolicy{Terminal: k.Terminal}
		switch {
		case k.SourceIP:
			hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_ConnectionProperties_{
				ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}
		case k.Header != "":
			h := &routev3.RouteAction_HashPolicy_Header{HeaderName: k.Header}
			if k.StripQuery {
				// Envoy hashes the rewritten value: the path up to its first '?'.
				h.RegexRewrite = &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: `\?.*`}, Substitution: ""}
			}
			hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_Header_{Header: h}
		case k.QueryParameter != "":
			hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_QueryParameter_{
				QueryParameter: &routev3.RouteAction_HashPolicy_QueryParameter{Name: k.QueryParameter}}
		case k.Cookie != nil:
			c := &routev3.RouteAction_HashPolicy_Cookie{Name: k.Cookie.Name}
			if k.Cookie.Generate {
				c.Ttl, c.Path = durationpb.New(k.Cookie.TTL), k.Cookie.Path
				if k.Cookie.Secure {
					c.Attributes = append(c.Attributes, &routev3.RouteAction_HashPolicy_CookieAttribute{Name: "Secure"})
				}
				if k.Cookie.SameSite != "" {
					c.Attributes = append(c.Attributes, &routev3.RouteAction_HashPolicy_CookieAttribute{Name: "SameSite", Value: k.Cookie.SameSite})
				}
			}
			hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_Cookie_{Cookie: c}
		default:
			continue
		}
		out = append(out, hp)
	}
	return out
}

func retryPolicy(r *ir.Retry) *routev3.RetryPolicy {
	if r == nil {
		return nil
	}
	rp := &routev3.RetryPolicy{
		RetryOn:              strings.Join(r.On, ","),
		NumRetries:           wrapperspb.UInt32(r.Attempts),
		RetriableStatusCodes: r.StatusCodes,
		RetryBackOff:         &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(r.BackoffBase), MaxInterval: durationpb.New(r.BackoffMax)},
	}
	if r.PerTryTimeout > 0 {
		rp.PerTryTimeout = durationpb.New(r.PerTryTimeout)
	}
	if r.AvoidPreviousHosts {
		rp.RetryHostPredicate = []*routev3.RetryPolicy_RetryHostPredicate{{Name: "envoy.retry_host_predicates.previous_hosts",
			ConfigType: &routev3.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: mustAny(&previoushostsv3.PreviousHostsPredicate{})}}}
		// Picks are random with some algorithms; a few tries make landing on a fresh host near certain.
		rp.HostSelectionRetryMaxAttempts = 5
	}
	return rp
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

// routeMatch builds what a route matches: its path, headers, method and query parameters.
func routeMatch(r *ir.Route) *routev3.RouteMatch {
	m := &routev3.RouteMatch{}
	switch r.PathType {
	case ir.PathExact:
		m.PathSpecifier = &routev3.RouteMatch_Path{Path: r.Path}
	case ir.PathRegex:
		m.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: r.Path}}
	case ir.PathSegmentPrefix:
		// Whole segments: "/foo" matches "/foo" and "/foo/...", not "/foobar". Envoy wants no trailing '/'.
		if p := strings.TrimRight(r.Path, "/"); p != "" {
			m.PathSpecifier = &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: p}
		} else {
			m.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/"}
		}
	default:
		m.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: r.Path}
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, headerMatcher(h))
	}
	if r.Method != "" {
		m.Headers = append(m.Headers, headerMatcher(ir.HeaderMatch{Name: ":method", Type: ir.HeaderExact, Value: r.Method}))
	}
	for _, q := range r.QueryParams {
		sm := &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: q.Value}}
		if q.Type == ir.HeaderRegex {
			sm.MatchPattern = &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: q.Value}}
		}
		m.QueryParameters = append(m.QueryParameters, &routev3.QueryParameterMatcher{Name: q.Name,
			QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: sm}})
	}
	return m
}

// answeringRoute is a route Envoy answers itself: a redirect or a direct response.
func answeringRoute(r *ir.Route, m *routev3.RouteMatch) *routev3.Route {
	out := &routev3.Route{Name: r.Name, Match: m}
	// Envoy adds a route's response headers to the answers it makes itself too; request headers have no
	// request to go to.
	out.ResponseHeadersToAdd, out.ResponseHeadersToRemove = headerChanges(r.ResponseHeaders)
	if d := r.DirectResponse; d != nil {
		dr := &routev3.DirectResponseAction{Status: d.Status}
		if d.Body != "" {
			dr.Body = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: d.Body}}
		}
		out.Action = &routev3.Route_DirectResponse{DirectResponse: dr}
		return out
	}
	rd := r.Redirect
	ra := &routev3.RedirectAction{HostRedirect: rd.Hostname, PortRedirect: rd.Port}
	if rd.Scheme != "" {
		ra.SchemeRewriteSpecifier = &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: rd.Scheme}
	}
	switch {
	case rd.FullPath != "":
		ra.PathRewriteSpecifier = &routev3.RedirectAction_PathRedirect{PathRedirect: rd.FullPath}
	case rd.HasPrefix:
		switch prefix, rw := prefixChange(r, rd.PrefixRewrite); {
		case rw != nil:
			ra.PathRewriteSpecifier = &routev3.RedirectAction_RegexRewrite{RegexRewrite: rw}
		case prefix != "":
			ra.PathRewriteSpecifier = &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: prefix}
		}
	}
	switch rd.StatusCode {
	case 301:
		ra.ResponseCode = routev3.RedirectAction_MOVED_PERMANENTLY
	case 303:
		ra.ResponseCode = routev3.RedirectAction_SEE_OTHER
	case 307:
		ra.ResponseCode = routev3.RedirectAction_TEMPORARY_REDIRECT
	case 308:
		ra.ResponseCode = routev3.RedirectAction_PERMANENT_REDIRECT
	default:
		ra.ResponseCode = routev3.RedirectAction_FOUND
	}
	out.Action = &routev3.Route_Redirect{Redirect: ra}
	return out
}

// headerChanges is a route's request or response header changes, as the headers to add (set: overwritten)
// and to remove.
func headerChanges(hc *ir.HeaderChanges) (add []*corev3.HeaderValueOption, remove []string) {
	if hc == nil {
		return nil, nil
	}
	for _, h := range hc.Set {
		add = append(add, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: h.Name, Value: h.Value},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD})
	}
	for _, h := range hc.Add {
		add = append(add, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: h.Name, Value: h.Value},
			AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD})
	}
	return add, slices.Clone(hc.Remove)
}

// rewrite sets how the route changes the request's host name and path before it goes upstream.
func rewrite(r *ir.Route, action *routev3.RouteAction) {
	rw := r.Rewrite
	if rw.Hostname != "" {
		action.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: rw.Hostname}
	}
	switch {
	case rw.FullPath != "":
		// The whole path; Envoy matches and rewrites the path without its query, which is kept.
		action.RegexRewrite = &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "^/.*$"}, Substitution: substitution(rw.FullPath)}
	case rw.HasPrefix:
		action.PrefixRewrite, action.RegexRewrite = prefixChange(r, rw.PrefixRewrite)
	}
}

// prefixChange is how Envoy replaces, with value, the prefix the route's path match matched: the one rule
// of a redirect's and a rewrite's ReplacePrefixMatch. A Prefix match's prefix is replaced as a string
// (prefix_rewrite). A SegmentPrefix match's is replaced by whole segments, as Gateway API's PathPrefix is,
// trailing slashes of either ignored: with "/foo" replaced by "/xyz", "/foo/bar" becomes "/xyz/bar", "/foo"
// "/xyz" and "/foo/" "/xyz/"; by "/", "/foo/bar" becomes "/bar" and "/foo" "/" (not "//bar" and "", which
// prefix_rewrite would make: a regex_rewrite says it). With the match "/", which is no segment, "/bar"
// becomes "/xyz/bar" and "/" "/xyz/".
func prefixChange(r *ir.Route, value string) (string, *matcherv3.RegexMatchAndSubstitute) {
	if r.PathType != ir.PathSegmentPrefix {
		return value, nil
	}
	matched, with := strings.TrimRight(r.Path, "/"), strings.TrimRight(value, "/")
	switch {
	case matched == "":
		return with + "/", nil // the match is the prefix "/" (routeMatch)
	case with == "":
		return "", &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "^" + regexp.QuoteMeta(matched) + "/*"}, Substitution: "/"}
	}
	return "", &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "^" + regexp.QuoteMeta(matched) + "(/.*)?$"},
		Substitution: substitution(with) + `\1`}
}

// substitution is s as the literal text of a regex_rewrite's substitution, where a backslash starts a
// capture group's number.
func substitution(s string) string { return strings.ReplaceAll(s, `\`, `\\`) }

// routeMirrorsAndLimits adds a route's rate limit, mirrors and retry priority.
func routeMirrorsAndLimits(r *ir.Route, action *routev3.RouteAction, out *routev3.Route) {
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
