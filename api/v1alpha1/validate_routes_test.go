package v1alpha1_test

import (
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func TestValidateRouteActions(t *testing.T) {
	runCases(t, map[string]validateCase{
		"every action and match": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Routes = []v1alpha1.Route{
				{Match: v1alpha1.RouteMatch{Method: "POST", QueryParams: []v1alpha1.QueryParamMatch{{Name: "v", Value: "2"}, {Name: "id", Type: v1alpha1.QueryParamMatchRegex, Value: "[0-9]+"}},
					Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchRegex, Value: "/items/[0-9]+"}},
					RequestHeaders: &v1alpha1.HeaderModifier{Set: []v1alpha1.HeaderValue{{Name: "X-A", Value: "1"}}, Remove: []string{"x-b"}},
					Backends:       []v1alpha1.BackendRef{{Name: "a"}}, ErrorWeight: i32(1)},
				{Match: v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchSegmentPrefix, Value: "/old"}},
					Redirect: &v1alpha1.Redirect{Scheme: "https", Hostname: "new.example.com", Port: i32(8443), StatusCode: i32(308),
						Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplacePrefixMatch, Value: "/new"}}},
				{DirectResponse: &v1alpha1.DirectResponse{Status: 503, Body: "down"}, ResponseHeaders: &v1alpha1.HeaderModifier{Set: []v1alpha1.HeaderValue{{Name: "Retry-After", Value: "60"}}}},
				{Match: v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchSegmentPrefix, Value: "/v1"}},
					ResponseHeaders: &v1alpha1.HeaderModifier{Set: []v1alpha1.HeaderValue{{Name: "X-A", Value: "1"}}, Add: []v1alpha1.HeaderValue{{Name: "Vary", Value: "x"}}, Remove: []string{"server"}},
					Rewrite:         &v1alpha1.Rewrite{Hostname: "api.internal", Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplacePrefixMatch, Value: "/"}},
					Backends:        []v1alpha1.BackendRef{{Name: "a"}}},
				{Match: v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchExact, Value: "/old"}},
					Rewrite:  &v1alpha1.Rewrite{Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplaceFullPath, Value: "/new"}},
					Backends: []v1alpha1.BackendRef{{Name: "a"}}},
				{Rewrite: &v1alpha1.Rewrite{}, Backends: []v1alpha1.BackendRef{{Name: "a"}}},
			}
		}, nil},
		"no backends when every route answers itself": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends = nil
			p.Spec.Routes = []v1alpha1.Route{{DirectResponse: &v1alpha1.DirectResponse{Status: 404}}}
		}, nil},
		"bad actions and matches": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Routes = []v1alpha1.Route{
				{Match: v1alpha1.RouteMatch{Method: "FETCH", QueryParams: []v1alpha1.QueryParamMatch{{Name: "a=b", Value: "1"}, {Name: "r", Type: v1alpha1.QueryParamMatchRegex, Value: "("}}},
					RequestHeaders: &v1alpha1.HeaderModifier{Set: []v1alpha1.HeaderValue{{Name: "Host", Value: "x"}}, Add: []v1alpha1.HeaderValue{{Name: ":path", Value: "/"}},
						Remove: []string{"bad header"}},
					Backends: []v1alpha1.BackendRef{{Name: "a"}}, DirectResponse: &v1alpha1.DirectResponse{Status: 200}},
				{Redirect: &v1alpha1.Redirect{Scheme: "ftp", StatusCode: i32(200), Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplacePrefixMatch, Value: "/new"}}},
				{DirectResponse: &v1alpha1.DirectResponse{Status: 99}, ErrorWeight: i32(1)},
			}
		}, []string{
			`spec.routes[0].match.queryParams[0].name: must be a query parameter name (no '=', '&' or white space, at most 256), got "a=b"`,
			"spec.routes[0].match.queryParams[1].value: invalid regular expression: error parsing regexp: missing closing ): `(`",
			`spec.routes[0].match.method: unsupported value "FETCH"; supported: GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH`,
			`spec.routes[0]: set only one of backends, redirect and directResponse`,
			`spec.routes[0].requestHeaders.set[0].name: the host header cannot be changed`,
			`spec.routes[0].requestHeaders.add[0].name: must be an HTTP header name (token characters, at most 256), got ":path"`,
			`spec.routes[0].requestHeaders.remove[0]: must be an HTTP header name (token characters, at most 256), got "bad header"`,
			`spec.routes[1].redirect.scheme: must be http or https, got "ftp"`,
			`spec.routes[1].redirect.statusCode: must be one of 301, 302, 303, 307, 308, got 200`,
			`spec.routes[1].redirect.path.type: ReplacePrefixMatch needs a Prefix or SegmentPrefix path match`,
			`spec.routes[2].directResponse.status: must be between 200 and 599, got 99`,
			`spec.routes[2].errorWeight: only allowed with backends`,
		}},
		"bad response headers and rewrites": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Routes = []v1alpha1.Route{
				{ResponseHeaders: &v1alpha1.HeaderModifier{Set: []v1alpha1.HeaderValue{{Name: "Host", Value: "x"}, {Name: "X-Bad", Value: "a\nb"}},
					Add: []v1alpha1.HeaderValue{{Name: ":status", Value: "200"}, {Name: "x-bad", Value: "twice"}}, Remove: []string{"bad header"}},
					Backends: []v1alpha1.BackendRef{{Name: "a"}}},
				{Match: v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchExact, Value: "/a"}},
					Rewrite:  &v1alpha1.Rewrite{Hostname: "*.example.com", Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplacePrefixMatch, Value: "/b"}},
					Backends: []v1alpha1.BackendRef{{Name: "a"}}},
				{Rewrite: &v1alpha1.Rewrite{Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplacePrefixMatch, Value: "/b"}}, Backends: []v1alpha1.BackendRef{{Name: "a"}}},
				{Rewrite: &v1alpha1.Rewrite{Path: &v1alpha1.RedirectPath{Type: "Replace", Value: "/b"}}, Backends: []v1alpha1.BackendRef{{Name: "a"}}},
				{Rewrite: &v1alpha1.Rewrite{Hostname: "Bad_Host", Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplaceFullPath, Value: "b?c"}}, Backends: []v1alpha1.BackendRef{{Name: "a"}}},
				{Rewrite: &v1alpha1.Rewrite{Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplaceFullPath, Value: "/b?c"}}, Backends: []v1alpha1.BackendRef{{Name: "a"}}},
				{Match: v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchPrefix, Value: "/old"}},
					Rewrite:  &v1alpha1.Rewrite{Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplacePrefixMatch, Value: "/new"}},
					Redirect: &v1alpha1.Redirect{Hostname: "example.com"}},
				{Rewrite: &v1alpha1.Rewrite{Hostname: "example.com"}, DirectResponse: &v1alpha1.DirectResponse{Status: 404}},
			}
		}, []string{
			`spec.routes[0].responseHeaders.set[0].name: the host header cannot be changed`,
			`spec.routes[0].responseHeaders.set[1].value: must be at most 4096 characters, without CR, LF or NUL`,
			`spec.routes[0].responseHeaders.add[0].name: must be an HTTP header name (token characters, at most 256), got ":status"`,
			`spec.routes[0].responseHeaders.add[1].name: header "x-bad" changed twice`,
			`spec.routes[0].responseHeaders.remove[0]: must be an HTTP header name (token characters, at most 256), got "bad header"`,
			`spec.routes[1].rewrite.hostname: must be a host name, got "*.example.com"`,
			`spec.routes[1].rewrite.path.type: ReplacePrefixMatch needs a Prefix or SegmentPrefix path match`,
			`spec.routes[2].rewrite.path.type: ReplacePrefixMatch needs a Prefix or SegmentPrefix path match`,
			`spec.routes[3].rewrite.path.type: unsupported value "Replace"; supported: ReplaceFullPath, ReplacePrefixMatch`,
			`spec.routes[4].rewrite.hostname: must be a host name, got "Bad_Host"`,
			`spec.routes[4].rewrite.path.value: must start with "/", got "b?c"`,
			`spec.routes[5].rewrite.path.value: must not contain '?', '#' or white space, got "/b?c"`,
			`spec.routes[6].rewrite: only allowed with backends: a redirect sends nothing to a backend to rewrite`,
			`spec.routes[7].rewrite: only allowed with backends: a direct response sends nothing to a backend to rewrite`,
		}},
	})
}
