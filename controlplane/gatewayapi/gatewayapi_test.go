package gatewayapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// Every translation of the tests checks the HTTPRoute rules it records against the routes it made.

func class() *gwv1.GatewayClass {
	return &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "lbplane", Generation: 2}, Spec: gwv1.GatewayClassSpec{ControllerName: ControllerName}}
}

func gw(ns, name string, listeners ...gwv1.Listener) *gwv1.Gateway {
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 3, CreationTimestamp: metav1.NewTime(t0)},
		Spec: gwv1.GatewaySpec{GatewayClassName: "lbplane", Listeners: listeners}}
}

func httpListener(name string, port int32, host string) gwv1.Listener {
	l := gwv1.Listener{Name: gwv1.SectionName(name), Port: gwv1.PortNumber(port), Protocol: gwv1.HTTPProtocolType}
	if host != "" {
		l.Hostname = ptr(gwv1.Hostname(host))
	}
	return l
}

func route(ns, name string, age int, parent string, hosts []string, rules ...gwv1.HTTPRouteRule) *gwv1.HTTPRoute {
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 5, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))}}
	pns, pname, _ := strings.Cut(parent, "/")
	r.Spec.ParentRefs = []gwv1.ParentReference{{Name: gwv1.ObjectName(pname), Namespace: ptr(gwv1.Namespace(pns))}}
	for _, h := range hosts {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gwv1.Hostname(h))
	}
	r.Spec.Rules = rules
	return r
}

func toService(ns, name string, port int32) gwv1.HTTPBackendRef {
	ref := gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr(gwv1.PortNumber(port))}}}
	if ns != "" {
		ref.Namespace = ptr(gwv1.Namespace(ns))
	}
	return ref
}

func prefix(p string) gwv1.HTTPRouteMatch {
	return gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr(p)}}
}

func input(gws []*gwv1.Gateway, routes ...*gwv1.HTTPRoute) Input {
	return Input{ProxyGroup: "default", Address: "0.0.0.0", Ports: []int32{20000, 20001, 20002, 20003},
		Classes: []*gwv1.GatewayClass{class()}, Gateways: gws, Routes: routes,
		Namespaces: map[string]map[string]string{"infra": {"team": "infra"}, "apps": {"team": "apps"}, "other": {}},
		Services:   map[types.NamespacedName][]int32{{Namespace: "apps", Name: "web"}: {80}, {Namespace: "infra", Name: "web"}: {80}, {Namespace: "apps", Name: "api"}: {8080}}}
}

// valid checks that every policy made passes the policy validation, as the engine will check it.
func valid(t *testing.T, out *Output) {
	t.Helper()
	for _, p := range out.Policies {
		c := p.DeepCopy()
		v1alpha1.Default(c)
		if errs := v1alpha1.Validate(c); len(errs) > 0 {
			t.Fatalf("policy %s/%s is not valid: %v", p.Namespace, p.Name, errs)
		}
		recordsItsOrigin(t, p)
	}
}

// recordsItsOrigin checks that a policy names its listeners and the HTTPRoute rule of every route (see
// AnnotationRules): lbctl trace and the dashboard read them.
func recordsItsOrigin(t *testing.T, p *v1alpha1.LoadBalancerPolicy) {
	t.Helper()
	s, ok := ServedBy(p)
	if !ok || len(s.Listeners) == 0 {
		t.Fatalf("policy %s/%s does not say what it serves: %v", p.Namespace, p.Name, p.Annotations)
	}
	rules, err := RulesOf(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.Routes) == 1 && p.Spec.Routes[0].Name == "none" {
		if rules != nil {
			t.Fatalf("policy %s/%s with nothing attached names rules %v", p.Namespace, p.Name, rules)
		}
		return
	}
	for _, r := range p.Spec.Routes {
		if _, ok := rules[r.Name]; !ok {
			t.Fatalf("policy %s/%s: route %s has no HTTPRoute rule recorded (%s: %q)", p.Namespace, p.Name, r.Name, AnnotationRules, p.Annotations[AnnotationRules])
		}
	}
	if len(rules) != len(p.Spec.Routes) {
		t.Fatalf("policy %s/%s: %d rules recorded for %d routes", p.Namespace, p.Name, len(rules), len(p.Spec.Routes))
	}
}

func parentCond(t *testing.T, out *Output, route, typ string) metav1.Condition {
	t.Helper()
	ns, name, _ := strings.Cut(route, "/")
	ps := out.Routes[types.NamespacedName{Namespace: ns, Name: name}]
	if len(ps) == 0 {
		t.Fatalf("route %s has no parent status", route)
	}
	c := meta.FindStatusCondition(ps[0].Conditions, typ)
	if c == nil {
		t.Fatalf("route %s has no %s condition: %+v", route, typ, ps[0].Conditions)
	}
	return *c
}

func policyFor(t *testing.T, out *Output, host string) *v1alpha1.LoadBalancerPolicy {
	t.Helper()
	for _, p := range out.Policies {
		if p.Annotations[AnnotationHostname] == host {
			return p
		}
	}
	t.Fatalf("no policy for host name %q among %d", host, len(out.Policies))
	return nil
}

func TestIntersect(t *testing.T) {
	for _, tc := range []struct {
		listener string
		route    []string
		want     []string
	}{
		{"", nil, []string{""}},
		{"", []string{"a.example.com"}, []string{"a.example.com"}},
		{"a.example.com", nil, []string{"a.example.com"}},
		{"*.example.com", []string{"a.example.com", "b.other.com"}, []string{"a.example.com"}},
		{"*.example.com", []string{"example.com"}, nil},
		{"a.example.com", []string{"*.example.com"}, []string{"a.example.com"}},
		{"*.example.com", []string{"*.a.example.com"}, []string{"*.a.example.com"}},
		{"*.a.example.com", []string{"*.example.com"}, []string{"*.a.example.com"}},
		{"a.example.com", []string{"b.example.com"}, nil},
		{"*.example.com", []string{"x.y.example.com"}, []string{"x.y.example.com"}},
	} {
		var hs []gwv1.Hostname
		for _, h := range tc.route {
			hs = append(hs, gwv1.Hostname(h))
		}
		if got := intersect(tc.listener, hs); !slices.Equal(got, tc.want) {
			t.Errorf("intersect(%q, %v) = %q, want %q", tc.listener, tc.route, got, tc.want)
		}
	}
}

func TestPrecedenceAcrossRoutesOfAHostName(t *testing.T) {
	g := gw("infra", "gw", httpListener("http", 80, ""))
	g.Spec.Listeners[0].AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr(gwv1.NamespacesFromAll)}}
	exact := gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchExact), Value: ptr("/a")}}
	method := prefix("/a")
	method.Method = ptr(gwv1.HTTPMethodPost)
	headers := prefix("/a")
	headers.Headers = []gwv1.HTTPHeaderMatch{{Name: "x-a", Value: "1"}, {Name: "x-b", Value: "2"}}
	oneHeader := prefix("/a")
	oneHeader.Headers = []gwv1.HTTPHeaderMatch{{Name: "x-a", Value: "1"}}
	query := prefix("/a")
	query.QueryParams = []gwv1.HTTPQueryParamMatch{{Name: "q", Value: "1"}}
	be := []gwv1.HTTPBackendRef{toService("", "web", 80)}
	// The newest route carries the most specific matches; an older one the same prefix with nothing else.
	newest := route("apps", "newest", 9, "infra/gw", nil, gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{exact, query, oneHeader, headers, method}, BackendRefs: be})
	older := route("apps", "older", 1, "infra/gw", nil, gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix("/a")}, BackendRefs: be},
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix("/a/longer")}, BackendRefs: be})
	sameAgeB := route("apps", "b", 5, "infra/gw", nil, gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix("/b")}, BackendRefs: be})
	sameAgeA := route("apps", "a", 5, "infra/gw", nil, gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix("/b")}, BackendRefs: be})
	out := Translate(input([]*gwv1.Gateway{g}, newest, older, sameAgeB, sameAgeA))
	valid(t, out)
	p := policyFor(t, out, "")
	var got []string
	for _, r := range p.Spec.Routes {
		m := r.Match
		got = append(got, fmt.Sprintf("%s %s m=%s h=%d q=%d", m.Path.Type, m.Path.Value, m.Method, len(m.Headers), len(m.QueryParams)))
	}
	want := []string{
		"Exact /a m= h=0 q=0",
		"SegmentPrefix /a/longer m= h=0 q=0",
		"SegmentPrefix /a m=POST h=0 q=0",
		"SegmentPrefix /a m= h=2 q=0",
		"SegmentPrefix /a m= h=1 q=0",
		"SegmentPrefix /a m= h=0 q=1",
		"SegmentPrefix /a m= h=0 q=0", // the older route's
		"SegmentPrefix /b m= h=0 q=0", // apps/a before apps/b: same age, by name
		"SegmentPrefix /b m= h=0 q=0",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("routes in order:\n%q\nwant\n%q", got, want)
	}
	// Each route says which rule and match of which HTTPRoute it was made of.
	rules, err := RulesOf(p)
	if err != nil {
		t.Fatal(err)
	}
	var origins []string
	for _, r := range p.Spec.Routes {
		origins = append(origins, rules[r.Name].String())
	}
	wantOrigins := []string{
		"HTTPRoute apps/newest spec.rules[0].matches[0]",
		"HTTPRoute apps/older spec.rules[1].matches[0]",
		"HTTPRoute apps/newest spec.rules[0].matches[4]",
		"HTTPRoute apps/newest spec.rules[0].matches[3]",
		"HTTPRoute apps/newest spec.rules[0].matches[2]",
		"HTTPRoute apps/newest spec.rules[0].matches[1]",
		"HTTPRoute apps/older spec.rules[0].matches[0]",
		"HTTPRoute apps/a spec.rules[0].matches[0]",
		"HTTPRoute apps/b spec.rules[0].matches[0]",
	}
	if !slices.Equal(origins, wantOrigins) {
		t.Fatalf("origins:\n%q\nwant\n%q", origins, wantOrigins)
	}
}

func TestFiftyRoutesToOneServiceShareOneBackend(t *testing.T) {
	g := gw("apps", "gw", httpListener("http", 80, "shop.example.com"))
	var routes []*gwv1.HTTPRoute
	for i := range 50 {
		routes = append(routes, route("apps", fmt.Sprintf("r%02d", i), i, "apps/gw", nil,
			gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix(fmt.Sprintf("/p%d", i))}, BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}))
	}
	out := Translate(input([]*gwv1.Gateway{g}, routes...))
	valid(t, out)
	p := policyFor(t, out, "shop.example.com")
	if len(p.Spec.Routes) != 50 || len(p.Spec.Backends) != 1 {
		t.Fatalf("%d routes over %d backends, want 50 over 1", len(p.Spec.Routes), len(p.Spec.Backends))
	}
	if got := out.Gateways[types.NamespacedName{Namespace: "apps", Name: "gw"}].Status.Listeners[0].AttachedRoutes; got != 50 {
		t.Fatalf("attachedRoutes %d, want 50", got)
	}
}

func TestAllowedRoutes(t *testing.T) {
	same := httpListener("same", 80, "same.example.com")
	all := httpListener("all", 80, "all.example.com")
	all.AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr(gwv1.NamespacesFromAll)}}
	sel := httpListener("sel", 80, "sel.example.com")
	sel.AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr(gwv1.NamespacesFromSelector),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "apps"}}}}
	kinds := httpListener("kinds", 81, "")
	kinds.AllowedRoutes = &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Kind: "TCPRoute"}}}
	g := gw("infra", "gw", same, all, sel, kinds)
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}
	fromApps := route("apps", "from-apps", 1, "infra/gw", nil, rule)
	fromOther := route("other", "from-other", 2, "infra/gw", nil, rule)
	fromOther.Spec.ParentRefs[0].SectionName = ptr(gwv1.SectionName("same"))
	fromInfra := route("infra", "from-infra", 3, "infra/gw", []string{"same.example.com"}, rule)
	toKinds := route("infra", "to-kinds", 4, "infra/gw", nil, rule)
	toKinds.Spec.ParentRefs[0].SectionName = ptr(gwv1.SectionName("kinds"))
	noSection := route("infra", "no-section", 5, "infra/gw", nil, rule)
	noSection.Spec.ParentRefs[0].SectionName = ptr(gwv1.SectionName("nope"))
	noHost := route("infra", "no-host", 6, "infra/gw", []string{"elsewhere.example.org"}, rule)
	in := input([]*gwv1.Gateway{g}, fromApps, fromOther, fromInfra, toKinds, noSection, noHost)
	in.Services[types.NamespacedName{Namespace: "other", Name: "web"}] = []int32{80}
	out := Translate(in)
	valid(t, out)
	st := out.Gateways[types.NamespacedName{Namespace: "infra", Name: "gw"}].Status
	attached := map[gwv1.SectionName]int32{}
	for _, l := range st.Listeners {
		attached[l.Name] = l.AttachedRoutes
	}
	// from-apps: all and sel (apps has team=apps); from-infra: same (and all's host does not match
	// same.example.com); from-other: nothing (only the hostname of same, which takes its own namespace).
	want := map[gwv1.SectionName]int32{"same": 1, "all": 1, "sel": 1, "kinds": 0}
	for k, v := range want {
		if attached[k] != v {
			t.Errorf("listener %s: attachedRoutes %d, want %d (all: %v)", k, attached[k], v, attached)
		}
	}
	if c := parentCond(t, out, "other/from-other", "Accepted"); c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.RouteReasonNotAllowedByListeners) {
		t.Errorf("from-other: %+v", c)
	}
	if c := parentCond(t, out, "apps/from-apps", "Accepted"); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 5 {
		t.Errorf("from-apps: %+v", c)
	}
	if c := parentCond(t, out, "infra/to-kinds", "Accepted"); c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.RouteReasonNotAllowedByListeners) {
		t.Errorf("to-kinds: %+v", c)
	}
	if c := parentCond(t, out, "infra/no-section", "Accepted"); c.Reason != string(gwv1.RouteReasonNoMatchingParent) {
		t.Errorf("no-section: %+v", c)
	}
	if c := parentCond(t, out, "infra/no-host", "Accepted"); c.Reason != string(gwv1.RouteReasonNoMatchingListenerHostname) {
		t.Errorf("no-host: %+v", c)
	}
	for _, l := range st.Listeners {
		if l.Name != "kinds" {
			continue
		}
		rr := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionResolvedRefs))
		if rr == nil || rr.Status != metav1.ConditionFalse || rr.Reason != string(gwv1.ListenerReasonInvalidRouteKinds) || len(l.SupportedKinds) != 0 {
			t.Errorf("listener kinds: %+v, supportedKinds %v", rr, l.SupportedKinds)
		}
	}
}

func TestListenerIsolation(t *testing.T) {
	g := gw("apps", "gw", httpListener("wild", 80, "*.example.com"), httpListener("foo", 80, "foo.example.com"), httpListener("any", 80, ""))
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}
	wild := route("apps", "wild", 1, "apps/gw", nil, rule)
	wild.Spec.ParentRefs[0].SectionName = ptr(gwv1.SectionName("wild"))
	// A route of the wildcard listener names foo.example.com: the foo listener owns that name.
	wildFoo := route("apps", "wild-foo", 2, "apps/gw", []string{"foo.example.com", "bar.example.com"}, rule)
	wildFoo.Spec.ParentRefs[0].SectionName = ptr(gwv1.SectionName("wild"))
	out := Translate(input([]*gwv1.Gateway{g}, wild, wildFoo))
	valid(t, out)
	foo := policyFor(t, out, "foo.example.com")
	if len(foo.Spec.Routes) != 1 || foo.Spec.Routes[0].DirectResponse == nil || foo.Spec.Routes[0].DirectResponse.Status != 404 {
		t.Fatalf("foo.example.com serves %+v, want only a 404", foo.Spec.Routes)
	}
	// bar.example.com is served by both routes of the wildcard listener.
	if bar := policyFor(t, out, "bar.example.com"); len(bar.Spec.Routes) != 2 || len(bar.Spec.Routes[0].Backends) != 1 {
		t.Fatalf("bar.example.com serves %+v", bar.Spec.Routes)
	}
	if w := policyFor(t, out, "*.example.com"); len(w.Spec.Routes) != 1 || len(w.Spec.Routes[0].Backends) != 1 {
		t.Fatalf("*.example.com serves %+v", w.Spec.Routes)
	}
	policyFor(t, out, "") // the listener without a host name answers too (404)
}

func TestInvalidBackendsGet500(t *testing.T) {
	g := gw("apps", "gw", httpListener("http", 80, ""))
	good := toService("", "web", 80)
	good.Weight = ptr(int32(3))
	missing := toService("", "gone", 80)
	otherNS := toService("infra", "web", 80)
	kind := toService("", "web", 80)
	kind.Kind = ptr(gwv1.Kind("Pod"))
	r := route("apps", "r", 1, "apps/gw", nil,
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix("/mixed")}, BackendRefs: []gwv1.HTTPBackendRef{good, missing}},
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix("/none")}, BackendRefs: []gwv1.HTTPBackendRef{otherNS, kind}},
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix("/empty")}})
	out := Translate(input([]*gwv1.Gateway{g}, r))
	valid(t, out)
	p := policyFor(t, out, "")
	byPath := map[string]v1alpha1.Route{}
	for _, rt := range p.Spec.Routes {
		byPath[rt.Match.Path.Value] = rt
	}
	if m := byPath["/mixed"]; m.ErrorWeight == nil || *m.ErrorWeight != 1 || len(m.Backends) != 1 || *m.Backends[0].Weight != 3 {
		t.Errorf("/mixed: %+v", m)
	}
	for _, path := range []string{"/none", "/empty"} {
		if m := byPath[path]; m.DirectResponse == nil || m.DirectResponse.Status != 500 || len(m.Backends) != 0 {
			t.Errorf("%s: %+v", path, m)
		}
	}
	if c := parentCond(t, out, "apps/r", "ResolvedRefs"); c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.RouteReasonBackendNotFound) {
		t.Errorf("ResolvedRefs: %+v", c)
	}
	// A ReferenceGrant in infra lets apps' routes name infra/web.
	in := input([]*gwv1.Gateway{g}, route("apps", "cross", 1, "apps/gw", nil, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{otherNS}}))
	out = Translate(in)
	if c := parentCond(t, out, "apps/cross", "ResolvedRefs"); c.Reason != string(gwv1.RouteReasonRefNotPermitted) {
		t.Errorf("without a grant: %+v", c)
	}
	in.Grants = []*gwv1.ReferenceGrant{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "g"}, Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}},
		To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Service"}}}}}
	out = Translate(in)
	valid(t, out)
	if c := parentCond(t, out, "apps/cross", "ResolvedRefs"); c.Status != metav1.ConditionTrue {
		t.Errorf("with a grant: %+v", c)
	}
	if p := policyFor(t, out, ""); len(p.Spec.Backends) != 1 || p.Spec.Backends[0].Service.Namespace != "infra" {
		t.Errorf("with a grant: backends %+v", p.Spec.Backends)
	}
}

func TestFiltersAndStatus(t *testing.T) {
	g := gw("apps", "gw", httpListener("http", 80, ""), httpListener("dup", 82, "x.example.com"), httpListener("dup2", 82, "x.example.com"), httpListener("tls", 443, ""))
	g.Spec.Listeners[3].Protocol = gwv1.TLSProtocolType
	r := route("apps", "r", 1, "apps/gw", nil,
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix("/old")}, Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: ptr("https"), StatusCode: ptr(301),
				Path: &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/new")}}}}},
		gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "X-Set", Value: "1"}}, Remove: []string{"x-drop"}}}},
			BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}})
	in := input([]*gwv1.Gateway{g}, r)
	in.Services[types.NamespacedName{Namespace: "apps", Name: "web"}] = []int32{80}
	out := Translate(in)
	valid(t, out)
	st := out.Gateways[types.NamespacedName{Namespace: "apps", Name: "gw"}].Status
	conds := map[gwv1.SectionName]map[string]metav1.Condition{}
	for _, l := range st.Listeners {
		conds[l.Name] = map[string]metav1.Condition{}
		for _, c := range l.Conditions {
			conds[l.Name][c.Type] = c
		}
	}
	if c := conds["dup"]["Conflicted"]; c.Status != metav1.ConditionTrue || c.Reason != string(gwv1.ListenerReasonHostnameConflict) {
		t.Errorf("dup: %+v", c)
	}
	if c := conds["tls"]["Accepted"]; c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.ListenerReasonUnsupportedProtocol) {
		t.Errorf("tls: %+v", c)
	}
	if c := conds["http"]["Accepted"]; c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 {
		t.Errorf("http: %+v", c)
	}
	// Programmed waits for the Envoys.
	g2 := out.Gateways[types.NamespacedName{Namespace: "apps", Name: "gw"}]
	ip := gwv1.IPAddressType
	addr := []gwv1.GatewayStatusAddress{{Type: &ip, Value: "198.51.100.7"}}
	pending := g2.Programmed(func(types.NamespacedName) (bool, string) { return false, "waiting for 1 Envoy" }, addr)
	if c := meta.FindStatusCondition(pending.Conditions, "Programmed"); c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonPending) {
		t.Errorf("pending: %+v", c)
	}
	done := g2.Programmed(func(types.NamespacedName) (bool, string) { return true, "" }, addr)
	if c := meta.FindStatusCondition(done.Conditions, "Programmed"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("programmed: %+v", c)
	}
	p := policyFor(t, out, "")
	var redirect, headers *v1alpha1.Route
	for i := range p.Spec.Routes {
		if p.Spec.Routes[i].Redirect != nil {
			redirect = &p.Spec.Routes[i]
		}
		if p.Spec.Routes[i].RequestHeaders != nil {
			headers = &p.Spec.Routes[i]
		}
	}
	if redirect == nil || redirect.Redirect.Scheme != "https" || *redirect.Redirect.StatusCode != 301 || redirect.Redirect.Path.Value != "/new" {
		t.Errorf("redirect: %+v", redirect)
	}
	if headers == nil || headers.RequestHeaders.Set[0].Name != "X-Set" || headers.RequestHeaders.Remove[0] != "x-drop" {
		t.Errorf("headers: %+v", headers)
	}
	if c := out.Classes["lbplane"].Conditions; len(c) != 2 || c[0].Status != metav1.ConditionTrue || c[1].Type != "SupportedVersion" || c[0].ObservedGeneration != 2 {
		t.Errorf("class: %+v", c)
	}
	// status.supportedFeatures: every feature, sorted by name, the core ones among them.
	fs := out.Classes["lbplane"].SupportedFeatures
	if len(fs) != len(Features) || !slices.IsSortedFunc(fs, func(a, b gwv1.SupportedFeature) int { return strings.Compare(string(a.Name), string(b.Name)) }) ||
		!slices.Contains(fs, gwv1.SupportedFeature{Name: "HTTPRoute"}) || !slices.Contains(fs, gwv1.SupportedFeature{Name: "HTTPRouteRequestMirror"}) {
		t.Errorf("supportedFeatures: %v", fs)
	}
}

func TestEachGatewayGetsItsOwnEnvoyPorts(t *testing.T) {
	var gws []*gwv1.Gateway
	for i := range 3 {
		gws = append(gws, gw("apps", fmt.Sprintf("gw%d", i), httpListener("http", 80, "")))
	}
	out := Translate(input(gws))
	seen := map[int32]bool{}
	for k, g := range out.Gateways {
		if len(g.Ports) != 1 || g.Ports[0].Port != 80 || seen[g.Ports[0].EnvoyPort] || g.Ports[0].EnvoyPort == 0 {
			t.Fatalf("%s ports %+v (taken: %v)", k, g.Ports, seen)
		}
		seen[g.Ports[0].EnvoyPort] = true
	}
	// The same input gives the same ports.
	again := Translate(input(gws))
	for k, g := range out.Gateways {
		if again.Gateways[k].Ports[0] != g.Ports[0] {
			t.Fatalf("%s: %+v then %+v", k, g.Ports, again.Gateways[k].Ports)
		}
	}
}

func httpsListener(name string, port int32, host string, secretNS, secret string, kind string) gwv1.Listener {
	l := httpListener(name, port, host)
	l.Protocol = gwv1.HTTPSProtocolType
	ref := gwv1.SecretObjectReference{Name: gwv1.ObjectName(secret)}
	if secretNS != "" {
		ref.Namespace = ptr(gwv1.Namespace(secretNS))
	}
	if kind != "" {
		ref.Kind = ptr(gwv1.Kind(kind))
	}
	l.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{ref}}
	return l
}

func listenerCond(t *testing.T, out *Output, gateway, listener, typ string) metav1.Condition {
	t.Helper()
	ns, name, _ := strings.Cut(gateway, "/")
	g := out.Gateways[types.NamespacedName{Namespace: ns, Name: name}]
	if g == nil {
		t.Fatalf("no Gateway %s", gateway)
	}
	st := g.Programmed(func(types.NamespacedName) (bool, string) { return true, "" }, []gwv1.GatewayStatusAddress{{Value: "198.51.100.1"}})
	for _, l := range st.Listeners {
		if string(l.Name) == listener {
			if c := meta.FindStatusCondition(l.Conditions, typ); c != nil {
				return *c
			}
			t.Fatalf("listener %s of %s has no %s condition: %+v", listener, gateway, typ, l.Conditions)
		}
	}
	t.Fatalf("Gateway %s has no listener %s", gateway, listener)
	return metav1.Condition{}
}

// An HTTPS listener terminates TLS with the certificate of the Secret it names, served for each host name
// the listener owns on its port (SNI); a reference of another kind, to a missing or broken Secret, or to
// another namespace without a ReferenceGrant leaves the listener unserved, with the reason in ResolvedRefs.
func TestHTTPSListeners(t *testing.T) {
	usable := map[types.NamespacedName]string{{Namespace: "apps", Name: "cert"}: "", {Namespace: "other", Name: "cert"}: "", {Namespace: "apps", Name: "broken"}: "Secret apps/broken: tls: failed to find any PEM data in certificate input"}
	g := gw("apps", "gw",
		httpsListener("any", 443, "", "", "cert", ""),
		httpsListener("foo", 443, "foo.example.com", "", "cert", ""),
		httpsListener("missing", 8443, "", "", "nope", ""),
		httpsListener("broken", 8444, "", "", "broken", ""),
		httpsListener("kind", 8445, "", "", "cert", "ConfigMap"),
		httpsListener("elsewhere", 8446, "", "infra", "cert", ""),
		httpsListener("granted", 8447, "", "other", "cert", ""))
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}
	in := input([]*gwv1.Gateway{g}, route("apps", "web", 1, "apps/gw", nil, rule))
	in.Ports = []int32{20000, 20001, 20002, 20003, 20004, 20005, 20006}
	in.Grants = []*gwv1.ReferenceGrant{{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "certs"}, Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "Gateway", Namespace: "apps"}},
		To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Secret", Name: ptr(gwv1.ObjectName("cert"))}}}}}
	in.Secret = func(n types.NamespacedName) string {
		if msg, ok := usable[n]; ok {
			return msg
		}
		return fmt.Sprintf("Secret %s/%s of type kubernetes.io/tls not found", n.Namespace, n.Name)
	}
	out := Translate(in)
	valid(t, out)
	for _, host := range []string{"", "foo.example.com"} {
		p := policyFor(t, out, host)
		l := p.Spec.Listener
		if l.Protocol != v1alpha1.ProtocolHTTPS || l.TLS == nil || len(l.TLS.Certificates) != 1 || l.TLS.Certificates[0].SecretName != "cert" {
			t.Fatalf("host name %q: listener %+v, want HTTPS with the certificate of Secret cert", host, l)
		}
		if len(p.Spec.Routes) != 1 || len(p.Spec.Routes[0].Backends) != 1 {
			t.Fatalf("host name %q serves %+v, want the route", host, p.Spec.Routes)
		}
	}
	// The listener of port 8447 serves a certificate of another namespace, which a ReferenceGrant there
	// opens to the Gateways of apps.
	var granted *v1alpha1.LoadBalancerPolicy
	for _, p := range out.Policies {
		if p.Annotations[AnnotationPort] == "8447" {
			granted = p
		}
	}
	if granted == nil || granted.Spec.Listener.TLS == nil || !reflect.DeepEqual(granted.Spec.Listener.TLS.Certificates, []v1alpha1.Certificate{{SecretName: "cert", SecretNamespace: "other"}}) {
		t.Fatalf("port 8447 is served by %+v, want the certificate of Secret other/cert", granted)
	}
	if len(out.Policies) != 3 {
		t.Fatalf("%d policies, want 3: listeners whose certificate does not resolve are not served", len(out.Policies))
	}
	for _, c := range []struct{ listener, reason, says string }{
		{"any", string(gwv1.ListenerReasonResolvedRefs), ""},
		{"missing", string(gwv1.ListenerReasonInvalidCertificateRef), "apps/nope of type kubernetes.io/tls not found"},
		{"broken", string(gwv1.ListenerReasonInvalidCertificateRef), "PEM data"},
		{"kind", string(gwv1.ListenerReasonInvalidCertificateRef), "kind /ConfigMap is not supported"},
		{"elsewhere", string(gwv1.ListenerReasonRefNotPermitted), "no ReferenceGrant"},
		{"granted", string(gwv1.ListenerReasonResolvedRefs), ""},
	} {
		rc := listenerCond(t, out, "apps/gw", c.listener, string(gwv1.ListenerConditionResolvedRefs))
		pc := listenerCond(t, out, "apps/gw", c.listener, string(gwv1.ListenerConditionProgrammed))
		if rc.Reason != c.reason || !strings.Contains(rc.Message, c.says) || (c.says == "") != (rc.Status == metav1.ConditionTrue) {
			t.Errorf("listener %s: ResolvedRefs %s %s %q, want reason %s saying %q", c.listener, rc.Status, rc.Reason, rc.Message, c.reason, c.says)
		}
		if (c.says == "") != (pc.Status == metav1.ConditionTrue) {
			t.Errorf("listener %s: Programmed %s %s, want %v", c.listener, pc.Status, pc.Reason, c.says == "")
		}
	}
	// A route attaches to a listener whose certificate does not resolve (attachedRoutes counts it), and is
	// not served there.
	for _, l := range out.Gateways[types.NamespacedName{Namespace: "apps", Name: "gw"}].Status.Listeners {
		if l.AttachedRoutes != 1 {
			t.Errorf("listener %s has %d routes attached, want 1", l.Name, l.AttachedRoutes)
		}
	}
	for _, n := range []string{"apps/cert", "apps/nope", "apps/broken"} {
		ns, name, _ := strings.Cut(n, "/")
		if !out.Secrets[types.NamespacedName{Namespace: ns, Name: name}] {
			t.Errorf("Secret %s is not among the Secrets the translation read: %v", n, out.Secrets)
		}
	}
	// Every listener has its port on the Gateway's Service, so that the Gateway has an address: one whose
	// certificate does not resolve refuses connections there.
	var ports []int32
	for _, p := range out.Gateways[types.NamespacedName{Namespace: "apps", Name: "gw"}].Ports {
		if p.AppProtocol != "https" {
			t.Errorf("port %d has appProtocol %q, want https", p.Port, p.AppProtocol)
		}
		ports = append(ports, p.Port)
	}
	if !slices.Equal(ports, []int32{443, 8443, 8444, 8445, 8446, 8447}) {
		t.Errorf("the Gateway's Service ports are %v, want every listener's", ports)
	}
}

// A Gateway with no valid listener is not accepted; one with some is, and says the others are not valid.
func TestGatewayAcceptedNeedsAValidListener(t *testing.T) {
	tcp := httpListener("tcp", 9000, "")
	tcp.Protocol = gwv1.TCPProtocolType
	out := Translate(input([]*gwv1.Gateway{gw("apps", "none", tcp), gw("apps", "some", tcp, httpListener("http", 80, ""))}))
	for name, want := range map[string]metav1.ConditionStatus{"none": metav1.ConditionFalse, "some": metav1.ConditionTrue} {
		c := meta.FindStatusCondition(out.Gateways[types.NamespacedName{Namespace: "apps", Name: name}].Status.Conditions, string(gwv1.GatewayConditionAccepted))
		if c == nil || c.Status != want || c.Reason != string(gwv1.GatewayReasonListenersNotValid) {
			t.Errorf("Gateway %s: Accepted %+v, want %s with reason ListenersNotValid", name, c, want)
		}
	}
}

// A redirect that sets neither scheme nor port sends the client back to the Gateway listener's port (not the
// Envoy port behind the Gateway's Service); one that sets the scheme leaves the port to the scheme's.
func TestRedirectKeepsTheListenerPort(t *testing.T) {
	for _, c := range []struct {
		scheme *string
		port   *gwv1.PortNumber
		want   *int32
	}{{nil, nil, ptr(int32(8080))}, {ptr("https"), nil, nil}, {nil, ptr(gwv1.PortNumber(8443)), ptr(int32(8443))}} {
		r := redirect(&gwv1.HTTPRequestRedirectFilter{Scheme: c.scheme, Hostname: ptr(gwv1.PreciseHostname("example.org")), Port: c.port}, nil, 8080)
		if (r.Port == nil) != (c.want == nil) || (r.Port != nil && *r.Port != *c.want) {
			t.Errorf("scheme %v, port %v: redirect port %v, want %v", c.scheme, c.port, r.Port, c.want)
		}
	}
}

// A rule's timeouts become the route's: request the whole-request timeout, backendRequest each try's.
func TestRuleTimeouts(t *testing.T) {
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)},
		Timeouts: &gwv1.HTTPRouteTimeouts{Request: ptr(gwv1.Duration("500ms")), BackendRequest: ptr(gwv1.Duration("250ms"))}}
	off := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix("/off")}, BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)},
		Timeouts: &gwv1.HTTPRouteTimeouts{BackendRequest: ptr(gwv1.Duration("0s"))}}
	out := Translate(input([]*gwv1.Gateway{gw("apps", "gw", httpListener("http", 80, ""))}, route("apps", "r", 1, "apps/gw", nil, rule, off)))
	valid(t, out)
	rt := policyFor(t, out, "").Spec.Routes[1]
	if rt.Timeout == nil || rt.Timeout.Duration != 500*time.Millisecond {
		t.Errorf("route timeout %v, want 500ms", rt.Timeout)
	}
	if rt.Retry == nil || rt.Retry.PerTryTimeout == nil || rt.Retry.PerTryTimeout.Duration != 250*time.Millisecond {
		t.Errorf("retry %+v, want a per-try timeout of 250ms", rt.Retry)
	}
	if off := policyFor(t, out, "").Spec.Routes[0]; off.Retry != nil || off.Timeout != nil {
		t.Errorf("backendRequest 0s: timeout %v, retry %+v; want the route's defaults", off.Timeout, off.Retry)
	}
}

// RequestMirror filters copy requests to the Services they name, each its share; one that does not resolve
// copies nothing and makes the route's ResolvedRefs false; a second one of the same Service port, or one of
// a Service the rule routes to, copies nothing.
func TestRequestMirrors(t *testing.T) {
	mirror := func(name string, port int32, m gwv1.HTTPRequestMirrorFilter) gwv1.HTTPRouteFilter {
		m.BackendRef = gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr(gwv1.PortNumber(port))}
		return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &m}
	}
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}, Filters: []gwv1.HTTPRouteFilter{
		mirror("api", 8080, gwv1.HTTPRequestMirrorFilter{}),
		mirror("api", 8080, gwv1.HTTPRequestMirrorFilter{Fraction: &gwv1.Fraction{Numerator: 1, Denominator: ptr(int32(3))}}),
		mirror("web", 80, gwv1.HTTPRequestMirrorFilter{Percent: ptr(int32(20))}),
		mirror("missing", 80, gwv1.HTTPRequestMirrorFilter{}),
	}}
	out := Translate(input([]*gwv1.Gateway{gw("apps", "gw", httpListener("http", 80, ""))}, route("apps", "r", 1, "apps/gw", nil, rule)))
	valid(t, out)
	p := policyFor(t, out, "")
	rt := p.Spec.Routes[0]
	var got []string
	for _, m := range rt.Mirrors {
		got = append(got, fmt.Sprintf("%s %d", p.Spec.Backends[slices.IndexFunc(p.Spec.Backends, func(b v1alpha1.Backend) bool { return b.Name == m.Backend })].Service.Name, *m.Percent))
	}
	if want := []string{"api 100"}; !slices.Equal(got, want) {
		t.Errorf("mirrors %v, want %v", got, want)
	}
	for _, c := range []struct {
		m    gwv1.HTTPRequestMirrorFilter
		want int32
	}{{gwv1.HTTPRequestMirrorFilter{}, 100}, {gwv1.HTTPRequestMirrorFilter{Percent: ptr(int32(20))}, 20},
		{gwv1.HTTPRequestMirrorFilter{Fraction: &gwv1.Fraction{Numerator: 1, Denominator: ptr(int32(3))}}, 33},
		{gwv1.HTTPRequestMirrorFilter{Fraction: &gwv1.Fraction{Numerator: 1}}, 1}} {
		if got := mirrorPercent(&c.m); got != c.want {
			t.Errorf("mirror %+v copies %d %%, want %d", c.m, got, c.want)
		}
	}
	if len(rt.Backends) != 1 || *rt.Backends[0].Weight != 1 || rt.ErrorWeight != nil {
		t.Errorf("the route's backends are %+v (error weight %v), want web alone: a mirror takes no share", rt.Backends, rt.ErrorWeight)
	}
	if c := parentCond(t, out, "apps/r", string(gwv1.RouteConditionResolvedRefs)); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "requestMirror.backendRef: Service apps/missing not found") {
		t.Errorf("ResolvedRefs %+v", c)
	}
}

// ResponseHeaderModifier and URLRewrite filters become the route's responseHeaders and rewrite: a
// ReplacePrefixMatch of a PathPrefix match replaces its segments ("" as "/" does), one without a PathPrefix
// match (which the CRD refuses) changes no path; a rule answered by Envoy (a redirect, which the CRD refuses
// beside a rewrite, or a 500 for backends that do not resolve) keeps its response headers and has no rewrite.
func TestResponseHeaderModifierAndURLRewrite(t *testing.T) {
	exact := gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchExact), Value: ptr("/exact")}}
	untyped := gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Value: ptr("/untyped")}}
	rewrite := func(host string, pm *gwv1.HTTPPathModifier) gwv1.HTTPRouteFilter {
		f := &gwv1.HTTPURLRewriteFilter{Path: pm}
		if host != "" {
			f.Hostname = ptr(gwv1.PreciseHostname(host))
		}
		return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: f}
	}
	prefixTo := func(v string) *gwv1.HTTPPathModifier {
		return &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr(v)}
	}
	fullTo := func(v string) *gwv1.HTTPPathModifier {
		return &gwv1.HTTPPathModifier{Type: gwv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr(v)}
	}
	responseHeaders := gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{
		Set: []gwv1.HTTPHeader{{Name: "X-Header-Set", Value: "set"}}, Add: []gwv1.HTTPHeader{{Name: "X-Header-Add", Value: "add"}}, Remove: []string{"X-Header-Remove"}}}
	web := []gwv1.HTTPBackendRef{toService("", "web", 80)}
	for _, c := range []struct {
		name    string
		match   gwv1.HTTPRouteMatch
		filters []gwv1.HTTPRouteFilter
		refs    []gwv1.HTTPBackendRef
		want    v1alpha1.Route // its match, responseHeaders, rewrite, redirect and directResponse
	}{
		{"response headers", prefix("/set"), []gwv1.HTTPRouteFilter{responseHeaders}, web, v1alpha1.Route{
			Match: v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchSegmentPrefix, Value: "/set"}},
			ResponseHeaders: &v1alpha1.HeaderModifier{Set: []v1alpha1.HeaderValue{{Name: "X-Header-Set", Value: "set"}},
				Add: []v1alpha1.HeaderValue{{Name: "X-Header-Add", Value: "add"}}, Remove: []string{"X-Header-Remove"}}}},
		{"host name", prefix("/one"), []gwv1.HTTPRouteFilter{rewrite("one.example.org", nil)}, web, v1alpha1.Route{
			Match:   v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchSegmentPrefix, Value: "/one"}},
			Rewrite: &v1alpha1.Rewrite{Hostname: "one.example.org"}}},
		{"prefix", prefix("/prefix/one"), []gwv1.HTTPRouteFilter{rewrite("", prefixTo("/one"))}, web, v1alpha1.Route{
			Match:   v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchSegmentPrefix, Value: "/prefix/one"}},
			Rewrite: &v1alpha1.Rewrite{Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplacePrefixMatch, Value: "/one"}}}},
		{"prefix stripped", prefix("/strip-prefix"), []gwv1.HTTPRouteFilter{rewrite("", prefixTo(""))}, web, v1alpha1.Route{
			Match:   v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchSegmentPrefix, Value: "/strip-prefix"}},
			Rewrite: &v1alpha1.Rewrite{Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplacePrefixMatch, Value: "/"}}}},
		{"prefix of an untyped match (PathPrefix)", untyped, []gwv1.HTTPRouteFilter{rewrite("", prefixTo("/typed"))}, web, v1alpha1.Route{
			Match:   v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchSegmentPrefix, Value: "/untyped"}},
			Rewrite: &v1alpha1.Rewrite{Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplacePrefixMatch, Value: "/typed"}}}},
		{"no prefix to replace", exact, []gwv1.HTTPRouteFilter{rewrite("a.example.org", prefixTo("/x"))}, web, v1alpha1.Route{
			Match:   v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchExact, Value: "/exact"}},
			Rewrite: &v1alpha1.Rewrite{Hostname: "a.example.org"}}},
		{"full path and host name, with request and response headers", prefix("/full"), []gwv1.HTTPRouteFilter{rewrite("test.example.org", fullTo("/test")), responseHeaders,
			{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Remove: []string{"X-Drop"}}}}, web, v1alpha1.Route{
			Match:           v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchSegmentPrefix, Value: "/full"}},
			RequestHeaders:  &v1alpha1.HeaderModifier{Remove: []string{"X-Drop"}},
			ResponseHeaders: &v1alpha1.HeaderModifier{Set: []v1alpha1.HeaderValue{{Name: "X-Header-Set", Value: "set"}}, Add: []v1alpha1.HeaderValue{{Name: "X-Header-Add", Value: "add"}}, Remove: []string{"X-Header-Remove"}},
			Rewrite:         &v1alpha1.Rewrite{Hostname: "test.example.org", Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplaceFullPath, Value: "/test"}}}},
		{"redirect beside a rewrite", prefix("/moved"), []gwv1.HTTPRouteFilter{rewrite("a.example.org", nil), responseHeaders,
			{Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Hostname: ptr(gwv1.PreciseHostname("b.example.org")), Path: prefixTo("")}}}, nil, v1alpha1.Route{
			Match:           v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchSegmentPrefix, Value: "/moved"}},
			ResponseHeaders: responseHeadersOf(responseHeaders),
			Redirect:        &v1alpha1.Redirect{Hostname: "b.example.org", Port: ptr(int32(80)), Path: &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplacePrefixMatch, Value: "/"}}}},
		{"no backend resolves", prefix("/gone"), []gwv1.HTTPRouteFilter{rewrite("a.example.org", fullTo("/x")), responseHeaders}, []gwv1.HTTPBackendRef{toService("", "missing", 80)}, v1alpha1.Route{
			Match:           v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathMatchSegmentPrefix, Value: "/gone"}},
			ResponseHeaders: responseHeadersOf(responseHeaders),
			DirectResponse:  &v1alpha1.DirectResponse{Status: 500}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rule := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{c.match}, Filters: c.filters, BackendRefs: c.refs}
			out := Translate(input([]*gwv1.Gateway{gw("apps", "gw", httpListener("http", 80, ""))}, route("apps", "r", 1, "apps/gw", nil, rule)))
			valid(t, out)
			p := policyFor(t, out, "")
			if len(p.Spec.Routes) != 1 {
				t.Fatalf("routes %+v, want one", p.Spec.Routes)
			}
			rt := p.Spec.Routes[0]
			got := v1alpha1.Route{Match: rt.Match, RequestHeaders: rt.RequestHeaders, ResponseHeaders: rt.ResponseHeaders, Rewrite: rt.Rewrite,
				Redirect: rt.Redirect, DirectResponse: rt.DirectResponse}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("route\n%s\nwant\n%s", toJSON(t, got), toJSON(t, c.want))
			}
			if c.want.DirectResponse == nil && c.want.Redirect == nil && len(rt.Backends) != 1 {
				t.Errorf("backends %+v, want web", rt.Backends)
			}
		})
	}
}

func responseHeadersOf(f gwv1.HTTPRouteFilter) *v1alpha1.HeaderModifier {
	return headerModifier(f.ResponseHeaderModifier)
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The rule index finds the same rules for a host name as looking at every rule's names with covers.
func TestRuleIndexFindsWhatCoversFinds(t *testing.T) {
	names := []string{"", "a.b.c", "*.b.c", "*.c", "b.c", "x.a.b.c", "*.a.b.c", "c", "*.x.b.c", "ab.c"}
	l := &listener{}
	for i := range 64 {
		var hs []string
		for j, n := range names {
			if (i>>(j%6))&1 == 1 && (i+j)%3 != 0 {
				hs = append(hs, n)
			}
		}
		l.rules = append(l.rules, attachedRule{hostnames: hs})
	}
	ix := indexRules(l)
	for _, h := range names {
		var want []int
		for i, ar := range l.rules {
			if slices.ContainsFunc(ar.hostnames, func(eh string) bool { return covers(eh, h) }) {
				want = append(want, i)
			}
		}
		if got := ix.covering(h); !slices.Equal(got, want) {
			t.Errorf("rules covering %q: %v, want %v", h, got, want)
		}
	}
}

// What a Gateway's policy says of itself: its Gateway, port, host name and listeners; the rule of a route
// of a rule without matches, and a rule's name.
func TestPoliciesSayWhatTheyServe(t *testing.T) {
	g := gw("apps", "gw", httpListener("wild", 80, "*.example.com"), httpListener("foo", 80, "foo.example.com"), httpListener("other", 8080, ""))
	rule := gwv1.HTTPRouteRule{Name: ptr(gwv1.SectionName("all")), BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}
	r := route("apps", "web", 1, "apps/gw", []string{"bar.example.com"}, rule)
	out := Translate(input([]*gwv1.Gateway{g}, r))
	valid(t, out)
	var got []string
	for _, p := range out.Policies {
		s, _ := ServedBy(p)
		got = append(got, fmt.Sprintf("%s %s:%d %q %v", p.Name, s.Gateway, s.Port, s.Hostname, s.Listeners))
	}
	want := []string{
		fmt.Sprintf("gateway.gw.80.%s apps/gw:80 \"*.example.com\" [wild]", hash8("*.example.com")),
		fmt.Sprintf("gateway.gw.80.%s apps/gw:80 \"bar.example.com\" [wild]", hash8("bar.example.com")),
		fmt.Sprintf("gateway.gw.80.%s apps/gw:80 \"foo.example.com\" [foo]", hash8("foo.example.com")),
		// The route has no sectionName: it attaches to the listener of 8080 too.
		fmt.Sprintf("gateway.gw.8080.%s apps/gw:8080 \"bar.example.com\" [other]", hash8("bar.example.com")),
		"gateway.gw.8080.any apps/gw:8080 \"\" [other]",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("policies:\n%q\nwant\n%q", got, want)
	}
	rules, err := RulesOf(policyFor(t, out, "bar.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	first := "web-" + hash8("apps", "web") + "-0-0"
	if got := rules[first]; got != (RuleRef{Route: "apps/web", Rule: 0, Name: "all", Match: 0}) || got.String() != "HTTPRoute apps/web spec.rules[0] (name all).matches[0]" {
		t.Fatalf("%s made of %+v (%s); rules %v", first, got, got, rules)
	}
	if _, ok := ServedBy(&v1alpha1.LoadBalancerPolicy{}); ok {
		t.Fatal("a policy without the annotations is a Gateway's")
	}
}

func TestHostFor(t *testing.T) {
	names := []string{"", "*.example.com", "*.a.example.com", "foo.example.com"}
	for host, want := range map[string]string{
		"foo.example.com":    "foo.example.com",
		"FOO.example.com.":   "foo.example.com",
		"bar.example.com":    "*.example.com",
		"x.y.example.com":    "*.example.com",
		"b.a.example.com":    "*.a.example.com",
		"a.example.com":      "*.example.com",
		"example.com":        "",
		"other.org":          "",
		"foo.example.com.uk": "",
	} {
		if got, ok := HostFor(host, names); !ok || got != want {
			t.Errorf("HostFor(%q) = %q, %v; want %q", host, got, ok, want)
		}
	}
	if got, ok := HostFor("example.com", []string{"*.example.com", "foo.example.com"}); ok {
		t.Errorf("example.com served by %q without a policy for every name", got)
	}
}

// A route's name in the policy comes from the rule and match it is made of, not from its place among the
// host name's routes: an HTTPRoute attached later with a more specific match, which goes first, renames
// nothing that was there.
func TestRouteNamesDoNotMoveWhenARouteGoesBeforeThem(t *testing.T) {
	g := gw("apps", "gw", httpListener("http", 80, ""))
	prefix := func(v string) gwv1.HTTPRouteRule {
		return gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr(v)}}},
			BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}
	}
	names := func(routes ...*gwv1.HTTPRoute) []string {
		out := Translate(input([]*gwv1.Gateway{g}, routes...))
		valid(t, out)
		var got []string
		for _, rt := range policyFor(t, out, "shop.example.com").Spec.Routes {
			got = append(got, rt.Name+" "+rt.Match.Path.Value)
		}
		return got
	}
	web := route("apps", "web", 1, "apps/gw", []string{"shop.example.com"}, prefix("/"), prefix("/api"))
	before := names(web)
	api := route("apps", "api", 2, "apps/gw", []string{"shop.example.com"}, prefix("/api/v2"))
	after := names(web, api)
	w, a := "web-"+hash8("apps", "web"), "api-"+hash8("apps", "api")
	if want := []string{w + "-1-0 /api", w + "-0-0 /"}; !slices.Equal(before, want) {
		t.Fatalf("before: %q, want %q", before, want)
	}
	if want := []string{a + "-0-0 /api/v2", w + "-1-0 /api", w + "-0-0 /"}; !slices.Equal(after, want) {
		t.Fatalf("after: %q, want %q", after, want)
	}
}
