package gatewayapi

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// served gives an object the UID and generation an API server gives it, as the objects the Kubernetes
// source translates have: a translation hands on the previous one's policies by them.
func served[T interface{ GetObjectMeta() metav1.Object }](o T, generation int64) T {
	m := o.GetObjectMeta()
	m.SetUID(types.UID(fmt.Sprintf("uid-%s-%s", m.GetNamespace(), m.GetName())))
	m.SetGeneration(generation)
	return o
}

// manyRoutes is n HTTPRoutes attached to infra/edge, on hosts host names (route i on host name i%hosts),
// each with a path of its own.
func manyRoutes(n, hosts int) []*gwv1.HTTPRoute {
	var out []*gwv1.HTTPRoute
	for i := range n {
		out = append(out, served(route("apps", fmt.Sprintf("r%04d", i), i, "infra/edge", []string{fmt.Sprintf("h%03d.example", i%hosts)},
			gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix(fmt.Sprintf("/p%d", i))}, BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}), 1))
	}
	return out
}

func allowAll(g *gwv1.Gateway) *gwv1.Gateway {
	for i := range g.Spec.Listeners {
		g.Spec.Listeners[i].AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr(gwv1.NamespacesFromAll)}}
	}
	return g
}

// One route changed among many makes anew the policy of its host name alone: every other policy is the
// previous translation's, the same pointer. A new route on a host name of its own makes that host name's
// policy and nothing else; a route's generation that moved without a change of what it serves changes no
// policy at all.
func TestOneRouteChangeMakesOnlyItsHostNamesPolicy(t *testing.T) {
	routes := manyRoutes(300, 90)
	in := input([]*gwv1.Gateway{served(allowAll(gw("infra", "edge", httpListener("http", 80, ""))), 1)}, routes...)
	first := Translate(in)
	valid(t, first)
	if len(first.Policies) != 91 { // 90 host names and every other name
		t.Fatalf("%d policies, want 91", len(first.Policies))
	}
	byName := func(out *Output) map[string]*v1alpha1.LoadBalancerPolicy {
		m := map[string]*v1alpha1.LoadBalancerPolicy{}
		for _, p := range out.Policies {
			m[p.Name] = p
		}
		return m
	}
	// remade lists the policies of next that are not the same pointers as prev's.
	remade := func(prev, next *Output) []string {
		old := byName(prev)
		var out []string
		for _, p := range next.Policies {
			if old[p.Name] != p {
				out = append(out, p.Annotations[AnnotationHostname])
			}
		}
		return out
	}

	// Route 7 (host name h007) gets another path, as kubectl apply writes it: a new object, its
	// generation moved.
	changed := routes[7].DeepCopy()
	changed.Generation++
	changed.Spec.Rules[0].Matches = []gwv1.HTTPRouteMatch{prefix("/elsewhere")}
	in.Routes = slices.Clone(routes)
	in.Routes[7] = changed
	in.Previous = first
	second := Translate(in)
	if got := remade(first, second); !slices.Equal(got, []string{"h007.example"}) {
		t.Errorf("one route's change made the policies of %v, want h007.example's alone", got)
	}
	if p := policyFor(t, second, "h007.example"); !slices.ContainsFunc(p.Spec.Routes, func(r v1alpha1.Route) bool {
		return r.Match.Path != nil && r.Match.Path.Value == "/elsewhere"
	}) {
		t.Errorf("h007.example's policy does not serve the new path: %+v", p.Spec.Routes)
	}

	// A new route on a host name of its own.
	in.Routes = append(in.Routes, served(route("apps", "new", 1000, "infra/edge", []string{"new.example"},
		gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}), 1))
	in.Previous = second
	third := Translate(in)
	if got := remade(second, third); !slices.Equal(got, []string{"new.example"}) {
		t.Errorf("a new route on its own host name made the policies of %v, want new.example's alone", got)
	}

	// A generation that moved with nothing served changed (a rule's timeout set as it was): the policy is
	// made again, found the same, and the previous one is handed on.
	same := in.Routes[3].DeepCopy()
	same.Generation++
	in.Routes[3] = same
	in.Previous = third
	if got := remade(third, Translate(in)); len(got) != 0 {
		t.Errorf("a route whose generation moved with nothing else made the policies of %v, want none", got)
	}

	// Objects without a generation (read from files) are made anew each time, never taken for the
	// previous ones.
	in = input([]*gwv1.Gateway{allowAll(gw("infra", "edge", httpListener("http", 80, "")))}, route("apps", "a", 0, "infra/edge", []string{"a.example"},
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix("/a")}, BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}))
	in.Routes[0].Generation = 0
	fromFiles := Translate(in)
	in.Routes[0].Spec.Rules[0].Matches = []gwv1.HTTPRouteMatch{prefix("/b")}
	in.Previous = fromFiles
	if p := policyFor(t, Translate(in), "a.example"); p.Spec.Routes[0].Match.Path.Value != "/b" {
		t.Errorf("a route without a generation changed in place: the policy serves %q, want /b", p.Spec.Routes[0].Match.Path.Value)
	}
}

// A translation given the previous one must give what a translation from scratch gives, after every change
// of a random sequence: routes added, changed (their hosts, paths, backends, parents) and deleted, a
// Gateway's listeners changed (an HTTPS one among them, its certificate's Secret valid or not), an older
// Gateway taking its Envoy port, ReferenceGrants added and removed, Services and
// BackendLoadBalancerPolicies coming and going. Every change makes a new object with its generation
// moved, as the API server does.
func TestIncrementalTranslationMatchesFullTranslation(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 3000))
	hosts := []string{"a.example", "b.example", "c.example", "x.wild.example", "*.wild.example", "y.wild.example"}
	services := []gwv1.HTTPBackendRef{toService("", "web", 80), toService("", "api", 8080), toService("infra", "web", 80), toService("", "gone", 80)}
	generation := int64(1)
	next := func() int64 { generation++; return generation }
	newRoute := func(ns, name string, age int) *gwv1.HTTPRoute {
		var hs []string
		for range r.IntN(3) {
			hs = append(hs, hosts[r.IntN(len(hosts))])
		}
		var rules []gwv1.HTTPRouteRule
		for j := range 1 + r.IntN(2) {
			rule := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix(fmt.Sprintf("/p%d", r.IntN(4)))}}
			if r.IntN(4) == 0 {
				rule.Name = ptr(gwv1.SectionName(fmt.Sprintf("rule%d", j)))
			}
			for range 1 + r.IntN(2) {
				rule.BackendRefs = append(rule.BackendRefs, services[r.IntN(len(services))])
			}
			rules = append(rules, rule)
		}
		rt := served(route(ns, name, age, "infra/edge", hs, rules...), next())
		if r.IntN(5) == 0 {
			rt.Spec.ParentRefs[0].SectionName = ptr(gwv1.SectionName("wild"))
		}
		return rt
	}
	listeners := func() []gwv1.Listener {
		ls := []gwv1.Listener{httpListener("http", 80, "")}
		if r.IntN(2) == 0 {
			ls = append(ls, httpListener("wild", 80, "*.wild.example"))
		}
		if r.IntN(3) == 0 {
			ls = append(ls, httpListener("other", 8080, "a.example"))
		}
		if r.IntN(2) == 0 {
			ls = append(ls, gwv1.Listener{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr(gwv1.Hostname("*.example")),
				TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: gwv1.ObjectName([]string{"cert", "other-cert"}[r.IntN(2)])}}}})
		}
		return ls
	}
	certOK := true
	edge := served(allowAll(gw("infra", "edge", listeners()...)), next())
	edge.UID = "edge-uid"
	in := input([]*gwv1.Gateway{edge})
	in.Secret = func(types.NamespacedName) string {
		if certOK {
			return ""
		}
		return "not a certificate and its key"
	}
	grant := served(&gwv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "routes"}, Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}},
		To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Service"}}}}, next())
	settings := []v1alpha1.BackendSettings{
		{LoadBalancing: v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev}},
		{LoadBalancing: v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmLeastRequest}},
	}
	// An older Gateway, when there, takes the Envoy port edge's port 80 would have: edge's moves.
	var older *gwv1.Gateway
	for i := 0; older == nil; i++ {
		name := fmt.Sprintf("older%d", i)
		if hash32("infra/"+name, "80")%uint32(len(in.Ports)) == hash32("infra/edge", "80")%uint32(len(in.Ports)) {
			older = served(allowAll(gw("infra", name, httpListener("http", 80, ""))), next())
			older.CreationTimestamp = metav1.NewTime(edge.CreationTimestamp.Add(-time.Hour))
		}
	}
	var previous *Output
	reused, reattached := 0, 0
	for step := range 400 {
		// Each step changes the input as informers do: new slices, new objects, the old ones untouched.
		in.Routes = slices.Clone(in.Routes)
		in.Gateways = slices.Clone(in.Gateways)
		in.Grants = slices.Clone(in.Grants)
		in.BackendPolicies = slices.Clone(in.BackendPolicies)
		what := r.IntN(22)
		switch {
		case what < 12:
			ns := []string{"apps", "apps", "infra"}[r.IntN(3)]
			name := fmt.Sprintf("r%d", r.IntN(30))
			i := slices.IndexFunc(in.Routes, func(rt *gwv1.HTTPRoute) bool { return rt.Namespace == ns && rt.Name == name })
			switch {
			case i < 0:
				in.Routes = append(in.Routes, newRoute(ns, name, step))
			case r.IntN(3) == 0:
				in.Routes = slices.Delete(in.Routes, i, i+1)
			default:
				changed := newRoute(ns, name, 0)
				changed.CreationTimestamp, changed.UID = in.Routes[i].CreationTimestamp, in.Routes[i].UID
				in.Routes[i] = changed
			}
		case what < 14:
			g := in.Gateways[0].DeepCopy()
			g.Generation = next()
			g.Spec.Listeners = listeners()
			allowAll(g)
			in.Gateways[0] = g
		case what < 16:
			if len(in.Grants) == 0 {
				in.Grants = []*gwv1.ReferenceGrant{grant}
			} else {
				in.Grants = nil
			}
		case what < 18:
			in.Services = maps.Clone(in.Services)
			key := types.NamespacedName{Namespace: "apps", Name: "api"}
			if _, ok := in.Services[key]; ok {
				delete(in.Services, key)
			} else {
				in.Services[key] = []int32{8080}
			}
		case what == 20:
			certOK = !certOK
		case what == 21:
			if len(in.Gateways) == 1 {
				in.Gateways = append(in.Gateways, older)
			} else {
				in.Gateways = in.Gateways[:1]
			}
		default:
			name := fmt.Sprintf("blp%d", r.IntN(3))
			i := slices.IndexFunc(in.BackendPolicies, func(p *v1alpha1.BackendLoadBalancerPolicy) bool { return p.Name == name })
			p := served(backendPolicy("apps", name, r.IntN(3), settings[r.IntN(len(settings))], "web"), next())
			if r.IntN(2) == 0 {
				p = routeTarget(backendPolicy("apps", name, r.IntN(3), settings[r.IntN(len(settings))]), fmt.Sprintf("r%d", r.IntN(30)))
				served(p, next())
			}
			switch {
			case i < 0:
				in.BackendPolicies = append(in.BackendPolicies, p)
			case r.IntN(3) == 0:
				in.BackendPolicies = slices.Delete(in.BackendPolicies, i, i+1)
			default:
				in.BackendPolicies[i] = p
			}
		}
		inc := in
		inc.Previous = previous
		got := Translate(inc)
		want := Translate(in)
		if !reflect.DeepEqual(want, got) {
			diff := cmp.Diff(want, got, cmp.AllowUnexported(Output{}, Gateway{}, builtPolicy{}, attachedRoute{}, placedRule{}, seenService{}, attachedRule{}, backend{}))
			t.Fatalf("step %d: the translation given the previous one differs from one from scratch (-scratch +incremental):\n%s", step, diff)
		}
		valid(t, got)
		if previous != nil {
			for _, p := range got.Policies {
				if previous.built[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}].policy == p {
					reused++
				}
			}
			for key, a := range got.attached {
				if previous.attached[key] == a {
					reattached++
				}
			}
		}
		previous = got
	}
	if reused == 0 || reattached == 0 {
		t.Errorf("handed on from the previous translation: %d policies, %d attached routes; want some of both", reused, reattached)
	}
	t.Logf("%d policies and %d attached routes handed on over the steps", reused, reattached)
}

// One new HTTPRoute among 3,000 attached to one Gateway, on 900 host names (a quarter of the routes with a
// host name of their own, the others fifteen to a shared one, as the Gateway API routes benchmark has
// them), alternately on a host name of its own and on a shared one: the translation's CPU per change, given
// the previous translation (incremental) and from scratch.
func BenchmarkGatewayOneRouteChangeAmong3000(b *testing.B) {
	const n, own = 3000, 750
	var routes []*gwv1.HTTPRoute
	for i := range n {
		host := fmt.Sprintf("own%04d.example", i)
		if i >= own {
			host = fmt.Sprintf("shared%03d.example", (i-own)%150)
		}
		routes = append(routes, served(route("apps", fmt.Sprintf("r%04d", i), i, "infra/edge", []string{host},
			gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix(fmt.Sprintf("/p%d", i))}, BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}), 1))
	}
	in := input([]*gwv1.Gateway{served(allowAll(gw("infra", "edge", httpListener("http", 80, ""))), 1)}, routes...)
	base := Translate(in)
	if len(base.Policies) != 901 {
		b.Fatalf("%d policies, want 901 (900 host names and every other name)", len(base.Policies))
	}
	for _, mode := range []struct {
		name     string
		previous *Output
	}{{"incremental", base}, {"scratch", nil}} {
		b.Run(mode.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				host := fmt.Sprintf("new%d.example", i)
				if i%2 == 1 {
					host = fmt.Sprintf("shared%03d.example", i%150)
				}
				next := in
				next.Routes = append(slices.Clip(routes), served(route("apps", fmt.Sprintf("new%d", i), n+i, "infra/edge", []string{host},
					gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix("/new")}, BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}), 1))
				next.Previous = mode.previous
				if out := Translate(next); len(out.Policies) < 901 {
					b.Fatalf("%d policies", len(out.Policies))
				}
				i++
			}
		})
	}
}
