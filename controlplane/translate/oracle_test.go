package translate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/lint"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/tenancy"
)

// The oracle: a whole-set translation written apart from the incremental Translator, which the tests hold
// the Translator to. It lives in test files: production translates incrementally only.

// translateAll is the whole-set translation the incremental Translator must agree with; tests use it as
// the reference (see fragment.go).
func translateAll(policies []*v1alpha1.LoadBalancerPolicy, refs Refs) *Result {
	res := &Result{IR: &ir.Config{Groups: map[string]*ir.Group{}}}
	// Order before Prepare: its copy goes through JSON, which keeps creation times to the second only, and
	// two policies created within one second must still be told apart.
	// A policy without a creation time has not been stored yet: it is the newest.
	ordered := slices.Clone(policies)
	slices.SortStableFunc(ordered, func(a, b *v1alpha1.LoadBalancerPolicy) int {
		ka, kb := objkey.Of(a), objkey.Of(b)
		return cmp.Or(cmp.Compare(boolInt(a.CreationTimestamp.IsZero()), boolInt(b.CreationTimestamp.IsZero())),
			a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
			cmp.Compare(ka.Namespace, kb.Namespace), cmp.Compare(ka.Name, kb.Name))
	})
	prepared := make([]*v1alpha1.LoadBalancerPolicy, 0, len(policies))
	for _, p := range ordered {
		c, errs := Prepare(p, refs.Reach)
		r := &PolicyResult{Key: objkey.Of(p), Generation: p.Generation, ProxyGroup: c.Spec.ProxyGroup, algorithm: algorithmOf(c)}
		res.Policies.set(r)
		if len(errs) > 0 {
			r.AcceptedReason, r.AcceptedMessage, r.Errors = ReasonInvalid, errs.Error(), errs
			r.ResolvedRefsReason = ReasonInvalid
			r.ResolvedRefsMessage = "not checked: the policy is invalid"
			continue
		}
		prepared = append(prepared, c)
	}

	ports := map[portKey]*portUse{}
	for _, p := range prepared {
		r := res.Policies.Of(objkey.Of(p))
		if msg := notAllowed(refs.Tenancy, p); msg != "" {
			r.AcceptedReason, r.AcceptedMessage = ReasonNotAllowed, msg
			r.ResolvedRefsReason, r.ResolvedRefsMessage = ReasonNotAllowed, "not checked: the policy is not allowed"
			continue
		}
		if reason, msg := claim(ports, p, refs.Tenancy); msg != "" {
			r.AcceptedReason, r.AcceptedMessage = reason, msg
			r.ResolvedRefsReason, r.ResolvedRefsMessage = ReasonConflicted, "not checked: the policy conflicts with another"
			continue
		}
		r.Accepted, r.AcceptedReason, r.AcceptedMessage = true, ReasonAccepted, "the policy is valid and has no conflicts"
		r.Warnings = lint.Strings(append(lint.Check(p), lint.GRPC(p)...))
		secrets, errs := resolveFiles(p, refs)
		if len(errs) > 0 {
			r.ResolvedRefs, r.ResolvedRefsReason = false, ReasonInvalidRef
			r.ResolvedRefsMessage = strings.Join(errs, "; ") + " (the policy is not served until this is fixed)"
			continue
		}
		addPolicy(res.IR, p, r, secrets, refs)
	}
	for _, g := range res.IR.Groups {
		slices.SortFunc(g.Listeners, func(a, b *ir.Listener) int { return cmp.Compare(a.Port, b.Port) })
		slices.SortFunc(g.Clusters, func(a, b *ir.Cluster) int { return cmp.Compare(a.Name, b.Name) })
		slices.SortFunc(g.Secrets, func(a, b *ir.Secret) int { return cmp.Compare(a.Name, b.Name) })
		for _, l := range g.Listeners {
			sortVirtualHosts(l.VirtualHosts)
		}
	}
	return res
}

type portUse struct {
	address  string
	protocol v1alpha1.Protocol
	owner    objkey.Key
	hosts    map[string]objkey.Key
	sni      map[string]objkey.Key
	edge     ir.Edge // the owner's listener hardening, which the port's listener gets
	// held are the accepted policies' names, oldest policy first.
	held []heldName
}

type heldName struct {
	key       objkey.Key
	kind      byte
	name      string
	delegated bool
}

// oracleClaims are a policy's names: its host names (every host when none), then its server names.
func oracleClaims(p *v1alpha1.LoadBalancerPolicy) []heldName {
	var out []heldName
	hosts := p.Spec.Listener.Hostnames
	if len(hosts) == 0 {
		hosts = []string{"*"}
	}
	for _, h := range hosts {
		out = append(out, heldName{key: objkey.Of(p), kind: 'h', name: h})
	}
	for _, n := range sniNames(p) {
		out = append(out, heldName{key: objkey.Of(p), kind: 's', name: n})
	}
	return out
}

// notAllowed applies the tenancy rules to every name of the policy.
func notAllowed(rules tenancy.Rules, p *v1alpha1.LoadBalancerPolicy) string {
	for i, c := range oracleClaims(p) {
		if v := rules.Check(objkey.Of(p).Namespace, p.Spec.Listener.Port, c.name); !v.Allowed {
			field := "spec.listener.tls"
			switch {
			case c.kind == 's':
			case c.name == "*":
				field = "spec.listener.hostnames"
			default:
				field = fmt.Sprintf("spec.listener.hostnames[%d]", i)
			}
			return field + ": " + v.Why
		}
	}
	return ""
}

// heldByOther finds the first name of p that overlaps a name an older policy of another namespace holds,
// and the oldest such policy, unless the narrower of the two names is delegated to its own namespace.
func heldByOther(use *portUse, p *v1alpha1.LoadBalancerPolicy, rules tenancy.Rules) (string, bool) {
	ns := objkey.Of(p).Namespace
	for _, c := range oracleClaims(p) {
		mine := rules.Check(ns, p.Spec.Listener.Port, c.name).Delegated
		for _, h := range use.held {
			if h.key.Namespace == ns || h.kind != c.kind || !tenancy.Overlap(c.name, h.name) {
				continue
			}
			same := tenancy.Covers(c.name, h.name) && tenancy.Covers(h.name, c.name)
			if !same && (tenancy.Covers(h.name, c.name) && mine || tenancy.Covers(c.name, h.name) && h.delegated) {
				continue
			}
			what, field := "host name", "spec.listener.hostnames"
			if c.kind == 's' {
				what, field = "server name", "spec.listener.tls"
			}
			name, claimed := fmt.Sprintf("%s %q", what, c.name), fmt.Sprintf("%q", h.name)
			star := func(s string) bool { return s == "" || s == "*" }
			if star(c.name) {
				name = fmt.Sprintf("every %s (\"*\")", what)
			}
			switch {
			case same:
				claimed = "it"
			case star(h.name):
				claimed = fmt.Sprintf("every %s (\"*\")", what)
			}
			return fmt.Sprintf("%s: %s on port %d overlaps a name held by namespace %s: policy %s claimed %s first",
				field, name, p.Spec.Listener.Port, h.key.Namespace, h.key, claimed), true
		}
	}
	return "", false
}

// claim records the policy's use of its port and returns why it cannot have it, or "".
func claim(ports map[portKey]*portUse, p *v1alpha1.LoadBalancerPolicy, rules tenancy.Rules) (string, string) {
	k := portKey{p.Spec.ProxyGroup, p.Spec.Listener.Port}
	l := &p.Spec.Listener
	use, ok := ports[k]
	if !ok {
		use = &portUse{address: l.Address, protocol: l.Protocol, owner: objkey.Of(p), hosts: map[string]objkey.Key{}, sni: map[string]objkey.Key{}, edge: listenerEdge(p)}
		ports[k] = use
	} else {
		switch {
		case use.protocol != l.Protocol:
			return ReasonConflicted, fmt.Sprintf("spec.listener.port: port %d is already used by policy %s with protocol %s", l.Port, use.owner, use.protocol)
		case use.protocol == v1alpha1.ProtocolTCP:
			return ReasonConflicted, fmt.Sprintf("spec.listener.port: port %d is already used by TCP policy %s; a TCP port cannot be shared", l.Port, use.owner)
		case use.address != l.Address:
			return ReasonConflicted, fmt.Sprintf("spec.listener.address: port %d is already bound on %s by policy %s", l.Port, use.address, use.owner)
		case edgeConflict(use.edge, p) != "":
			return ReasonConflicted, edgeConflict(use.edge, p) + fmt.Sprintf(" on port %d than policy %s, which owns the listener", l.Port, use.owner)
		}
		if msg, held := heldByOther(use, p, rules); held {
			return ReasonHostnameConflict, msg
		}
	}
	hosts := l.Hostnames
	if len(hosts) == 0 {
		hosts = []string{"*"}
	}
	for _, h := range hosts {
		if owner, taken := use.hosts[h]; taken {
			return ReasonConflicted, fmt.Sprintf("spec.listener.hostnames: hostname %q on port %d is already served by policy %s", h, l.Port, owner)
		}
	}
	names := sniNames(p)
	for _, n := range names {
		if owner, taken := use.sni[n]; taken {
			return ReasonConflicted, fmt.Sprintf("spec.listener.tls: a certificate for %q on port %d is already served by policy %s", n, l.Port, owner)
		}
	}
	for _, h := range hosts {
		use.hosts[h] = objkey.Of(p)
	}
	for _, n := range names {
		use.sni[n] = objkey.Of(p)
	}
	for _, c := range oracleClaims(p) {
		c.delegated = rules.Check(objkey.Of(p).Namespace, l.Port, c.name).Delegated
		use.held = append(use.held, c)
	}
	return "", ""
}
