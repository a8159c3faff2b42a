package v1alpha1

import (
	"regexp"
	"slices"
	"strings"
)

var (
	supportedMethods      = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
	supportedQueryTypes   = []QueryParamMatchType{QueryParamMatchExact, QueryParamMatchRegex}
	supportedRedirectPath = []RedirectPathType{RedirectReplaceFullPath, RedirectReplacePrefixMatch}
	supportedRedirectCode = []int32{301, 302, 303, 307, 308}
	// queryNameRe: a query parameter name, as Gateway API allows it (no '=', '&', '#' or white space).
	queryNameRe = regexp.MustCompile(`^[A-Za-z0-9!#$%'*+\-.^_` + "`" + `|~]+$`)
)

// MaxQueryParamMatches and MaxHeaderChanges bound a route's query matches and header changes.
const (
	MaxQueryParamMatches = 16
	MaxHeaderChanges     = 16
)

// answersAll tells whether routes is not empty and each route answers requests itself.
func answersAll(routes []Route) bool {
	for i := range routes {
		if routes[i].Redirect == nil && routes[i].DirectResponse == nil {
			return false
		}
	}
	return len(routes) > 0
}

// routeAction validates what a route does with a request: backends, a redirect or a direct response, and
// the header changes.
func (v *validator) routeAction(rp path, r *Route, backends map[string]bool) {
	actions := 0
	for _, set := range []bool{len(r.Backends) > 0, r.Redirect != nil, r.DirectResponse != nil} {
		if set {
			actions++
		}
	}
	switch {
	case actions > 1:
		v.add(rp, "set only one of backends, redirect and directResponse")
	case r.Redirect != nil:
		v.redirect(rp.child("redirect"), r)
	case r.DirectResponse != nil:
		if st := r.DirectResponse.Status; st < 200 || st > 599 {
			v.add(rp.child("directResponse").child("status"), "must be between 200 and 599, got %d", st)
		}
		if len(r.DirectResponse.Body) > maxStringLength {
			v.add(rp.child("directResponse").child("body"), "at most %d characters, got %d", maxStringLength, len(r.DirectResponse.Body))
		}
	default:
		v.routeBackends(rp.child("backends"), r.Backends, backends)
	}
	if r.ErrorWeight != nil {
		switch {
		case len(r.Backends) == 0:
			v.add(rp.child("errorWeight"), "only allowed with backends")
		case *r.ErrorWeight < 0 || *r.ErrorWeight > MaxWeight:
			v.add(rp.child("errorWeight"), "must be between 0 and %d, got %d", MaxWeight, *r.ErrorWeight)
		}
	}
	if (r.Redirect != nil || r.DirectResponse != nil) && len(r.Mirrors) > 0 {
		v.add(rp.child("mirrors"), "only allowed with backends")
	}
	v.headerModifier(rp.child("requestHeaders"), r.RequestHeaders)
	v.headerModifier(rp.child("responseHeaders"), r.ResponseHeaders)
	if rw := r.Rewrite; rw != nil {
		switch {
		case r.Redirect != nil:
			v.add(rp.child("rewrite"), "only allowed with backends: a redirect sends nothing to a backend to rewrite")
		case r.DirectResponse != nil:
			v.add(rp.child("rewrite"), "only allowed with backends: a direct response sends nothing to a backend to rewrite")
		default:
			v.hostname(rp.child("rewrite").child("hostname"), rw.Hostname)
			v.pathChange(rp.child("rewrite").child("path"), rw.Path, r.Match)
		}
	}
}

func (v *validator) redirect(p path, r *Route) {
	rd := r.Redirect
	if rd.Scheme != "" && rd.Scheme != "http" && rd.Scheme != "https" {
		v.add(p.child("scheme"), "must be http or https, got %q", clip(rd.Scheme))
	}
	v.hostname(p.child("hostname"), rd.Hostname)
	if rd.Port != nil && (*rd.Port < 1 || *rd.Port > 65535) {
		v.add(p.child("port"), "must be between 1 and 65535, got %d", *rd.Port)
	}
	if rd.StatusCode != nil && !slices.Contains(supportedRedirectCode, *rd.StatusCode) {
		v.add(p.child("statusCode"), "must be one of 301, 302, 303, 307, 308, got %d", *rd.StatusCode)
	}
	v.pathChange(p.child("path"), rd.Path, r.Match)
}

// hostname validates the host name a redirect or a rewrite sets (empty: none).
func (v *validator) hostname(p path, h string) {
	if h != "" && (strings.HasPrefix(h, "*") || !isHostname(h)) {
		v.add(p, "must be a host name, got %q", clip(h))
	}
}

// pathChange validates the path change of a redirect or a rewrite of a route that matches m.
func (v *validator) pathChange(p path, pp *RedirectPath, m RouteMatch) {
	if pp == nil {
		return
	}
	switch {
	case !oneOf(pp.Type, supportedRedirectPath):
		v.add(p.child("type"), "%s", unsupported(pp.Type, supportedRedirectPath))
	case !strings.HasPrefix(pp.Value, "/"):
		v.add(p.child("value"), "must start with \"/\", got %q", clip(pp.Value))
	case strings.ContainsAny(pp.Value, "?# \t\r\n"):
		v.add(p.child("value"), "must not contain '?', '#' or white space, got %q", clip(pp.Value))
	case pp.Type == RedirectReplacePrefixMatch && (m.Path == nil || (m.Path.Type != PathMatchPrefix && m.Path.Type != PathMatchSegmentPrefix)):
		v.add(p.child("type"), "ReplacePrefixMatch needs a Prefix or SegmentPrefix path match")
	}
}

func (v *validator) queryParams(p path, qs []QueryParamMatch) {
	if len(qs) > MaxQueryParamMatches {
		v.add(p, "at most %d query parameter matches, got %d", MaxQueryParamMatches, len(qs))
		return
	}
	for i, q := range qs {
		qp := p.index(i)
		if len(q.Name) > 256 || !queryNameRe.MatchString(q.Name) {
			v.add(qp.child("name"), "must be a query parameter name (no '=', '&' or white space, at most 256), got %q", clip(q.Name))
		}
		switch {
		case !oneOf(q.Type, supportedQueryTypes):
			v.add(qp.child("type"), "%s", unsupported(q.Type, supportedQueryTypes))
		case len(q.Value) > maxStringLength:
			v.add(qp.child("value"), "at most %d characters, got %d", maxStringLength, len(q.Value))
		case q.Type == QueryParamMatchRegex:
			if _, err := regexp.Compile(q.Value); err != nil {
				v.add(qp.child("value"), "invalid regular expression: %v", err)
			}
		}
	}
}

func (v *validator) headerModifier(p path, hm *HeaderModifier) {
	if hm == nil {
		return
	}
	seen := map[string]bool{}
	check := func(hp path, name string) {
		l := strings.ToLower(name)
		switch {
		case len(name) > 256 || !headerNameRe.MatchString(name):
			v.add(hp, "must be an HTTP header name (token characters, at most 256), got %q", clip(name))
		case l == "host": // pseudo-headers (":path") are not tokens: refused above
			v.add(hp, "the %s header cannot be changed", l)
		case seen[l]:
			v.add(hp, "header %q changed twice", l)
		}
		seen[l] = true
	}
	// In a fixed order: the same policy always gets the same errors, in the same order.
	for _, c := range []struct {
		name string
		list []HeaderValue
	}{{"set", hm.Set}, {"add", hm.Add}} {
		name, list := c.name, c.list
		if len(list) > MaxHeaderChanges {
			v.add(p.child(name), "at most %d headers, got %d", MaxHeaderChanges, len(list))
			continue
		}
		for i, h := range list {
			check(p.child(name).index(i).child("name"), h.Name)
			if len(h.Value) > maxStringLength || strings.ContainsAny(h.Value, "\r\n\x00") {
				v.add(p.child(name).index(i).child("value"), "must be at most %d characters, without CR, LF or NUL", maxStringLength)
			}
		}
	}
	if len(hm.Remove) > MaxHeaderChanges {
		v.add(p.child("remove"), "at most %d headers, got %d", MaxHeaderChanges, len(hm.Remove))
		return
	}
	for i, name := range hm.Remove {
		check(p.child("remove").index(i), name)
	}
}

// routeLimitsAndMirrors validates each route's rate limit, mirrors and retry priorities; backends are the
// names of spec.backends.
func (v *validator) routeLimitsAndMirrors(spec path, s *LoadBalancerPolicySpec, backends map[string]bool) {
	for i := range s.Routes {
		r := &s.Routes[i]
		rp := spec.child("routes").index(i)
		if r.RateLimit != nil {
			v.rateLimit(rp.child("rateLimit"), r.RateLimit)
		}
		seen := map[string]int{}
		for j, m := range r.Mirrors {
			mp := rp.child("mirrors").index(j)
			switch {
			case !backends[m.Backend]:
				v.add(mp.child("backend"), "must name a backend of spec.backends, got %q", clip(m.Backend))
			default:
				if k, dup := seen[m.Backend]; dup {
					v.add(mp.child("backend"), "duplicate mirror of %q (also at index %d)", m.Backend, k)
				}
				seen[m.Backend] = j
				for _, ref := range r.Backends {
					if ref.Name == m.Backend && *ref.Weight > 0 {
						// The backend would get both the request and its copy: side effects happen twice.
						v.add(mp.child("backend"), "%q already serves this route; a mirror must be another backend", m.Backend)
					}
				}
			}
			v.intRange(mp.child("percent"), int64(*m.Percent), 0, 100)
		}
		if rt := r.Retry; rt != nil && rt.AvoidPreviousPriorities && *rt.Attempts == 0 {
			v.add(rp.child("retry").child("avoidPreviousPriorities"), "needs attempts greater than 0")
		}
	}
}
