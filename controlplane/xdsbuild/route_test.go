package xdsbuild_test

import (
	"regexp"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
)

// envoyPathChange does to path what Envoy does with a route's prefix_rewrite or regex_rewrite: the prefix its
// match matched replaced, or every match of the pattern substituted (\N a capture group, \\ a backslash).
func envoyPathChange(t *testing.T, m *routev3.RouteMatch, prefix string, rw *matcherv3.RegexMatchAndSubstitute, path string) string {
	t.Helper()
	switch {
	case rw != nil:
		var subst strings.Builder
		s := rw.GetSubstitution()
		for i := 0; i < len(s); i++ {
			switch {
			case s[i] == '\\' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
				subst.WriteString("${" + s[i+1:i+2] + "}")
				i++
			case s[i] == '\\' && i+1 < len(s) && s[i+1] == '\\':
				subst.WriteByte('\\')
				i++
			case s[i] == '\\':
				t.Fatalf("substitution %q: Envoy refuses a lone backslash", s)
			case s[i] == '$':
				subst.WriteString("$$")
			default:
				subst.WriteByte(s[i])
			}
		}
		return regexp.MustCompile(rw.GetPattern().GetRegex()).ReplaceAllString(path, subst.String())
	case prefix != "":
		matched := m.GetPrefix() + m.GetPathSeparatedPrefix()
		if !strings.HasPrefix(path, matched) {
			t.Fatalf("%s does not match %s", path, matched)
		}
		return prefix + path[len(matched):]
	}
	return path
}

// prefixCases are Gateway API's table of ReplacePrefixMatch (HTTPPathModifier), with its empty replacement
// written "/" as lbplane's paths start with "/", and lbplane's own Prefix match (a string prefix).
var prefixCases = []struct {
	matchType, match, replace, path, want string
}{
	{ir.PathSegmentPrefix, "/foo", "/xyz", "/foo/bar", "/xyz/bar"},
	{ir.PathSegmentPrefix, "/foo", "/xyz/", "/foo/bar", "/xyz/bar"},
	{ir.PathSegmentPrefix, "/foo/", "/xyz", "/foo/bar", "/xyz/bar"},
	{ir.PathSegmentPrefix, "/foo/", "/xyz/", "/foo/bar", "/xyz/bar"},
	{ir.PathSegmentPrefix, "/foo", "/xyz", "/foo", "/xyz"},
	{ir.PathSegmentPrefix, "/foo", "/xyz", "/foo/", "/xyz/"},
	{ir.PathSegmentPrefix, "/foo", "/", "/foo/bar", "/bar"},
	{ir.PathSegmentPrefix, "/foo", "/", "/foo/", "/"},
	{ir.PathSegmentPrefix, "/foo", "/", "/foo", "/"},
	{ir.PathSegmentPrefix, "/foo/", "/", "/foo/bar", "/bar"},
	{ir.PathSegmentPrefix, "/prefix/one", "/one", "/prefix/one/two", "/one/two"},
	// The prefix "/" is no segment: the whole path follows the replacement.
	{ir.PathSegmentPrefix, "/", "/xyz", "/bar", "/xyz/bar"},
	{ir.PathSegmentPrefix, "/", "/xyz/", "/", "/xyz/"},
	{ir.PathSegmentPrefix, "/", "/", "/bar/", "/bar/"},
	// A replacement is literal text, whatever it holds.
	{ir.PathSegmentPrefix, "/a.b", `/x\1$1`, "/a.b/c", `/x\1$1/c`},
	{ir.PathPrefix, "/foo", "/xyz", "/foo/bar", "/xyz/bar"},
	{ir.PathPrefix, "/foo", "/xyz", "/foobar", "/xyzbar"},
	{ir.PathPrefix, "/foo/", "/", "/foo/bar", "/bar"},
}

// A redirect's ReplacePrefixMatch replaces the matched prefix as Gateway API says, by whole segments for a
// SegmentPrefix match (its PathPrefix).
func TestRedirectReplacesThePrefixMatch(t *testing.T) {
	for _, c := range prefixCases {
		r := &ir.Route{Name: "r", PathType: c.matchType, Path: c.match,
			Redirect: &ir.Redirect{PathChange: ir.PathChange{PrefixRewrite: c.replace, HasPrefix: true}, StatusCode: 302}}
		built := xdsbuild.RouteConfig(&ir.Listener{VirtualHosts: []*ir.VirtualHost{{Name: "v", Domains: []string{"*"}, Routes: []*ir.Route{r}}}}).VirtualHosts[0].Routes[0]
		if err := built.ValidateAll(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		rd := built.GetRedirect()
		if got := envoyPathChange(t, built.GetMatch(), rd.GetPrefixRewrite(), rd.GetRegexRewrite(), c.path); got != c.want {
			t.Errorf("%s %s replaced by %s: %s redirects to %s, want %s", c.matchType, c.match, c.replace, c.path, got, c.want)
		}
	}
}

// builtRoute builds one route as its route table would hold it, checked against Envoy's proto rules.
func builtRoute(t *testing.T, r *ir.Route) *routev3.Route {
	t.Helper()
	built := xdsbuild.RouteConfig(&ir.Listener{VirtualHosts: []*ir.VirtualHost{{Name: "v", Domains: []string{"*"}, Routes: []*ir.Route{r}}}}).VirtualHosts[0].Routes[0]
	if err := built.ValidateAll(); err != nil {
		t.Fatalf("%+v: %v", r, err)
	}
	return built
}

// A rewrite's ReplacePrefixMatch replaces the prefix as a redirect's does; its ReplaceFullPath replaces the
// whole path (Envoy keeps the query aside); its hostname is the Host sent upstream.
func TestRewriteChangesThePathAndHost(t *testing.T) {
	for _, c := range prefixCases {
		r := &ir.Route{Name: "r", PathType: c.matchType, Path: c.match, Clusters: []ir.WeightedCluster{{Name: "c", Weight: 1}},
			Rewrite: &ir.Rewrite{PathChange: ir.PathChange{PrefixRewrite: c.replace, HasPrefix: true}}}
		a := builtRoute(t, r).GetRoute()
		if got := envoyPathChange(t, builtRoute(t, r).GetMatch(), a.GetPrefixRewrite(), a.GetRegexRewrite(), c.path); got != c.want {
			t.Errorf("%s %s replaced by %s: %s is sent as %s, want %s", c.matchType, c.match, c.replace, c.path, got, c.want)
		}
	}
	for _, c := range []struct{ full, path string }{{"/one", "/full/one/two"}, {"/", "/full"}, {`/a\1$1`, "/full/x"}} {
		r := &ir.Route{Name: "r", PathType: ir.PathSegmentPrefix, Path: "/full", Clusters: []ir.WeightedCluster{{Name: "c", Weight: 1}},
			Rewrite: &ir.Rewrite{Hostname: "backend.internal", PathChange: ir.PathChange{FullPath: c.full}}}
		built := builtRoute(t, r)
		a := built.GetRoute()
		if got := envoyPathChange(t, built.GetMatch(), a.GetPrefixRewrite(), a.GetRegexRewrite(), c.path); got != c.full {
			t.Errorf("ReplaceFullPath %s: %s is sent as %s", c.full, c.path, got)
		}
		if a.GetHostRewriteLiteral() != "backend.internal" {
			t.Errorf("host rewrite %v, want backend.internal", a.GetHostRewriteSpecifier())
		}
	}
	// Nothing is rewritten where nothing is asked.
	if a := builtRoute(t, &ir.Route{Name: "r", PathType: ir.PathPrefix, Path: "/", Clusters: []ir.WeightedCluster{{Name: "c", Weight: 1}},
		Rewrite: &ir.Rewrite{}}).GetRoute(); a.GetPrefixRewrite() != "" || a.GetRegexRewrite() != nil || a.GetHostRewriteSpecifier() != nil {
		t.Errorf("an empty rewrite builds %v", a)
	}
}

// Response header changes are on the route, whether a backend answers or Envoy does: set overwrites, add
// appends, remove removes.
func TestResponseHeadersOnEveryKindOfRoute(t *testing.T) {
	hc := &ir.HeaderChanges{Set: []ir.HeaderValue{{Name: "x-set", Value: "1"}}, Add: []ir.HeaderValue{{Name: "x-add", Value: "2"}}, Remove: []string{"server"}}
	for _, r := range []*ir.Route{
		{Name: "backend", PathType: ir.PathPrefix, Path: "/", Clusters: []ir.WeightedCluster{{Name: "c", Weight: 1}}, ResponseHeaders: hc},
		{Name: "redirect", PathType: ir.PathPrefix, Path: "/", Redirect: &ir.Redirect{Hostname: "example.com", StatusCode: 301}, ResponseHeaders: hc},
		{Name: "direct", PathType: ir.PathPrefix, Path: "/", DirectResponse: &ir.DirectResponse{Status: 503}, ResponseHeaders: hc},
	} {
		built := builtRoute(t, r)
		add := built.GetResponseHeadersToAdd()
		if len(add) != 2 || add[0].GetHeader().GetKey() != "x-set" || add[0].GetAppendAction().String() != "OVERWRITE_IF_EXISTS_OR_ADD" ||
			add[1].GetHeader().GetKey() != "x-add" || add[1].GetAppendAction().String() != "APPEND_IF_EXISTS_OR_ADD" ||
			len(built.GetResponseHeadersToRemove()) != 1 || built.GetResponseHeadersToRemove()[0] != "server" {
			t.Errorf("%s: response headers to add %v, to remove %v", r.Name, add, built.GetResponseHeadersToRemove())
		}
		if len(built.GetRequestHeadersToAdd()) != 0 {
			t.Errorf("%s: request headers %v", r.Name, built.GetRequestHeadersToAdd())
		}
	}
}
