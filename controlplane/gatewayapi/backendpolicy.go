package gatewayapi

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// BackendPolicy is what one BackendLoadBalancerPolicy becomes: its status, an entry per Gateway whose
// routes send to one of its Services.
type BackendPolicy struct {
	Generation int64
	Ancestors  []gwv1.PolicyAncestorStatus
	// Applied lists the Service ports the policy applies to that routes send to, each with the backends of
	// the policies made here that send to it, so that status can read what the Envoys report of them.
	Applied []AppliedPort
}

// AppliedPort is one Service port a BackendLoadBalancerPolicy applies to, named "<service>:<port>", and the
// backends that send to it: a made policy's key and its backend's name, sorted.
type AppliedPort struct {
	Name     string
	Backends []PolicyBackend
}

// PolicyBackend names one backend of one policy.
type PolicyBackend struct {
	Policy  types.NamespacedName
	Backend string
}

// maxAncestors is the specification's bound on a policy's status.ancestors.
const maxAncestors = 16

// servicePort is one port of a Service.
type servicePort struct {
	namespace, name string
	port            int32
}

// backendPolicies decides which BackendLoadBalancerPolicy applies to each Service port.
type backendPolicies struct {
	// invalid holds why a policy applies nowhere, by policy; bad lists those policies.
	invalid map[types.NamespacedName]string
	bad     []*v1alpha1.BackendLoadBalancerPolicy
	// in holds every valid policy, winners first: a policy that names the port (sectionName) before one that
	// names the whole Service, then the older, then the first by name.
	in []*v1alpha1.BackendLoadBalancerPolicy
	// portNames names each Service's named ports.
	portNames map[types.NamespacedName]map[int32]string
}

func newBackendPolicies(in Input) *backendPolicies {
	bp := &backendPolicies{invalid: map[types.NamespacedName]string{}, portNames: in.PortNames}
	for _, p := range in.BackendPolicies {
		if why := backendPolicyProblem(p); why != "" {
			bp.invalid[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = why
			bp.bad = append(bp.bad, p)
			continue
		}
		bp.in = append(bp.in, p)
	}
	slices.SortFunc(bp.in, func(a, b *v1alpha1.BackendLoadBalancerPolicy) int { return olderObject(&a.ObjectMeta, &b.ObjectMeta) })
	return bp
}

// targets tells whether p applies to the Service port sp, and whether it names that port.
func (bp *backendPolicies) targets(p *v1alpha1.BackendLoadBalancerPolicy, sp servicePort) (applies, section bool) {
	if p.Namespace != sp.namespace {
		return false, false
	}
	for _, t := range p.Spec.TargetRefs {
		// Any kind but HTTPRoute: a policy with a target of another kind is invalid, and says so where the
		// name is a Service's.
		if (t.Group == gwv1.GroupName && t.Kind == "HTTPRoute") || string(t.Name) != sp.name {
			continue
		}
		if t.SectionName == nil {
			applies = true
			continue
		}
		if name := bp.portNames[types.NamespacedName{Namespace: sp.namespace, Name: sp.name}][sp.port]; name != "" && string(*t.SectionName) == name {
			return true, true
		}
	}
	return applies, false
}

// forPort returns the policy that applies to the Service port, and the others that target it (conflicted).
func (bp *backendPolicies) forPort(sp servicePort) (*v1alpha1.BackendLoadBalancerPolicy, []*v1alpha1.BackendLoadBalancerPolicy) {
	return decide(bp.in, func(p *v1alpha1.BackendLoadBalancerPolicy) (bool, bool) { return bp.targets(p, sp) })
}

// decide returns the first of policies (sorted oldest first) that targets something by section, else the
// first that targets it whole, and the others that target it.
func decide(policies []*v1alpha1.BackendLoadBalancerPolicy, targets func(*v1alpha1.BackendLoadBalancerPolicy) (applies, section bool)) (*v1alpha1.BackendLoadBalancerPolicy, []*v1alpha1.BackendLoadBalancerPolicy) {
	var sectioned, whole []*v1alpha1.BackendLoadBalancerPolicy
	for _, p := range policies {
		switch applies, section := targets(p); {
		case section:
			sectioned = append(sectioned, p)
		case applies:
			whole = append(whole, p)
		}
	}
	all := append(sectioned, whole...)
	if len(all) == 0 {
		return nil, nil
	}
	return all[0], all[1:]
}

// targetsRule tells whether p applies to the rule named name (may be "") of HTTPRoute route, and whether it
// names the rule (sectionName).
func targetsRule(p *v1alpha1.BackendLoadBalancerPolicy, route types.NamespacedName, name string) (applies, section bool) {
	if p.Namespace != route.Namespace {
		return false, false
	}
	for _, t := range p.Spec.TargetRefs {
		if t.Group != gwv1.GroupName || t.Kind != "HTTPRoute" || string(t.Name) != route.Name {
			continue
		}
		if t.SectionName == nil {
			applies = true
			continue
		}
		if name != "" && string(*t.SectionName) == name {
			return true, true
		}
	}
	return applies, false
}

// decideRules finds, for every rule attached to the Gateway, the policy that targets it: one that names the
// rule wins over one for the whole HTTPRoute, then the older (then the first by name).
func (bp *backendPolicies) decideRules(gw *gateway) {
	for _, l := range gw.listeners {
		for i := range l.rules {
			ar := &l.rules[i]
			if ar.rule == nil {
				continue
			}
			name := ""
			if ar.rule.Name != nil {
				name = string(*ar.rule.Name)
			}
			ar.policy, ar.conflicted = decide(bp.in, func(p *v1alpha1.BackendLoadBalancerPolicy) (bool, bool) { return targetsRule(p, ar.route, name) })
			for _, p := range bp.bad {
				if applies, _ := targetsRule(p, ar.route, name); applies {
					ar.invalid = append(ar.invalid, p)
				}
			}
		}
	}
}

// ruleLabel names a rule in a message: by its name, or its index.
func ruleLabel(ar *attachedRule) string {
	if ar.rule != nil && ar.rule.Name != nil {
		return fmt.Sprintf("HTTPRoute %s rule %s", ar.route.Name, *ar.rule.Name)
	}
	return fmt.Sprintf("HTTPRoute %s rule %d", ar.route.Name, ar.index)
}

// applyBackendPolicies returns the status of each BackendLoadBalancerPolicy: an ancestor per Gateway that
// sends to one of its Services or has one of its routes, and the backends it gives its settings to (each
// Service backend of the Gateways' policies has the settings of the policy that applies to its rule, see
// decideRules, or else to its Service port: see policyBackends.add).
func applyBackendPolicies(in Input, bp *backendPolicies, gateways []*gateway, policies []*v1alpha1.LoadBalancerPolicy) map[types.NamespacedName]*BackendPolicy {
	out := map[types.NamespacedName]*BackendPolicy{}
	if len(in.BackendPolicies) == 0 {
		return out
	}
	type use struct {
		gateway types.NamespacedName
		policy  types.NamespacedName
	}
	// conflicts holds, per (Gateway, policy), the policies that won a port over it there.
	conflicts := map[use][]string{}
	used := map[use]bool{}
	invalidUsed := map[use]bool{}
	// applied holds, per policy, the backends of each Service port ("name:port") it gives its settings to.
	applied := map[types.NamespacedName]map[string][]PolicyBackend{}
	keyOf := func(p *v1alpha1.BackendLoadBalancerPolicy) types.NamespacedName {
		return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	}
	ruleBackends := map[PolicyBackend]types.NamespacedName{}
	for _, gw := range gateways {
		maps.Copy(ruleBackends, gw.ruleBackends)
		for _, l := range gw.listeners {
			for i := range l.rules {
				ar := &l.rules[i]
				if ar.policy == nil {
					for _, p := range ar.invalid {
						invalidUsed[use{gw.key, keyOf(p)}] = true
					}
					continue
				}
				used[use{gw.key, keyOf(ar.policy)}] = true
				for _, lo := range ar.conflicted {
					u := use{gw.key, keyOf(lo)}
					used[u] = true
					conflicts[u] = append(conflicts[u], fmt.Sprintf("%s: %s applies", ruleLabel(ar), ar.policy.Name))
				}
				for _, p := range ar.invalid {
					invalidUsed[use{gw.key, keyOf(p)}] = true
				}
			}
		}
	}
	for _, lp := range policies {
		gw, ok := gatewayOf(lp)
		if !ok {
			continue
		}
		for i := range lp.Spec.Backends {
			b := &lp.Spec.Backends[i] // read only: a policy is not changed once made
			if b.Service == nil {
				continue
			}
			sp := servicePort{namespace: b.Service.Namespace, name: b.Service.Name, port: b.Service.Port}
			port := fmt.Sprintf("%s:%d", sp.name, sp.port)
			lk := types.NamespacedName{Namespace: lp.Namespace, Name: lp.Name}
			if rk, ok := ruleBackends[PolicyBackend{Policy: lk, Backend: b.Name}]; ok {
				// A backend of a rule a policy targets: that policy's settings, whatever the Service's.
				if applied[rk] == nil {
					applied[rk] = map[string][]PolicyBackend{}
				}
				applied[rk][port] = append(applied[rk][port], PolicyBackend{Policy: lk, Backend: b.Name})
				continue
			}
			for _, p := range bp.bad {
				if applies, _ := bp.targets(p, sp); applies {
					invalidUsed[use{gw, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}}] = true
				}
			}
			winner, losers := bp.forPort(sp)
			if winner == nil {
				continue
			}
			wk := types.NamespacedName{Namespace: winner.Namespace, Name: winner.Name}
			used[use{gw, wk}] = true
			if applied[wk] == nil {
				applied[wk] = map[string][]PolicyBackend{}
			}
			applied[wk][port] = append(applied[wk][port], PolicyBackend{Policy: lk, Backend: b.Name})
			for _, l := range losers {
				u := use{gw, types.NamespacedName{Namespace: l.Namespace, Name: l.Name}}
				used[u] = true
				conflicts[u] = append(conflicts[u], fmt.Sprintf("%s port %d: %s applies", sp.name, sp.port, winner.Name))
			}
		}
	}
	ancestors := map[types.NamespacedName][]types.NamespacedName{}
	for u := range used {
		ancestors[u.policy] = append(ancestors[u.policy], u.gateway)
	}
	for u := range invalidUsed {
		ancestors[u.policy] = append(ancestors[u.policy], u.gateway)
	}
	for _, p := range in.BackendPolicies {
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		gws := ancestors[key]
		slices.SortFunc(gws, func(a, b types.NamespacedName) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		gws = slices.Compact(gws)
		st := &BackendPolicy{Generation: p.Generation, Ancestors: []gwv1.PolicyAncestorStatus{}}
		for _, port := range slices.Sorted(maps.Keys(applied[key])) {
			backends := applied[key][port]
			slices.SortFunc(backends, func(a, b PolicyBackend) int {
				return cmp.Or(cmp.Compare(a.Policy.Namespace, b.Policy.Namespace), cmp.Compare(a.Policy.Name, b.Policy.Name), cmp.Compare(a.Backend, b.Backend))
			})
			st.Applied = append(st.Applied, AppliedPort{Name: port, Backends: backends})
		}
		for _, gw := range gws[:min(len(gws), maxAncestors)] {
			var c metav1.Condition
			switch why, bad := bp.invalid[key]; {
			case bad:
				c = condition(string(gwv1.PolicyConditionAccepted), false, string(gwv1.PolicyReasonInvalid), why, p.Generation)
			case len(conflicts[use{gw, key}]) > 0:
				lost := slices.Compact(slices.Sorted(slices.Values(conflicts[use{gw, key}])))
				c = condition(string(gwv1.PolicyConditionAccepted), false, string(gwv1.PolicyReasonConflicted),
					"another policy applies to "+strings.Join(lost, "; "), p.Generation)
			default:
				c = condition(string(gwv1.PolicyConditionAccepted), true, string(gwv1.PolicyReasonAccepted),
					"applied to the routes of this Gateway that it targets or that send to its Services", p.Generation)
			}
			group, kind, ns := gwv1.Group(gwv1.GroupName), gwv1.Kind("Gateway"), gwv1.Namespace(gw.Namespace)
			st.Ancestors = append(st.Ancestors, gwv1.PolicyAncestorStatus{
				AncestorRef:    gwv1.ParentReference{Group: &group, Kind: &kind, Namespace: &ns, Name: gwv1.ObjectName(gw.Name)},
				ControllerName: ControllerName, Conditions: []metav1.Condition{c}})
		}
		out[key] = st
	}
	return out
}

// gatewayOf returns the Gateway a policy made here serves.
func gatewayOf(p *v1alpha1.LoadBalancerPolicy) (types.NamespacedName, bool) {
	return objkey.Parse(p.Annotations[AnnotationGateway])
}

// backendPolicyProblem says what keeps a BackendLoadBalancerPolicy from applying anywhere, or "". Its
// settings are checked as the backend of a policy made here: the rules of a LoadBalancerPolicy backend, in
// one place, with the field paths of the BackendLoadBalancerPolicy.
func backendPolicyProblem(p *v1alpha1.BackendLoadBalancerPolicy) string {
	var problems []string
	for i, t := range p.Spec.TargetRefs {
		service := t.Group == "" && t.Kind == "Service"
		if !service && !(t.Group == gwv1.GroupName && t.Kind == "HTTPRoute") {
			problems = append(problems, fmt.Sprintf("spec.targetRefs[%d]: must be a Service (group \"\", kind Service) or an HTTPRoute (group %s), got group %q kind %q", i, gwv1.GroupName, t.Group, t.Kind))
		}
		if service && p.Spec.SessionPersistence != nil {
			problems = append(problems, fmt.Sprintf("spec.sessionPersistence: a session is a route's: a policy with it targets HTTPRoutes only (spec.targetRefs[%d] is Service %s)", i, t.Name))
		}
	}
	if tls := p.Spec.Backend.TLS; tls != nil && tls.ClientCertificate != nil {
		problems = append(problems, "spec.backend.tls.clientCertificate: not supported in a BackendLoadBalancerPolicy (its Secret would be read in the Gateway's namespace)")
	}
	probe := &v1alpha1.LoadBalancerPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "probe"},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP},
			Backends: []v1alpha1.Backend{{Name: "service", Service: &v1alpha1.ServiceRef{Name: "service", Port: 80},
				BackendSettings: *p.Spec.Backend.DeepCopy()}},
		},
	}
	if sp := p.Spec.SessionPersistence; sp != nil {
		probe.Spec.Routes = []v1alpha1.Route{{Name: "route", Backends: []v1alpha1.BackendRef{{Name: "service"}}, SessionPersistence: sp.DeepCopy()}}
	}
	v1alpha1.Default(probe)
	for _, e := range v1alpha1.Validate(probe) {
		path := strings.Replace(e.Path, "spec.backends[0]", "spec.backend", 1)
		path = strings.Replace(path, "spec.routes[0].sessionPersistence", "spec.sessionPersistence", 1)
		problems = append(problems, path+": "+e.Msg)
	}
	slices.Sort(problems)
	return strings.Join(slices.Compact(problems), "; ")
}
