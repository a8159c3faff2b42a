package gatewayapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// entry is one match of one attached rule: one Envoy route.
type entry struct {
	rule  *attachedRule
	match gwv1.HTTPRouteMatch
	index int // the match's index in the rule
}

// pathRank orders path matches: exact first, then regular expressions, then prefixes.
func pathRank(m *gwv1.HTTPPathMatch) (int, int) {
	if m == nil || m.Type == nil || m.Value == nil {
		return 2, 1
	}
	switch *m.Type {
	case gwv1.PathMatchExact:
		return 0, len(*m.Value)
	case gwv1.PathMatchRegularExpression:
		return 1, len(*m.Value)
	}
	return 2, len(*m.Value)
}

// precedence orders entries as the specification does across every route of a host name: exact path, the
// longest prefix, a method match, the most header matches, the most query parameter matches, the oldest
// route, namespace/name, then the rule's and the match's order in the route.
func precedence(a, b entry) int {
	ar, al := pathRank(a.match.Path)
	br, bl := pathRank(b.match.Path)
	return cmp.Or(
		cmp.Compare(ar, br),
		-cmp.Compare(al, bl),
		-cmp.Compare(boolInt(a.match.Method != nil), boolInt(b.match.Method != nil)),
		-cmp.Compare(len(a.match.Headers), len(b.match.Headers)),
		-cmp.Compare(len(a.match.QueryParams), len(b.match.QueryParams)),
		cmp.Compare(a.rule.order, b.rule.order),
		cmp.Compare(a.rule.index, b.rule.index),
		cmp.Compare(a.index, b.index),
	)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// vhost is one host name of one Envoy port of a Gateway: one policy.
type vhost struct {
	hostname  string
	listeners map[gwv1.SectionName]bool
	entries   []entry
}

// policies makes the Gateway's policies: per listener port, one per host name served there. A policy whose
// inputs (see builtKey) are those of the previous translation's policy of the same name is that policy, not
// a new one; built records each policy made, with its key, for the next translation.
func (gw *gateway) policies(in Input, bp *backendPolicies, built map[types.NamespacedName]builtPolicy) []*v1alpha1.LoadBalancerPolicy {
	var out []*v1alpha1.LoadBalancerPolicy
	byPort := map[gwv1.PortNumber][]*listener{}
	var ports []gwv1.PortNumber
	for _, l := range gw.listeners {
		if !l.ok {
			continue
		}
		if byPort[l.spec.Port] == nil {
			ports = append(ports, l.spec.Port)
		}
		byPort[l.spec.Port] = append(byPort[l.spec.Port], l)
	}
	slices.Sort(ports)
	for _, port := range ports {
		listeners := byPort[port]
		hosts := map[string]*vhost{}
		host := func(h string) *vhost {
			if hosts[h] == nil {
				hosts[h] = &vhost{hostname: h, listeners: map[gwv1.SectionName]bool{}}
			}
			return hosts[h]
		}
		// Every listener's own name is served, routes or not, so that a request for it never falls through
		// to a wider listener's routes (listener isolation); so is every name a route narrows it to.
		for _, l := range listeners {
			host(l.hostname()).listeners[l.spec.Name] = true
			for _, ar := range l.rules {
				for _, h := range ar.hostnames {
					host(h)
				}
			}
		}
		// Each name gets the rules of every route whose names cover it, on the listener it belongs to: a
		// route of "*.example.com" serves "a.example.com" too when another route made a host of it.
		index := make([]ruleIndex, len(listeners))
		for i, l := range listeners {
			index[i] = indexRules(l)
		}
		for h, v := range hosts {
			for li, l := range listeners {
				if !covers(l.hostname(), h) || isolatedFrom(l, h, listeners) {
					continue
				}
				for _, i := range index[li].covering(h) {
					ar := &l.rules[i]
					v.listeners[l.spec.Name] = true
					if ar.rule == nil {
						continue
					}
					matches := ar.rule.Matches
					if len(matches) == 0 {
						matches = []gwv1.HTTPRouteMatch{{}}
					}
					for j, m := range matches {
						v.entries = append(v.entries, entry{rule: ar, match: m, index: j})
					}
				}
			}
		}
		for _, h := range slices.Sorted(maps.Keys(hosts)) {
			v := hosts[h]
			slices.SortStableFunc(v.entries, precedence)
			l := owner(h, listeners)
			key := types.NamespacedName{Namespace: gw.obj.Namespace, Name: gw.policyName(port, h)}
			ik := gw.builtKey(in, bp, port, v, l)
			var prev builtPolicy
			if in.Previous != nil {
				prev = in.Previous.built[key]
			}
			b := prev
			if ik == "" || prev.key != ik {
				b = builtPolicy{key: ik}
				b.policy, b.ruleBackends = gw.policy(in, bp, port, v, l)
				if prev.policy != nil && equality.Semantic.DeepEqual(prev.policy, b.policy) {
					b.policy = prev.policy // made of other inputs, the same: handed on all the same
				}
			}
			built[key] = b
			for name, rp := range b.ruleBackends {
				if gw.ruleBackends == nil {
					gw.ruleBackends = map[PolicyBackend]types.NamespacedName{}
				}
				gw.ruleBackends[PolicyBackend{Policy: key, Backend: name}] = rp
			}
			out = append(out, b.policy)
			for name := range v.listeners {
				gw.result.Policies[name] = append(gw.result.Policies[name], key)
			}
		}
	}
	return out
}

// ruleIndex holds a listener's rules by the host names they serve (indexes into listener.rules), so that
// the rules of one host name are found without looking at every rule of the listener.
type ruleIndex map[string][]int

func indexRules(l *listener) ruleIndex {
	ix := ruleIndex{}
	for i := range l.rules {
		for _, h := range l.rules[i].hostnames {
			if s := ix[h]; len(s) == 0 || s[len(s)-1] != i {
				ix[h] = append(ix[h], i)
			}
		}
	}
	return ix
}

// covering returns, in order, the rules with a host name that covers h (see covers): every name (""), h
// itself, and each wildcard of a parent domain of h ("*.example.com" for "a.example.com" and
// "*.a.example.com").
func (ix ruleIndex) covering(h string) []int {
	out := slices.Clone(ix[""])
	if h != "" {
		out = append(out, ix[h]...)
		for k := 1; k < len(h); k++ {
			if h[k] == '.' {
				if w := "*" + h[k:]; w != h {
					out = append(out, ix[w]...)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// owner is the listener of the port that requests for host name h belong to: the most specific one whose
// name matches h (for an HTTPS port, its certificate is served for h).
func owner(h string, listeners []*listener) *listener {
	for _, l := range listeners {
		if covers(l.hostname(), h) && !isolatedFrom(l, h, listeners) {
			return l
		}
	}
	return listeners[0]
}

// isolatedFrom tells whether requests for host name h belong to another listener of the port, one more
// specific than l that matches h: l's routes are then not served for h.
func isolatedFrom(l *listener, h string, listeners []*listener) bool {
	for _, o := range listeners {
		if o != l && moreSpecific(o.hostname(), l.hostname()) && covers(o.hostname(), h) {
			return true
		}
	}
	return false
}

// policyName names the policy of host name h of an Envoy port of the Gateway.
func (gw *gateway) policyName(port gwv1.PortNumber, h string) string {
	hostLabel := "any"
	if h != "" {
		hostLabel = hash8(h)
	}
	return fmt.Sprintf("gateway.%s.%d.%s", gw.obj.Name, port, hostLabel)
}

// policy makes the policy of one host name of one Envoy port, its entries in precedence order; l is the
// listener the host name belongs to. It returns, with the policy, the backends it made for rules that a
// BackendLoadBalancerPolicy targets, by name, with that policy.
func (gw *gateway) policy(in Input, bp *backendPolicies, port gwv1.PortNumber, v *vhost, l *listener) (*v1alpha1.LoadBalancerPolicy, map[string]types.NamespacedName) {
	name := gw.policyName(port, v.hostname)
	p := &v1alpha1.LoadBalancerPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: gw.obj.Namespace, Name: name, CreationTimestamp: gw.obj.CreationTimestamp, Generation: 1,
			UID:         types.UID(fmt.Sprintf("%s/%d/%s", gw.obj.UID, port, v.hostname)),
			Annotations: map[string]string{AnnotationGateway: gw.key.String(), AnnotationPort: strconv.Itoa(int(port)), AnnotationHostname: v.hostname}},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			ProxyGroup: in.ProxyGroup,
			Listener:   v1alpha1.Listener{Address: in.Address, Port: gw.envoyPort[port], Protocol: v1alpha1.ProtocolHTTP},
		},
	}
	if v.hostname != "" {
		p.Spec.Listener.Hostnames = []string{v.hostname}
	}
	if l.spec.Protocol == gwv1.HTTPSProtocolType {
		// The certificate is served for the policy's host name (SNI), or for clients without SNI or with a
		// name no other host name of the port has when the policy serves every name.
		p.Spec.Listener.Protocol = v1alpha1.ProtocolHTTPS
		cert := v1alpha1.Certificate{SecretName: l.secret.Name}
		if l.secret.Namespace != gw.obj.Namespace {
			cert.SecretNamespace = l.secret.Namespace // a ReferenceGrant there allows it (certificate)
		}
		p.Spec.Listener.TLS = &v1alpha1.ListenerTLS{Certificates: []v1alpha1.Certificate{cert}}
	}
	pb := &policyBackends{bp: bp, index: map[string]int{}}
	origins := make(map[string]RuleRef, len(v.entries))
	names := make(map[string]bool, len(v.entries))
	immediate, paused, abort := false, false, false
	for _, e := range v.entries {
		// Staged when one of its routes asks for it, with the first one's settings; else immediate when one
		// asks for that.
		ask := e.rule.rollout
		if ask.settings != nil && p.Spec.Rollout == nil {
			p.Spec.Rollout = ask.settings.DeepCopy()
		}
		immediate, paused, abort = immediate || ask.immediate, paused || ask.paused, abort || ask.abort
		rt := pb.routeOf(e, routeName(e, names), p, int32(port))
		p.Spec.Routes = append(p.Spec.Routes, rt)
		ref := RuleRef{Route: e.rule.route.String(), Rule: e.rule.index, Match: e.index}
		if n := e.rule.rule.Name; n != nil {
			ref.Name = string(*n)
		}
		origins[rt.Name] = ref
	}
	if immediate && p.Spec.Rollout == nil {
		p.Annotations[AnnotationRollout] = RolloutImmediate
	}
	if paused {
		p.Annotations[apiwire.PausedAnnotation] = "true"
	}
	if abort {
		p.Annotations[GatewayRolloutAbort] = "true"
	}
	var listeners []string
	for name := range v.listeners {
		listeners = append(listeners, string(name))
	}
	if len(listeners) > 0 {
		slices.Sort(listeners)
		p.Annotations[AnnotationListeners] = strings.Join(listeners, ",")
	}
	if len(origins) > 0 {
		b, _ := json.Marshal(origins)
		p.Annotations[AnnotationRules] = string(b)
	}
	if len(p.Spec.Routes) == 0 {
		// Nothing attached: the host name answers 404, as it would with routes that do not match.
		p.Spec.Routes = []v1alpha1.Route{{Name: "none", DirectResponse: &v1alpha1.DirectResponse{Status: 404}}}
	}
	return p, pb.ruleBackends
}

// routeName names the route one match of one rule becomes after what it is made of, not after its place
// among the host name's routes: "<HTTPRoute name>-<hash of its namespace/name>-<rule>-<match>", as in
// web-1f2e3d4c-0-0. A rule added before others, or another HTTPRoute attached to the host name, leaves the
// names of the other routes as they were, and with them what is named after them (a route's session
// cluster, diff --traffic's pairs). used holds the names taken in the policy: the same match reached twice
// (through two listeners of the port) gets a second name.
func routeName(e entry, used map[string]bool) string {
	r := e.rule.route
	name := fmt.Sprintf("%s-%s-%d-%d", dnsLabel(r.Name, 40), hash8(r.Namespace, r.Name), e.rule.index, e.index)
	for n := 2; used[name]; n++ {
		name = fmt.Sprintf("%s-%s-%d-%d-%d", dnsLabel(r.Name, 40), hash8(r.Namespace, r.Name), e.rule.index, e.index, n)
	}
	used[name] = true
	return name
}

// policyBackends are the backends of one policy while it is made.
type policyBackends struct {
	bp *backendPolicies
	// index maps a backend's name to its index in spec.backends.
	index map[string]int
	// ruleBackends are the backends made for rules that a BackendLoadBalancerPolicy targets, with it.
	ruleBackends map[string]types.NamespacedName
}

// routeOf turns one match of one rule into a route of the policy, adding the Services it names to
// spec.backends once per Service port.
func (pb *policyBackends) routeOf(e entry, name string, p *v1alpha1.LoadBalancerPolicy, port int32) v1alpha1.Route {
	rt := v1alpha1.Route{Name: name}
	m := e.match
	if pm := m.Path; pm != nil && pm.Value != nil {
		t := v1alpha1.PathMatchSegmentPrefix
		if pm.Type != nil {
			switch *pm.Type {
			case gwv1.PathMatchExact:
				t = v1alpha1.PathMatchExact
			case gwv1.PathMatchRegularExpression:
				t = v1alpha1.PathMatchRegex
			}
		}
		rt.Match.Path = &v1alpha1.PathMatch{Type: t, Value: *pm.Value}
	}
	for _, h := range m.Headers {
		t := v1alpha1.HeaderMatchExact
		if h.Type != nil && *h.Type == gwv1.HeaderMatchRegularExpression {
			t = v1alpha1.HeaderMatchRegex
		}
		rt.Match.Headers = append(rt.Match.Headers, v1alpha1.HeaderMatch{Name: string(h.Name), Type: t, Value: h.Value})
	}
	if m.Method != nil {
		rt.Match.Method = string(*m.Method)
	}
	for _, q := range m.QueryParams {
		t := v1alpha1.QueryParamMatchExact
		if q.Type != nil && *q.Type == gwv1.QueryParamMatchRegularExpression {
			t = v1alpha1.QueryParamMatchRegex
		}
		rt.Match.QueryParams = append(rt.Match.QueryParams, v1alpha1.QueryParamMatch{Name: string(q.Name), Type: t, Value: q.Value})
	}
	rule := e.rule.rule
	for _, f := range rule.Filters {
		switch f.Type {
		case gwv1.HTTPRouteFilterRequestHeaderModifier:
			if f.RequestHeaderModifier != nil {
				rt.RequestHeaders = headerModifier(f.RequestHeaderModifier)
			}
		case gwv1.HTTPRouteFilterResponseHeaderModifier:
			if f.ResponseHeaderModifier != nil {
				rt.ResponseHeaders = headerModifier(f.ResponseHeaderModifier)
			}
		case gwv1.HTTPRouteFilterRequestRedirect:
			if f.RequestRedirect != nil {
				rt.Redirect = redirect(f.RequestRedirect, m.Path, port)
			}
		case gwv1.HTTPRouteFilterURLRewrite:
			if f.URLRewrite != nil {
				rt.Rewrite = urlRewrite(f.URLRewrite, m.Path)
			}
		}
	}
	if rt.Redirect != nil {
		// The CRD refuses a rule with both; a redirect sends nothing upstream to rewrite.
		rt.Rewrite = nil
		return rt
	}
	timeouts(rule.Timeouts, &rt)
	if rp := e.rule.policy; rp != nil && rp.Spec.SessionPersistence != nil {
		rt.SessionPersistence = rp.Spec.SessionPersistence.DeepCopy()
	}
	var errorWeight int32
	for _, b := range e.rule.backends {
		switch {
		case b.mirror && !b.invalid && b.percent > 0 && !slices.ContainsFunc(e.rule.backends, func(o backend) bool { return !o.mirror && o.same(b) }):
			// A mirror that does not resolve copies nothing (the route's ResolvedRefs says why); nor does one
			// of a Service port the rule routes to, nor a second one of the same (lbplane mirrors to other
			// backends, each once: the first wins).
			name := pb.add(p, b, e.rule.policy)
			if !slices.ContainsFunc(rt.Mirrors, func(m v1alpha1.Mirror) bool { return m.Backend == name }) {
				rt.Mirrors = append(rt.Mirrors, v1alpha1.Mirror{Backend: name, Percent: ptr(b.percent)})
			}
			continue
		case b.mirror:
			continue
		case b.invalid:
			errorWeight += b.weight
			continue
		}
		bname := pb.add(p, b, e.rule.policy)
		if i := slices.IndexFunc(rt.Backends, func(r v1alpha1.BackendRef) bool { return r.Name == bname }); i >= 0 {
			*rt.Backends[i].Weight += b.weight
		} else {
			rt.Backends = append(rt.Backends, v1alpha1.BackendRef{Name: bname, Weight: ptr(b.weight)})
		}
	}
	var served int32
	for _, r := range rt.Backends {
		served += *r.Weight
	}
	switch {
	case served == 0:
		// No backend, or none that resolves or takes traffic: every request gets 500, as the specification
		// asks.
		rt.Backends, rt.Mirrors, rt.Rewrite = nil, nil, nil
		rt.DirectResponse = &v1alpha1.DirectResponse{Status: 500}
	case errorWeight > 0:
		rt.ErrorWeight = ptr(errorWeight)
	}
	return rt
}

// add adds the Service port b names to the policy's backends, once, and returns its name there, with the
// settings of the BackendLoadBalancerPolicy that applies to it: rp, the one that targets the rule, whose
// backends are its own, named after rp too; else the one that applies to the Service port (forPort).
func (pb *policyBackends) add(p *v1alpha1.LoadBalancerPolicy, b backend, rp *v1alpha1.BackendLoadBalancerPolicy) string {
	name := backendName(b, rp)
	if _, ok := pb.index[name]; ok {
		return name
	}
	pb.index[name] = len(p.Spec.Backends)
	nb := v1alpha1.Backend{Name: name, Service: &v1alpha1.ServiceRef{Namespace: b.namespace, Name: b.name, Port: b.port}}
	if rp != nil {
		if pb.ruleBackends == nil {
			pb.ruleBackends = map[string]types.NamespacedName{}
		}
		pb.ruleBackends[name] = types.NamespacedName{Namespace: rp.Namespace, Name: rp.Name}
		nb.BackendSettings = *rp.Spec.Backend.DeepCopy()
	} else if winner, _ := pb.bp.forPort(servicePort{namespace: b.namespace, name: b.name, port: b.port}); winner != nil {
		nb.BackendSettings = *winner.Spec.Backend.DeepCopy()
	}
	p.Spec.Backends = append(p.Spec.Backends, nb)
	return name
}

// backendName names the backend of a policy that sends to the Service port b names, for the rules that rp
// targets (nil: for the others).
func backendName(b backend, rp *v1alpha1.BackendLoadBalancerPolicy) string {
	name := fmt.Sprintf("%s-%d-%s", dnsLabel(b.name, 40), b.port, hash8(b.namespace, b.name)[:6])
	if rp != nil {
		name += "-" + hash8(rp.Namespace, rp.Name)[:6]
	}
	return name
}

// timeouts maps a rule's timeouts: request is the route's whole-request timeout ("0s" turns it off in both),
// backendRequest each try's ("0s": none but the route's), with the retries every route has without a retry
// block (a request that never reached an endpoint is tried on another at once).
func timeouts(t *gwv1.HTTPRouteTimeouts, rt *v1alpha1.Route) {
	if t == nil {
		return
	}
	duration := func(d *gwv1.Duration) *metav1.Duration {
		if d == nil {
			return nil
		}
		v, err := time.ParseDuration(string(*d))
		if err != nil {
			return nil // the CRD's pattern admits only what time.ParseDuration reads
		}
		return &metav1.Duration{Duration: v}
	}
	rt.Timeout = duration(t.Request)
	// "0s" turns the per-try timeout off: each try then has the route's.
	if d := duration(t.BackendRequest); d != nil && d.Duration > 0 {
		rt.Retry = v1alpha1.ImplicitRetry()
		rt.Retry.PerTryTimeout = d
	}
}

func headerModifier(f *gwv1.HTTPHeaderFilter) *v1alpha1.HeaderModifier {
	hm := &v1alpha1.HeaderModifier{Remove: slices.Clone(f.Remove)}
	for _, h := range f.Set {
		hm.Set = append(hm.Set, v1alpha1.HeaderValue{Name: string(h.Name), Value: h.Value})
	}
	for _, h := range f.Add {
		hm.Add = append(hm.Add, v1alpha1.HeaderValue{Name: string(h.Name), Value: h.Value})
	}
	return hm
}

// port is the Gateway listener's: a redirect that sets neither scheme nor port keeps the port the client
// connected to, which is the listener's and not the Envoy port behind the Gateway's Service (the
// specification; Envoy leaves out 80 for http and 443 for https).
func redirect(f *gwv1.HTTPRequestRedirectFilter, match *gwv1.HTTPPathMatch, port int32) *v1alpha1.Redirect {
	r := &v1alpha1.Redirect{}
	if f.Scheme != nil {
		r.Scheme = strings.ToLower(*f.Scheme)
	}
	if f.Hostname != nil {
		r.Hostname = string(*f.Hostname)
	}
	switch {
	case f.Port != nil:
		r.Port = ptr(int32(*f.Port))
	case f.Scheme == nil:
		r.Port = ptr(port)
	}
	if f.StatusCode != nil {
		r.StatusCode = ptr(int32(*f.StatusCode))
	}
	r.Path = pathModifier(f.Path, match)
	return r
}

// urlRewrite is a URLRewrite filter of a rule whose match is match: the host name and path sent upstream.
func urlRewrite(f *gwv1.HTTPURLRewriteFilter, match *gwv1.HTTPPathMatch) *v1alpha1.Rewrite {
	rw := &v1alpha1.Rewrite{Path: pathModifier(f.Path, match)}
	if f.Hostname != nil {
		rw.Hostname = string(*f.Hostname)
	}
	return rw
}

// pathModifier is the path change of a redirect or a URLRewrite filter of a rule whose match is match. A
// ReplacePrefixMatch needs a PathPrefix match (the type the specification defaults to), which the CRD
// requires; without one there is no prefix to replace, and none is. Its empty replacement strips the prefix,
// as "/" does (the specification's table), and lbplane's paths start with "/".
func pathModifier(pm *gwv1.HTTPPathModifier, match *gwv1.HTTPPathMatch) *v1alpha1.RedirectPath {
	switch {
	case pm == nil:
		return nil
	case pm.Type == gwv1.FullPathHTTPPathModifier && pm.ReplaceFullPath != nil:
		return &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplaceFullPath, Value: *pm.ReplaceFullPath}
	case pm.Type == gwv1.PrefixMatchHTTPPathModifier && pm.ReplacePrefixMatch != nil &&
		match != nil && match.Value != nil && (match.Type == nil || *match.Type == gwv1.PathMatchPathPrefix):
		return &v1alpha1.RedirectPath{Type: v1alpha1.RedirectReplacePrefixMatch, Value: cmp.Or(*pm.ReplacePrefixMatch, "/")}
	}
	return nil
}
