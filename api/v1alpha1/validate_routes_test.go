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
				{DirectResponse: &v1alpha1.DirectResponse{Status: 503, Body: "down"}},
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
	})
}
