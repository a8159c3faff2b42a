package translate

import (
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// defaultRetry is what a route without a retry block gets (v1alpha1.ImplicitRetry).
func defaultRetry() *ir.Retry { return retryOf(v1alpha1.ImplicitRetry()) }

// retryOf is a defaulted retry block in the IR.
func retryOf(rr *v1alpha1.Retry) *ir.Retry {
	ret := &ir.Retry{Attempts: uint32(*rr.Attempts), BackoffBase: rr.Backoff.Base.Duration, BackoffMax: rr.Backoff.Max.Duration,
		AvoidPreviousHosts: *rr.AvoidPreviousHosts}
	for _, on := range rr.Conditions {
		ret.On = append(ret.On, string(on))
	}
	for _, c := range rr.StatusCodes {
		ret.StatusCodes = append(ret.StatusCodes, uint32(c))
	}
	if rr.PerTryTimeout != nil {
		ret.PerTryTimeout = rr.PerTryTimeout.Duration
	}
	return ret
}

func route(p *v1alpha1.LoadBalancerPolicy, rt *v1alpha1.Route, hashKeys map[string][]ir.HashKey) *ir.Route {
	route := &ir.Route{Name: objkey.Name(objkey.Of(p), rt.Name), PathType: ir.PathPrefix, Path: "/", Timeout: rt.Timeout.Duration}
	if pm := rt.Match.Path; pm != nil {
		route.PathType, route.Path = string(pm.Type), pm.Value
	}
	for _, h := range rt.Match.Headers {
		route.Headers = append(route.Headers, ir.HeaderMatch{Name: strings.ToLower(h.Name), Type: string(h.Type), Value: h.Value, Invert: h.Invert})
	}
	route.Method = rt.Match.Method
	for _, q := range rt.Match.QueryParams {
		route.QueryParams = append(route.QueryParams, ir.QueryParamMatch{Name: q.Name, Type: string(q.Type), Value: q.Value})
	}
	route.RequestHeaders = headerChanges(rt.RequestHeaders)
	route.ResponseHeaders = headerChanges(rt.ResponseHeaders)
	if rt.Redirect != nil || rt.DirectResponse != nil {
		route.Redirect, route.DirectResponse = redirectOf(rt), directOf(rt.DirectResponse)
		route.Timeout = 0
		return route
	}
	for _, ref := range rt.Backends {
		if *ref.Weight > 0 {
			route.Clusters = append(route.Clusters, ir.WeightedCluster{Name: clusterName(p, ref.Name), Weight: uint32(*ref.Weight)})
		}
	}
	if rt.ErrorWeight != nil {
		route.ErrorWeight = uint32(*rt.ErrorWeight)
	}
	if rw := rt.Rewrite; rw != nil {
		route.Rewrite = &ir.Rewrite{Hostname: rw.Hostname, PathChange: pathChangeOf(rw.Path)}
	}
	route.HashKeys = hashKeysFor(route.Clusters, hashKeys)
	if rt.IdleTimeout != nil {
		d := rt.IdleTimeout.Duration
		route.IdleTimeout = &d
	}
	if rr := rt.Retry; rr != nil {
		route.Retry = retryOf(rr)
	} else {
		route.Retry = defaultRetry()
	}
	if sp := rt.SessionPersistence; sp != nil {
		sess := &ir.Session{Path: sp.Path}
		if sp.Type == v1alpha1.SessionHeader {
			sess.Header = sp.Name
		} else {
			sess.Cookie = sp.Name
		}
		if sp.TTL != nil {
			d := sp.TTL.Duration
			sess.TTL = &d
		}
		route.Session = sess
	}
	routeRateLimitAndMirrors(p, route, rt)
	return route
}

// headerChanges copies a route's request or response header changes, header names in lower case as Envoy
// keeps them.
func headerChanges(hm *v1alpha1.HeaderModifier) *ir.HeaderChanges {
	if hm == nil {
		return nil
	}
	out := &ir.HeaderChanges{}
	for _, h := range hm.Set {
		out.Set = append(out.Set, ir.HeaderValue{Name: strings.ToLower(h.Name), Value: h.Value})
	}
	for _, h := range hm.Add {
		out.Add = append(out.Add, ir.HeaderValue{Name: strings.ToLower(h.Name), Value: h.Value})
	}
	for _, name := range hm.Remove {
		out.Remove = append(out.Remove, strings.ToLower(name))
	}
	return out
}

// redirectOf is a route's redirect, with the status defaulted to 302.
func redirectOf(rt *v1alpha1.Route) *ir.Redirect {
	rd := rt.Redirect
	if rd == nil {
		return nil
	}
	out := &ir.Redirect{Scheme: rd.Scheme, Hostname: rd.Hostname, StatusCode: 302}
	if rd.Port != nil {
		out.Port = uint32(*rd.Port)
	}
	if rd.StatusCode != nil {
		out.StatusCode = uint32(*rd.StatusCode)
	}
	out.PathChange = pathChangeOf(rd.Path)
	return out
}

// pathChangeOf is how a redirect or a rewrite changes the path; none when pp is nil.
func pathChangeOf(pp *v1alpha1.RedirectPath) ir.PathChange {
	switch {
	case pp == nil:
		return ir.PathChange{}
	case pp.Type == v1alpha1.RedirectReplaceFullPath:
		return ir.PathChange{FullPath: pp.Value}
	}
	return ir.PathChange{PrefixRewrite: pp.Value, HasPrefix: true}
}

func directOf(d *v1alpha1.DirectResponse) *ir.DirectResponse {
	if d == nil {
		return nil
	}
	return &ir.DirectResponse{Status: uint32(d.Status), Body: d.Body}
}

// routeRateLimitAndMirrors adds a route's rate limit, mirrors and retry priorities.
func routeRateLimitAndMirrors(p *v1alpha1.LoadBalancerPolicy, route *ir.Route, rt *v1alpha1.Route) {
	if rl := rt.RateLimit; rl != nil {
		r := rateLimit(rl)
		r.Headers = rl.Headers
		route.RateLimit = &r
		if c := rl.PerClient; c != nil {
			route.ClientRateLimit = &ir.ClientRateLimit{MaxClients: uint32(*c.MaxClients),
				Bucket: ir.RateLimit{Tokens: uint32(c.Requests), MaxTokens: uint32(*c.Burst), Interval: c.Interval.Duration}}
		}
	}
	for _, m := range rt.Mirrors {
		if *m.Percent > 0 {
			route.Mirrors = append(route.Mirrors, ir.Mirror{Cluster: clusterName(p, m.Backend), Percent: uint32(*m.Percent)})
		}
	}
	if rr := rt.Retry; rr != nil && rr.AvoidPreviousPriorities && route.Retry != nil {
		route.Retry.AvoidPreviousPriorities = true
	}
}
