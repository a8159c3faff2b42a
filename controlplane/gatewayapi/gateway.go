package gatewayapi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// gateway is one Gateway of an lbplane class while it is translated.
type gateway struct {
	obj       *gwv1.Gateway
	key       types.NamespacedName
	result    *Gateway
	listeners []*listener
	// envoyPort maps a listener port to the Envoy port serving it (0: none was free).
	envoyPort map[gwv1.PortNumber]int32
	// ruleBackends are the backends of the Gateway's policies made for rules that a BackendLoadBalancerPolicy
	// targets, with that policy (see policyBackends.add).
	ruleBackends map[PolicyBackend]types.NamespacedName
}

// listener is one Gateway listener and what attached to it.
type listener struct {
	spec   *gwv1.Listener
	status *gwv1.ListenerStatus
	// ok: the listener is accepted, not in conflict and has its certificate, so routes may attach.
	ok bool
	// valid: the listener is accepted and not in conflict, so routes attach to it (attachedRoutes counts
	// them) and the Gateway's Service has its port; ok adds that it has what serving needs (an HTTPS
	// listener without its certificate refuses connections on its port).
	valid bool
	// kinds are the route kinds it takes (only HTTPRoute is served).
	kinds []gwv1.RouteGroupKind
	// rules are the route rules attached, with the host names they are served for.
	rules []attachedRule
	// secret is the Secret an HTTPS listener serves its certificate from (its first certificateRef).
	secret types.NamespacedName
}

func (l *listener) hostname() string {
	if l.spec.Hostname == nil {
		return ""
	}
	return string(*l.spec.Hostname)
}

var httpRouteKind = gwv1.RouteGroupKind{Group: ptr(gwv1.Group(gwv1.GroupName)), Kind: "HTTPRoute"}

func ptr[T any](v T) *T { return &v }

func newGateway(g *gwv1.Gateway, in Input, grants grants, secrets map[types.NamespacedName]bool) *gateway {
	gw := &gateway{obj: g, key: types.NamespacedName{Namespace: g.Namespace, Name: g.Name},
		result:    &Gateway{Generation: g.Generation, Policies: map[gwv1.SectionName][]types.NamespacedName{}, unserved: map[gwv1.SectionName]string{}},
		envoyPort: map[gwv1.PortNumber]int32{}}
	for i := range g.Spec.Listeners {
		l := &g.Spec.Listeners[i]
		gw.listeners = append(gw.listeners, &listener{spec: l, status: &gwv1.ListenerStatus{Name: l.Name}})
	}
	gw.checkListeners(in, grants, secrets)
	return gw
}

// checkListeners decides each listener's Accepted, ResolvedRefs and Conflicted conditions and its kinds.
func (gw *gateway) checkListeners(in Input, grants grants, secrets map[types.NamespacedName]bool) {
	gen := gw.obj.Generation
	// Listeners on one port must agree on the protocol, and their host names must differ.
	protocols := map[gwv1.PortNumber]map[gwv1.ProtocolType]bool{}
	names := map[gwv1.PortNumber]map[string]int{}
	for _, l := range gw.listeners {
		p := l.spec.Port
		if protocols[p] == nil {
			protocols[p], names[p] = map[gwv1.ProtocolType]bool{}, map[string]int{}
		}
		protocols[p][l.spec.Protocol] = true
		names[p][l.hostname()]++
	}
	for _, l := range gw.listeners {
		st := l.status
		accepted, acceptedReason, acceptedMsg := true, string(gwv1.ListenerReasonAccepted), "listener accepted"
		if l.spec.Protocol != gwv1.HTTPProtocolType && l.spec.Protocol != gwv1.HTTPSProtocolType {
			accepted, acceptedReason = false, string(gwv1.ListenerReasonUnsupportedProtocol)
			acceptedMsg = fmt.Sprintf("protocol %s is not supported; lbplane serves HTTP and HTTPS listeners of Gateways", l.spec.Protocol)
		}
		conflicted, conflictReason, conflictMsg := false, string(gwv1.ListenerReasonNoConflicts), "no conflicts"
		switch {
		case len(protocols[l.spec.Port]) > 1:
			conflicted, conflictReason = true, string(gwv1.ListenerReasonProtocolConflict)
			conflictMsg = fmt.Sprintf("another listener on port %d has another protocol", l.spec.Port)
		case names[l.spec.Port][l.hostname()] > 1:
			conflicted, conflictReason = true, string(gwv1.ListenerReasonHostnameConflict)
			conflictMsg = fmt.Sprintf("another listener on port %d has the same hostname %q", l.spec.Port, l.hostname())
		}
		var resolved bool
		var resolvedReason, resolvedMsg string
		l.kinds, resolved, resolvedReason, resolvedMsg = routeKinds(l.spec, accepted)
		certOK := true
		if accepted && l.spec.Protocol == gwv1.HTTPSProtocolType {
			var certReason, certMsg string
			l.secret, certOK, certReason, certMsg = gw.certificate(l.spec, in, grants, secrets)
			if !certOK {
				gw.result.unserved[l.spec.Name] = "the listener's certificate does not resolve: " + certMsg
				if resolved {
					resolved, resolvedReason, resolvedMsg = false, certReason, certMsg
				}
			}
		}
		st.SupportedKinds = slices.Clone(l.kinds)
		if st.SupportedKinds == nil {
			st.SupportedKinds = []gwv1.RouteGroupKind{}
		}
		st.Conditions = []metav1.Condition{
			condition(string(gwv1.ListenerConditionAccepted), accepted, acceptedReason, acceptedMsg, gen),
			condition(string(gwv1.ListenerConditionResolvedRefs), resolved, resolvedReason, resolvedMsg, gen),
			condition(string(gwv1.ListenerConditionConflicted), conflicted, conflictReason, conflictMsg, gen),
		}
		// An HTTPS listener without its certificate is not served: it would answer with none.
		l.ok = accepted && !conflicted && certOK
		l.valid = accepted && !conflicted
	}
}

// certificate resolves an HTTPS listener's certificate: its first certificateRef, a Secret of type
// kubernetes.io/tls in the Gateway's namespace, or in another one that a ReferenceGrant opens to Gateways of
// this namespace. It says why not (the listener's ResolvedRefs condition) when the reference is of
// another kind, not permitted, not found or not a usable certificate and key. Every Secret it looks up is
// recorded in secrets.
func (gw *gateway) certificate(l *gwv1.Listener, in Input, grants grants, secrets map[types.NamespacedName]bool) (types.NamespacedName, bool, string, string) {
	const invalid = string(gwv1.ListenerReasonInvalidCertificateRef)
	if l.TLS == nil || len(l.TLS.CertificateRefs) == 0 {
		return types.NamespacedName{}, false, invalid, "an HTTPS listener needs tls.certificateRefs: lbplane terminates TLS (mode Terminate)"
	}
	if l.TLS.Mode != nil && *l.TLS.Mode != gwv1.TLSModeTerminate {
		return types.NamespacedName{}, false, invalid, fmt.Sprintf("tls.mode %s: an HTTPS listener terminates TLS (mode Terminate)", *l.TLS.Mode)
	}
	ref := l.TLS.CertificateRefs[0]
	group, kind := "", "Secret"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	name := types.NamespacedName{Namespace: gw.obj.Namespace, Name: string(ref.Name)}
	if ref.Namespace != nil {
		name.Namespace = string(*ref.Namespace)
	}
	switch {
	case group != "" || kind != "Secret":
		return name, false, invalid, fmt.Sprintf("tls.certificateRefs[0]: kind %s/%s is not supported; lbplane reads certificates from Secrets", group, kind)
	case name.Namespace != gw.obj.Namespace && !grants.allows("Gateway", gw.obj.Namespace, "Secret", name.Namespace, name.Name):
		return name, false, string(gwv1.ListenerReasonRefNotPermitted),
			fmt.Sprintf("tls.certificateRefs[0]: Secret %s/%s is in another namespace and no ReferenceGrant there allows it", name.Namespace, name.Name)
	}
	secrets[name] = true
	if in.Secret == nil {
		return name, false, invalid, fmt.Sprintf("tls.certificateRefs[0]: Secret %s/%s not found", name.Namespace, name.Name)
	}
	if problem := in.Secret(name); problem != "" {
		return name, false, invalid, "tls.certificateRefs[0]: " + problem
	}
	return name, true, "", ""
}

// routeKinds lists the kinds a listener takes, with its ResolvedRefs condition: HTTPRoute unless
// allowedRoutes.kinds names others; a kind lbplane does not serve makes ResolvedRefs false with
// InvalidRouteKinds.
func routeKinds(l *gwv1.Listener, accepted bool) ([]gwv1.RouteGroupKind, bool, string, string) {
	const resolved, resolvedMsg = string(gwv1.ListenerReasonResolvedRefs), "all references resolved"
	if !accepted {
		return nil, true, resolved, resolvedMsg
	}
	if l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) == 0 {
		return []gwv1.RouteGroupKind{httpRouteKind}, true, resolved, resolvedMsg
	}
	var kinds []gwv1.RouteGroupKind
	var bad []string
	for _, k := range l.AllowedRoutes.Kinds {
		group := gwv1.GroupName
		if k.Group != nil {
			group = string(*k.Group)
		}
		if group == gwv1.GroupName && k.Kind == "HTTPRoute" {
			kinds = append(kinds, httpRouteKind)
			continue
		}
		bad = append(bad, fmt.Sprintf("%s/%s", group, k.Kind))
	}
	if len(bad) > 0 {
		return kinds, false, string(gwv1.ListenerReasonInvalidRouteKinds), fmt.Sprintf("route kinds not supported: %v; lbplane serves HTTPRoute", bad)
	}
	return kinds, true, resolved, resolvedMsg
}

// assignPorts gives each listener port of the Gateway an Envoy port: the first free one of ports from a
// place given by a hash of the Gateway and the port, so that a Gateway keeps its ports while others come
// and go, unless it took the next free one because an older Gateway (older Gateways choose first) has its
// own: it moves back when that one goes away.
func (gw *gateway) assignPorts(ports []int32, used map[int32]bool) {
	for _, l := range gw.listeners {
		p := l.spec.Port
		if _, done := gw.envoyPort[p]; done || !l.valid || len(ports) == 0 {
			continue
		}
		start := int(hash32(gw.key.String(), strconv.Itoa(int(p))) % uint32(len(ports)))
		gw.envoyPort[p] = 0
		for i := range ports {
			cand := ports[(start+i)%len(ports)]
			if !used[cand] {
				used[cand] = true
				gw.envoyPort[p] = cand
				gw.result.Ports = append(gw.result.Ports, PortMapping{Name: fmt.Sprintf("%s-%d", dnsLabel(string(l.spec.Name), 50), p), Port: int32(p), EnvoyPort: cand,
					AppProtocol: strings.ToLower(string(l.spec.Protocol))})
				break
			}
		}
	}
	slices.SortFunc(gw.result.Ports, func(a, b PortMapping) int { return int(a.Port - b.Port) })
	for _, l := range gw.listeners {
		if l.valid && gw.envoyPort[l.spec.Port] == 0 {
			l.ok, l.valid = false, false
			meta.SetStatusCondition(&l.status.Conditions, condition(string(gwv1.ListenerConditionAccepted), false, string(gwv1.ListenerReasonPortUnavailable),
				"no Envoy port is free in lbplane's range for Gateway listeners (lbplane serve --gateway-api-ports)", gw.obj.Generation))
		}
	}
}

// allows tells whether the listener takes a route of that namespace (allowedRoutes.namespaces).
func (gw *gateway) allows(l *listener, ns string, nsLabels map[string]map[string]string) bool {
	from := gwv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar := l.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		sel = ar.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSelector:
		if sel == nil {
			return false
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return false
		}
		return s.Matches(labels.Set(nsLabels[ns]))
	case gwv1.NamespacesFromSame:
		return ns == gw.obj.Namespace
	}
	return false
}

// finish completes the Gateway's status but for Programmed: attached routes per listener, Accepted.
func (gw *gateway) finish() {
	gen := gw.obj.Generation
	st := &gw.result.Status
	accepted, some := true, false
	for _, l := range gw.listeners {
		l.status.AttachedRoutes = int32(countRoutes(l.rules))
		st.Listeners = append(st.Listeners, *l.status)
		if c := meta.FindStatusCondition(l.status.Conditions, string(gwv1.ListenerConditionAccepted)); c == nil || c.Status != metav1.ConditionTrue {
			accepted = false
		} else {
			some = true
		}
	}
	switch {
	case len(gw.obj.Spec.Addresses) > 0:
		gw.result.accepted = false
		st.Conditions = append(st.Conditions, condition(string(gwv1.GatewayConditionAccepted), false, string(gwv1.GatewayReasonUnsupportedAddress),
			"spec.addresses is not supported: lbplane gives each Gateway a Service of its own", gen))
	case !some:
		gw.result.accepted = false
		st.Conditions = append(st.Conditions, condition(string(gwv1.GatewayConditionAccepted), false, string(gwv1.GatewayReasonListenersNotValid),
			"no listener is valid", gen))
	case accepted:
		gw.result.accepted = true
		st.Conditions = append(st.Conditions, condition(string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonAccepted), "Gateway accepted", gen))
	default:
		// Valid listeners are served all the same.
		gw.result.accepted = true
		st.Conditions = append(st.Conditions, condition(string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonListenersNotValid),
			"some listeners are not valid; the others are served", gen))
	}
}

// countRoutes counts the distinct routes among attached rules.
func countRoutes(rules []attachedRule) int {
	seen := map[types.NamespacedName]bool{}
	for _, r := range rules {
		seen[r.route] = true
	}
	return len(seen)
}

// Programmed completes the status with the Programmed conditions, given whether each of the Gateway's
// policies is programmed (the Envoys of its group acknowledged it) and, when not, why. addresses are the
// Gateway's Service addresses.
func (g *Gateway) Programmed(programmed func(types.NamespacedName) (bool, string), addresses []gwv1.GatewayStatusAddress) gwv1.GatewayStatus {
	st := *g.Status.DeepCopy()
	st.Addresses = addresses
	gen := g.Generation
	all, why := g.accepted, ""
	if !g.accepted {
		why = "the Gateway is not accepted"
	}
	for i := range st.Listeners {
		l := &st.Listeners[i]
		ok, msg := true, "the Envoys acknowledged the listener's configuration"
		if why, ok := g.unserved[l.Name]; ok {
			meta.SetStatusCondition(&l.Conditions, condition(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid), why, gen))
			continue
		}
		if c := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionAccepted)); c == nil || c.Status != metav1.ConditionTrue {
			ok, msg = false, "the listener is not accepted"
			meta.SetStatusCondition(&l.Conditions, condition(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid), msg, gen))
			continue
		}
		if c := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionConflicted)); c != nil && c.Status == metav1.ConditionTrue {
			meta.SetStatusCondition(&l.Conditions, condition(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid), "the listener is in conflict", gen))
			continue
		}
		for _, key := range g.Policies[l.Name] {
			if p, m := programmed(key); !p {
				ok, msg = false, m
				break
			}
		}
		reason := string(gwv1.ListenerReasonProgrammed)
		if !ok {
			reason = string(gwv1.ListenerReasonPending)
			if all {
				all, why = false, msg
			}
		}
		meta.SetStatusCondition(&l.Conditions, condition(string(gwv1.ListenerConditionProgrammed), ok, reason, msg, gen))
	}
	switch {
	case all && len(addresses) == 0:
		st.Conditions = append(st.Conditions, condition(string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonAddressNotAssigned),
			"the Gateway's Service has no address yet", gen))
	case all:
		st.Conditions = append(st.Conditions, condition(string(gwv1.GatewayConditionProgrammed), true, string(gwv1.GatewayReasonProgrammed),
			"the Envoys acknowledged the Gateway's configuration", gen))
	case !g.accepted:
		st.Conditions = append(st.Conditions, condition(string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonInvalid), why, gen))
	default:
		st.Conditions = append(st.Conditions, condition(string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonPending), why, gen))
	}
	return st
}
