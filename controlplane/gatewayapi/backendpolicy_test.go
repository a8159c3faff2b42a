package gatewayapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func backendPolicy(ns, name string, age int, settings v1alpha1.BackendSettings, targets ...string) *v1alpha1.BackendLoadBalancerPolicy {
	p := &v1alpha1.BackendLoadBalancerPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 7,
		CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))}, Spec: v1alpha1.BackendLoadBalancerPolicySpec{Backend: settings}}
	for _, t := range targets {
		svc, section, _ := strings.Cut(t, ":")
		ref := gwv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Group: "", Kind: "Service", Name: gwv1.ObjectName(svc)}}
		if section != "" {
			ref.SectionName = ptr(gwv1.SectionName(section))
		}
		p.Spec.TargetRefs = append(p.Spec.TargetRefs, ref)
	}
	return p
}

func backendOf(t *testing.T, p *v1alpha1.LoadBalancerPolicy, service string) *v1alpha1.Backend {
	t.Helper()
	for i := range p.Spec.Backends {
		if b := &p.Spec.Backends[i]; b.Service != nil && b.Service.Name == service {
			return b
		}
	}
	t.Fatalf("policy %s has no backend for Service %s: %+v", p.Name, service, p.Spec.Backends)
	return nil
}

func ancestorCond(t *testing.T, out *Output, policy string) (gwv1.PolicyAncestorStatus, metav1.Condition) {
	t.Helper()
	ns, name, _ := strings.Cut(policy, "/")
	st := out.BackendPolicies[types.NamespacedName{Namespace: ns, Name: name}]
	if st == nil || len(st.Ancestors) != 1 {
		t.Fatalf("policy %s: want one ancestor, got %+v", policy, st)
	}
	c := meta.FindStatusCondition(st.Ancestors[0].Conditions, string(gwv1.PolicyConditionAccepted))
	if c == nil {
		t.Fatalf("policy %s has no Accepted condition", policy)
	}
	return st.Ancestors[0], *c
}

// A BackendLoadBalancerPolicy gives a Service's backend its settings in every Gateway policy that sends to
// it; one that names the port wins over one for the whole Service, and an older over a newer.
func TestBackendPolicyAppliesToTheServicesRoutesSendTo(t *testing.T) {
	leastRequest := v1alpha1.BackendSettings{LoadBalancing: v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmLeastRequest}}
	maglev := v1alpha1.BackendSettings{LoadBalancing: v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev}}
	random := v1alpha1.BackendSettings{LoadBalancing: v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmRandom}}
	in := input([]*gwv1.Gateway{gw("infra", "edge", httpListener("http", 80, ""))},
		route("apps", "web", 0, "infra/edge", []string{"web.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}),
		route("apps", "api", 1, "infra/edge", []string{"api.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{toService("", "api", 8080)}}))
	in.Namespaces["infra"] = map[string]string{}
	for _, g := range in.Gateways {
		g.Spec.Listeners[0].AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr(gwv1.NamespacesFromAll)}}
	}
	in.PortNames = map[types.NamespacedName]map[int32]string{{Namespace: "apps", Name: "web"}: {80: "http"}}
	in.BackendPolicies = []*v1alpha1.BackendLoadBalancerPolicy{
		backendPolicy("apps", "web-old", 0, random, "web"),
		backendPolicy("apps", "web-port", 5, leastRequest, "web:http"),
		backendPolicy("apps", "api", 1, maglev, "api"),
		backendPolicy("apps", "api-newer", 2, random, "api"),
		backendPolicy("apps", "nothing-sends-there", 0, random, "db"),
	}
	out := Translate(in)
	valid(t, out)
	if got := backendOf(t, policyFor(t, out, "web.example.com"), "web").LoadBalancing.Algorithm; got != v1alpha1.AlgorithmLeastRequest {
		t.Errorf("web: algorithm %q, want the port's policy's LeastRequest", got)
	}
	if got := backendOf(t, policyFor(t, out, "api.example.com"), "api").LoadBalancing.Algorithm; got != v1alpha1.AlgorithmMaglev {
		t.Errorf("api: algorithm %q, want the older policy's Maglev", got)
	}
	for policy, want := range map[string]string{"apps/web-port": "Accepted", "apps/api": "Accepted", "apps/web-old": "Conflicted", "apps/api-newer": "Conflicted"} {
		a, c := ancestorCond(t, out, policy)
		if c.Reason != want || (c.Status == metav1.ConditionTrue) != (want == "Accepted") || c.ObservedGeneration != 7 {
			t.Errorf("%s: Accepted %s %s (%s), want reason %s", policy, c.Status, c.Reason, c.Message, want)
		}
		if a.AncestorRef.Name != "edge" || *a.AncestorRef.Namespace != "infra" || *a.AncestorRef.Kind != "Gateway" || a.ControllerName != ControllerName {
			t.Errorf("%s: ancestor %+v", policy, a)
		}
	}
	if _, c := ancestorCond(t, out, "apps/api-newer"); !strings.Contains(c.Message, "api port 8080: api applies") {
		t.Errorf("the conflict does not name the policy that applies: %q", c.Message)
	}
	if st := out.BackendPolicies[types.NamespacedName{Namespace: "apps", Name: "nothing-sends-there"}]; st == nil || len(st.Ancestors) != 0 {
		t.Errorf("a policy whose Service no route sends to has ancestors: %+v", st)
	}
	// Where each policy applies, status reads the Envoys' view of the backends that send to the port.
	webPolicy := policyFor(t, out, "web.example.com")
	for policy, want := range map[string]string{
		"apps/web-port": fmt.Sprintf("web:80 %s/%s/%s", webPolicy.Namespace, webPolicy.Name, backendOf(t, webPolicy, "web").Name),
		"apps/api":      "api:8080 ", "apps/web-old": "", "apps/api-newer": "", "apps/nothing-sends-there": ""} {
		ns, name, _ := strings.Cut(policy, "/")
		var got []string
		for _, ap := range out.BackendPolicies[types.NamespacedName{Namespace: ns, Name: name}].Applied {
			for _, b := range ap.Backends {
				got = append(got, fmt.Sprintf("%s %s/%s", ap.Name, b.Policy, b.Backend))
			}
		}
		if g := strings.Join(got, ","); (want == "" && g != "") || (want != "" && !strings.HasPrefix(g, want)) || strings.Count(g, ",") > 0 {
			t.Errorf("%s applies to %q, want %q", policy, g, want)
		}
	}
}

// An invalid policy applies nowhere, and says why with the field path of its own spec.
func TestInvalidBackendPolicy(t *testing.T) {
	in := input([]*gwv1.Gateway{gw("apps", "edge", httpListener("http", 80, ""))},
		route("apps", "web", 0, "apps/edge", nil, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}))
	bad := v1alpha1.BackendSettings{LoadBalancing: v1alpha1.LoadBalancing{Algorithm: "Fastest"},
		HealthCheck: &v1alpha1.HealthCheck{Active: &v1alpha1.ActiveHealthCheck{Type: v1alpha1.HealthCheckGRPC}}}
	in.BackendPolicies = []*v1alpha1.BackendLoadBalancerPolicy{backendPolicy("apps", "bad", 0, bad, "web")}
	out := Translate(in)
	valid(t, out)
	if got := backendOf(t, out.Policies[0], "web").LoadBalancing.Algorithm; got != "" {
		t.Errorf("an invalid policy applied: algorithm %q", got)
	}
	_, c := ancestorCond(t, out, "apps/bad")
	if c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.PolicyReasonInvalid) {
		t.Fatalf("Accepted %s %s, want False Invalid", c.Status, c.Reason)
	}
	for _, want := range []string{"spec.backend.loadBalancing.algorithm", "spec.backend.healthCheck.active.type"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q does not name %s", c.Message, want)
		}
	}

	in.BackendPolicies = []*v1alpha1.BackendLoadBalancerPolicy{backendPolicy("apps", "cert", 0, v1alpha1.BackendSettings{
		TLS: &v1alpha1.BackendTLS{ClientCertificate: &v1alpha1.ClientCertificate{SecretName: "client"}}}, "web")}
	in.BackendPolicies[0].Spec.TargetRefs[0].Kind = "Deployment"
	_, c = ancestorCond(t, Translate(in), "apps/cert")
	for _, want := range []string{"spec.backend.tls.clientCertificate", "spec.targetRefs[0]: must be a Service"} {
		if c.Reason != string(gwv1.PolicyReasonInvalid) || !strings.Contains(c.Message, want) {
			t.Errorf("%s %q does not name %s", c.Reason, c.Message, want)
		}
	}
}

// routeTarget targets HTTPRoute name, its rule section when given ("name:section").
func routeTarget(p *v1alpha1.BackendLoadBalancerPolicy, target string) *v1alpha1.BackendLoadBalancerPolicy {
	name, section, _ := strings.Cut(target, ":")
	ref := gwv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Group: gwv1.GroupName, Kind: "HTTPRoute", Name: gwv1.ObjectName(name)}}
	if section != "" {
		ref.SectionName = ptr(gwv1.SectionName(section))
	}
	p.Spec.TargetRefs = append(p.Spec.TargetRefs, ref)
	return p
}

// A policy that targets an HTTPRoute rule gives that rule's backends its settings, with a backend (so an Envoy
// cluster) of their own; the route's other rules, and other routes to the same Service, keep the Service's
// policy. One that names the rule wins over one for the whole route.
func TestBackendPolicyOnAnHTTPRouteRule(t *testing.T) {
	maglev := v1alpha1.BackendSettings{LoadBalancing: v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev}}
	ringHash := v1alpha1.BackendSettings{LoadBalancing: v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmRingHash}}
	leastRequest := v1alpha1.BackendSettings{LoadBalancing: v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmLeastRequest}}
	checkout := gwv1.HTTPRouteRule{Name: ptr(gwv1.SectionName("checkout")), Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/checkout")}}},
		BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}
	rest := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{toService("", "web", 80)}}
	in := input([]*gwv1.Gateway{gw("apps", "edge", httpListener("http", 80, ""))},
		route("apps", "shop", 0, "apps/edge", []string{"shop.example"}, checkout, rest))
	in.BackendPolicies = []*v1alpha1.BackendLoadBalancerPolicy{
		backendPolicy("apps", "web", 0, leastRequest, "web"),
		routeTarget(backendPolicy("apps", "checkout", 1, maglev), "shop:checkout"),
		routeTarget(backendPolicy("apps", "shop-whole", 0, ringHash), "shop"),
	}
	out := Translate(in)
	valid(t, out)
	p := policyFor(t, out, "shop.example")
	byRoute := map[string]v1alpha1.Algorithm{}
	for _, rt := range p.Spec.Routes {
		for _, ref := range rt.Backends {
			for _, b := range p.Spec.Backends {
				if b.Name == ref.Name {
					path := "/"
					if rt.Match.Path != nil {
						path = rt.Match.Path.Value
					}
					byRoute[path] = b.LoadBalancing.Algorithm
				}
			}
		}
	}
	// /checkout: the rule's own policy (Maglev); the route's other rule: the whole route's (RingHash).
	if byRoute["/checkout"] != v1alpha1.AlgorithmMaglev || byRoute["/"] != v1alpha1.AlgorithmRingHash || len(p.Spec.Backends) != 2 {
		t.Errorf("algorithms by route %v with %d backends, want /checkout Maglev and / RingHash, each its own backend", byRoute, len(p.Spec.Backends))
	}
	for policy, want := range map[string]string{"apps/checkout": "Accepted", "apps/shop-whole": "Conflicted"} {
		if _, c := ancestorCond(t, out, policy); c.Reason != want {
			t.Errorf("%s: %s (%s), want %s", policy, c.Reason, c.Message, want)
		}
	}
	if _, c := ancestorCond(t, out, "apps/shop-whole"); !strings.Contains(c.Message, "HTTPRoute shop rule checkout: checkout applies") {
		t.Errorf("the conflict does not name the rule and the policy that applies: %q", c.Message)
	}
	// The Service's policy applies to no backend here: every rule's policy beats it.
	if st := out.BackendPolicies[types.NamespacedName{Namespace: "apps", Name: "web"}]; len(st.Applied) != 0 {
		t.Errorf("the Service's policy applies to %+v, want nothing", st.Applied)
	}
	if st := out.BackendPolicies[types.NamespacedName{Namespace: "apps", Name: "checkout"}]; len(st.Applied) != 1 || st.Applied[0].Name != "web:80" {
		t.Errorf("the rule's policy applies to %+v, want web:80", st.Applied)
	}

	// Without the route policies, another route to the Service keeps the Service's.
	in.BackendPolicies = in.BackendPolicies[:2]
	in.Routes = append(in.Routes, route("apps", "other", 2, "apps/edge", []string{"other.example"}, rest))
	out = Translate(in)
	if got := backendOf(t, policyFor(t, out, "other.example"), "web").LoadBalancing.Algorithm; got != v1alpha1.AlgorithmLeastRequest {
		t.Errorf("another route's backend: %q, want the Service's LeastRequest", got)
	}

	// Session persistence is a route's: the rule the policy targets gets it, the route's other rule not; on a
	// Service target it is refused, and its fields are checked with the policy's own paths.
	in.BackendPolicies[1].Spec.SessionPersistence = &v1alpha1.SessionPersistence{Name: "shop-session"}
	p = policyFor(t, Translate(in), "shop.example")
	for _, rt := range p.Spec.Routes {
		checkoutRoute := rt.Match.Path != nil && rt.Match.Path.Value == "/checkout"
		if got := rt.SessionPersistence != nil && rt.SessionPersistence.Name == "shop-session"; got != checkoutRoute {
			t.Errorf("route %+v: session persistence %+v", rt.Match.Path, rt.SessionPersistence)
		}
	}
	onService := backendPolicy("apps", "svc-sessions", 0, maglev, "web")
	onService.Spec.SessionPersistence = &v1alpha1.SessionPersistence{Type: "Magic"}
	why := backendPolicyProblem(onService)
	for _, want := range []string{"spec.sessionPersistence: a session is a route's", "spec.sessionPersistence.type"} {
		if !strings.Contains(why, want) {
			t.Errorf("%q does not say %q", why, want)
		}
	}

	// A target of another kind is refused, naming both kinds it may be.
	bad := backendPolicy("apps", "bad", 0, maglev)
	bad.Spec.TargetRefs = []gwv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Group: gwv1.GroupName, Kind: "GRPCRoute", Name: "shop"}}}
	if why := backendPolicyProblem(bad); !strings.Contains(why, "spec.targetRefs[0]: must be a Service") || !strings.Contains(why, "or an HTTPRoute") {
		t.Errorf("a GRPCRoute target: %q", why)
	}
}
