package gatewayapi

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// attachedRule is one HTTPRoute rule attached to a listener, with the host names it serves there.
type attachedRule struct {
	route types.NamespacedName
	// uid and generation are the HTTPRoute's: which version of its spec the rule is of (see builtKey).
	uid        types.UID
	generation int64
	order      int // the route's place in the specification's order (oldest first, then namespace/name)
	index      int // the rule's index in the route
	rule       *gwv1.HTTPRouteRule
	hostnames  []string // "" is every host name
	backends   []backend
	// rollout is what the route's annotations ask of the rollouts of the host names the rule is served on.
	rollout *rolloutAsk
	// policy is the BackendLoadBalancerPolicy that targets the rule (or its whole route), whose settings its
	// backends get instead of their Services' (see backendPolicies.forRule); conflicted are the others that
	// target it, invalid those that target it and apply nowhere.
	policy              *v1alpha1.BackendLoadBalancerPolicy
	conflicted, invalid []*v1alpha1.BackendLoadBalancerPolicy
}

// backend is one backendRef of a rule, resolved: a Service port, or invalid (its share gets 500); or the
// Service a RequestMirror filter copies requests to (mirror, with the share of requests in percent).
type backend struct {
	namespace, name string
	port            int32
	weight          int32
	invalid         bool
	mirror          bool
	percent         int32
}

// same tells whether b and o are the same Service port.
func (b backend) same(o backend) bool {
	return b.namespace == o.namespace && b.name == o.name && b.port == o.port
}

// grants are the ReferenceGrants of the cluster.
type grants []*gwv1.ReferenceGrant

// allows tells whether an object of kind fromKind (of the Gateway API group) in namespace from may
// reference the core object toKind/name in namespace to: an HTTPRoute a Service, a Gateway a Secret.
func (g grants) allows(fromKind, from, toKind, to, name string) bool {
	for _, rg := range g {
		if rg.Namespace != to {
			continue
		}
		fromOK := slices.ContainsFunc(rg.Spec.From, func(f gwv1.ReferenceGrantFrom) bool {
			return string(f.Group) == gwv1.GroupName && string(f.Kind) == fromKind && string(f.Namespace) == from
		})
		toOK := slices.ContainsFunc(rg.Spec.To, func(t gwv1.ReferenceGrantTo) bool {
			return t.Group == "" && string(t.Kind) == toKind && (t.Name == nil || string(*t.Name) == name)
		})
		if fromOK && toOK {
			return true
		}
	}
	return false
}

// attach attaches the route to each parent of lbplane's, and returns what it made: the route's parent
// statuses and the rules it attached, with the Services it read (see attachedRoute).
func attach(in Input, r *gwv1.HTTPRoute, order int, gateways map[types.NamespacedName]*gateway, grants grants) *attachedRoute {
	a := &attachedRoute{route: r}
	var out []gwv1.RouteParentStatus
	gen := r.Generation
	backends, resolved, reason, msg := resolveBackends(in, r, grants, a)
	ask := routeAsk(r)
	a.rollout = &ask
	for _, ref := range r.Spec.ParentRefs {
		group, kind := gwv1.GroupName, "Gateway"
		if ref.Group != nil {
			group = string(*ref.Group)
		}
		if ref.Kind != nil {
			kind = string(*ref.Kind)
		}
		if group != gwv1.GroupName || kind != "Gateway" {
			continue
		}
		ns := r.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		gw := gateways[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}]
		if gw == nil {
			continue // not lbplane's (or not there): another controller's to answer
		}
		ps := gwv1.RouteParentStatus{ParentRef: ref, ControllerName: ControllerName}
		ok, why, text := gw.attachRoute(in, r, order, ref, backends, a)
		if ok {
			text := "route accepted"
			if ask.problem != "" {
				text += "; " + ask.problem + "; its changes are staged with the default settings"
			}
			ps.Conditions = append(ps.Conditions, condition(string(gwv1.RouteConditionAccepted), true, string(gwv1.RouteReasonAccepted), text, gen))
		} else {
			ps.Conditions = append(ps.Conditions, condition(string(gwv1.RouteConditionAccepted), false, why, text, gen))
		}
		ps.Conditions = append(ps.Conditions, condition(string(gwv1.RouteConditionResolvedRefs), resolved, reason, msg, gen))
		out = append(out, ps)
	}
	a.parents = out
	return a
}

// resolveBackends resolves every backendRef of every rule, and says whether all of them resolved; a
// records the Services it looked up.
func resolveBackends(in Input, r *gwv1.HTTPRoute, grants grants, a *attachedRoute) ([][]backend, bool, string, string) {
	out := make([][]backend, len(r.Spec.Rules))
	reason, msg := "", ""
	fail := func(rs gwv1.RouteConditionReason, m func() string) {
		if reason == "" {
			reason, msg = string(rs), m()
		}
	}
	for i, rule := range r.Spec.Rules {
		// The backendRefs, then the Services the rule's RequestMirror filters name, resolved alike. A ref's
		// field path is written out only for a message: most resolve.
		type named struct {
			ref  gwv1.BackendObjectReference
			path func() string
			b    backend
		}
		var refs []named
		for j, ref := range rule.BackendRefs {
			b := backend{weight: 1}
			if ref.Weight != nil {
				b.weight = *ref.Weight
			}
			refs = append(refs, named{ref.BackendObjectReference, func() string { return fmt.Sprintf("spec.rules[%d].backendRefs[%d]", i, j) }, b})
		}
		for j, f := range rule.Filters {
			if f.Type == gwv1.HTTPRouteFilterRequestMirror && f.RequestMirror != nil {
				refs = append(refs, named{f.RequestMirror.BackendRef, func() string { return fmt.Sprintf("spec.rules[%d].filters[%d].requestMirror.backendRef", i, j) },
					backend{mirror: true, percent: mirrorPercent(f.RequestMirror)}})
			}
		}
		for _, n := range refs {
			ref, b := n.ref, n.b
			b.namespace, b.name = r.Namespace, string(ref.Name)
			if ref.Namespace != nil {
				b.namespace = string(*ref.Namespace)
			}
			group, kind := "", "Service"
			if ref.Group != nil {
				group = string(*ref.Group)
			}
			if ref.Kind != nil {
				kind = string(*ref.Kind)
			}
			switch {
			case group != "" || kind != "Service":
				b.invalid = true
				fail(gwv1.RouteReasonInvalidKind, func() string {
					return fmt.Sprintf("%s: kind %s/%s is not supported; lbplane routes to Services", n.path(), group, kind)
				})
			case b.namespace != r.Namespace && !grants.allows("HTTPRoute", r.Namespace, "Service", b.namespace, b.name):
				b.invalid = true
				fail(gwv1.RouteReasonRefNotPermitted, func() string {
					return fmt.Sprintf("%s: Service %s/%s is in another namespace and no ReferenceGrant there allows it", n.path(), b.namespace, b.name)
				})
			case ref.Port == nil:
				b.invalid = true
				fail(gwv1.RouteReasonUnsupportedValue, func() string { return fmt.Sprintf("%s: port is required for a Service", n.path()) })
			default:
				b.port = int32(*ref.Port)
				svc := types.NamespacedName{Namespace: b.namespace, Name: b.name}
				ports, ok := in.Services[svc]
				a.services = append(a.services, seenService{name: svc, ports: ports, found: ok})
				switch {
				case !ok:
					b.invalid = true
					fail(gwv1.RouteReasonBackendNotFound, func() string { return fmt.Sprintf("%s: Service %s/%s not found", n.path(), b.namespace, b.name) })
				case !slices.Contains(ports, b.port):
					b.invalid = true
					fail(gwv1.RouteReasonBackendNotFound, func() string {
						return fmt.Sprintf("%s: Service %s/%s has no port %d", n.path(), b.namespace, b.name, b.port)
					})
				}
			}
			out[i] = append(out[i], b)
		}
	}
	if reason == "" {
		return out, true, string(gwv1.RouteReasonResolvedRefs), "all references resolved"
	}
	return out, false, reason, msg
}

// mirrorPercent is the share of requests a mirror copies, in whole percent (lbplane's unit): percent, or the
// fraction rounded to the nearest percent, or all of them.
func mirrorPercent(m *gwv1.HTTPRequestMirrorFilter) int32 {
	switch {
	case m.Percent != nil:
		return *m.Percent
	case m.Fraction != nil:
		den := int32(100)
		if m.Fraction.Denominator != nil && *m.Fraction.Denominator > 0 {
			den = *m.Fraction.Denominator
		}
		return int32((int64(m.Fraction.Numerator)*100 + int64(den)/2) / int64(den))
	}
	return 100
}

// attachRoute attaches r to the listeners of gw that ref selects and that take it, recording each rule in a;
// it says why not when none does.
func (gw *gateway) attachRoute(in Input, r *gwv1.HTTPRoute, order int, ref gwv1.ParentReference, backends [][]backend, a *attachedRoute) (bool, string, string) {
	var candidates []int
	for i, l := range gw.listeners {
		if ref.SectionName != nil && l.spec.Name != *ref.SectionName {
			continue
		}
		if ref.Port != nil && l.spec.Port != *ref.Port {
			continue
		}
		candidates = append(candidates, i)
	}
	if len(candidates) == 0 {
		return false, string(gwv1.RouteReasonNoMatchingParent), "no listener of the Gateway matches the parentRef's sectionName and port"
	}
	allowed, hostMatch := false, false
	key := types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
	for _, li := range candidates {
		l := gw.listeners[li]
		if !l.valid || !slices.Contains(l.kinds, httpRouteKind) || !gw.allows(l, r.Namespace, in.Namespaces) {
			continue
		}
		allowed = true
		hosts := intersect(l.hostname(), r.Spec.Hostnames)
		if len(hosts) == 0 {
			continue
		}
		hostMatch = true
		place := func(ar attachedRule) {
			a.placed = append(a.placed, placedRule{gateway: gw.key, listener: li, rule: ar})
			ar.order = order
			l.rules = append(l.rules, ar)
		}
		for i := range r.Spec.Rules {
			place(attachedRule{route: key, uid: r.UID, generation: r.Generation, index: i, rule: &r.Spec.Rules[i], hostnames: hosts, backends: backends[i],
				rollout: a.rollout})
		}
		if len(r.Spec.Rules) == 0 {
			place(attachedRule{route: key, uid: r.UID, generation: r.Generation, index: -1, hostnames: hosts, rollout: a.rollout})
		}
	}
	switch {
	case !allowed:
		return false, string(gwv1.RouteReasonNotAllowedByListeners), "no listener the parentRef selects allows this route (allowedRoutes)"
	case !hostMatch:
		return false, string(gwv1.RouteReasonNoMatchingListenerHostname), "no hostname of the route matches a listener's hostname"
	}
	return true, "", ""
}

// intersect returns the host names a route serves on a listener: the route's names that the listener's
// name matches (a wildcard matches them), or the listener's name where a route's wildcard is wider; nil
// when none. "" stands for every name.
func intersect(listener string, route []gwv1.Hostname) []string {
	if len(route) == 0 {
		return []string{listener}
	}
	var out []string
	for _, h := range route {
		rh := string(h)
		switch {
		case listener == "":
			out = append(out, rh)
		case covers(listener, rh):
			out = append(out, rh)
		case covers(rh, listener):
			out = append(out, listener)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// covers tells whether every name pattern b matches is matched by pattern a ("" matches all; "*.x" matches
// any name with one or more labels before ".x").
func covers(a, b string) bool {
	switch {
	case a == "":
		return true
	case a == b:
		return true
	case strings.HasPrefix(a, "*."):
		suffix := a[1:] // ".x"
		if strings.HasPrefix(b, "*.") {
			return strings.HasSuffix(b[1:], suffix) && len(b[1:]) > len(suffix)
		}
		return strings.HasSuffix(b, suffix) && len(b) > len(suffix)
	}
	return false
}

// moreSpecific tells whether listener name a is more specific than b: an exact name over a wildcard, a
// longer wildcard over a shorter one, anything over no name.
func moreSpecific(a, b string) bool {
	switch {
	case a == b:
		return false
	case b == "":
		return true
	case a == "":
		return false
	case !strings.HasPrefix(a, "*.") && strings.HasPrefix(b, "*."):
		return true
	case strings.HasPrefix(a, "*.") && strings.HasPrefix(b, "*."):
		return len(a) > len(b)
	}
	return false
}
