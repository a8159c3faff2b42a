// Package translate turns a set of policies into the IR and a status for each policy. It is a pure function:
// no I/O, no clock, no mutation of its input. User errors become status; they never stop other policies.
package translate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
)

// Reasons set on conditions.
const (
	ReasonAccepted       = "Accepted"
	ReasonInvalid        = "Invalid"
	ReasonConflicted     = "Conflicted"
	ReasonResolvedRefs   = "ResolvedRefs"
	ReasonBackendMissing = "BackendNotFound"
)

// Key identifies a policy.
type Key struct{ Namespace, Name string }

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// KeyOf returns the key of a policy, with the default namespace applied.
func KeyOf(p *v1alpha1.LoadBalancerPolicy) Key {
	return Key{Namespace: cmp.Or(p.Namespace, v1alpha1.DefaultNamespace), Name: p.Name}
}

// PolicyResult is what translation concluded about one policy.
type PolicyResult struct {
	Key        Key
	Generation int64
	ProxyGroup string
	// Accepted is false when the policy is invalid or conflicts with an older one; it is then not served.
	Accepted        bool
	AcceptedReason  string
	AcceptedMessage string
	// ResolvedRefs is false when a backend references something that does not exist.
	ResolvedRefs        bool
	ResolvedRefsReason  string
	ResolvedRefsMessage string
	// Errors are the field errors behind an Invalid policy.
	Errors    v1alpha1.FieldErrors
	Endpoints int32
	// Resources names the Envoy resources this policy contributes to, for status and explain.
	Listener string
	Clusters []string
}

// Conditions renders the result as Kubernetes conditions (without Programmed, which the server decides).
func (r *PolicyResult) Conditions(now metav1.Time) []metav1.Condition {
	cond := func(t string, ok bool, reason, msg string) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: r.Generation, LastTransitionTime: now}
	}
	return []metav1.Condition{
		cond(v1alpha1.ConditionAccepted, r.Accepted, r.AcceptedReason, r.AcceptedMessage),
		cond(v1alpha1.ConditionResolvedRefs, r.ResolvedRefs, r.ResolvedRefsReason, r.ResolvedRefsMessage),
	}
}

// Result is the output of Translate.
type Result struct {
	IR       *ir.Config
	Policies map[Key]*PolicyResult
}

// Prepare returns a defaulted copy of the policy and every problem found in it alone.
func Prepare(p *v1alpha1.LoadBalancerPolicy) (*v1alpha1.LoadBalancerPolicy, v1alpha1.FieldErrors) {
	c := clone(p)
	v1alpha1.Default(c)
	return c, v1alpha1.Validate(c)
}

// clone deep-copies through JSON: policies are small and this keeps the input untouched.
func clone(p *v1alpha1.LoadBalancerPolicy) *v1alpha1.LoadBalancerPolicy {
	b, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("policy does not marshal: %v", err))
	}
	c := &v1alpha1.LoadBalancerPolicy{}
	if err := json.Unmarshal(b, c); err != nil {
		panic(fmt.Sprintf("policy does not unmarshal: %v", err))
	}
	return c
}

// Translate turns policies into the IR. Older policies (by creation time, then namespace/name) win conflicts,
// so accepting a new policy never takes a port or hostname away from a live one.
func Translate(policies []*v1alpha1.LoadBalancerPolicy) *Result {
	res := &Result{IR: &ir.Config{Groups: map[string]*ir.Group{}}, Policies: map[Key]*PolicyResult{}}
	// Order before Prepare: its copy goes through JSON, which keeps creation times to the second only, and
	// two policies created within one second must still be told apart.
	ordered := slices.Clone(policies)
	slices.SortStableFunc(ordered, func(a, b *v1alpha1.LoadBalancerPolicy) int {
		ka, kb := KeyOf(a), KeyOf(b)
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
			cmp.Compare(ka.Namespace, kb.Namespace), cmp.Compare(ka.Name, kb.Name))
	})
	prepared := make([]*v1alpha1.LoadBalancerPolicy, 0, len(policies))
	for _, p := range ordered {
		c, errs := Prepare(p)
		r := &PolicyResult{Key: KeyOf(p), Generation: p.Generation, ProxyGroup: c.Spec.ProxyGroup}
		res.Policies[r.Key] = r
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
		r := res.Policies[KeyOf(p)]
		if msg := claim(ports, p); msg != "" {
			r.AcceptedReason, r.AcceptedMessage = ReasonConflicted, msg
			r.ResolvedRefsReason, r.ResolvedRefsMessage = ReasonConflicted, "not checked: the policy conflicts with another"
			continue
		}
		r.Accepted, r.AcceptedReason, r.AcceptedMessage = true, ReasonAccepted, "the policy is valid and has no conflicts"
		addPolicy(res.IR, p, r)
	}
	for _, g := range res.IR.Groups {
		slices.SortFunc(g.Listeners, func(a, b *ir.Listener) int { return cmp.Compare(a.Port, b.Port) })
		slices.SortFunc(g.Clusters, func(a, b *ir.Cluster) int { return cmp.Compare(a.Name, b.Name) })
		for _, l := range g.Listeners {
			sortVirtualHosts(l.VirtualHosts)
		}
	}
	return res
}

type portKey struct {
	group string
	port  int32
}

type portUse struct {
	address  string
	protocol v1alpha1.Protocol
	owner    Key
	hosts    map[string]Key
}

// claim records the policy's use of its port and returns why it cannot have it, or "".
func claim(ports map[portKey]*portUse, p *v1alpha1.LoadBalancerPolicy) string {
	k := portKey{p.Spec.ProxyGroup, p.Spec.Listener.Port}
	l := &p.Spec.Listener
	use, ok := ports[k]
	if !ok {
		use = &portUse{address: l.Address, protocol: l.Protocol, owner: KeyOf(p), hosts: map[string]Key{}}
		ports[k] = use
	} else {
		switch {
		case use.protocol != l.Protocol:
			return fmt.Sprintf("spec.listener.port: port %d is already used by policy %s with protocol %s", l.Port, use.owner, use.protocol)
		case use.protocol == v1alpha1.ProtocolTCP:
			return fmt.Sprintf("spec.listener.port: port %d is already used by TCP policy %s; a TCP port cannot be shared", l.Port, use.owner)
		case use.address != l.Address:
			return fmt.Sprintf("spec.listener.address: port %d is already bound on %s by policy %s", l.Port, use.address, use.owner)
		}
	}
	hosts := l.Hostnames
	if len(hosts) == 0 {
		hosts = []string{"*"}
	}
	for _, h := range hosts {
		if owner, taken := use.hosts[h]; taken {
			return fmt.Sprintf("spec.listener.hostnames: hostname %q on port %d is already served by policy %s", h, l.Port, owner)
		}
	}
	for _, h := range hosts {
		use.hosts[h] = KeyOf(p)
	}
	return ""
}

func clusterName(p *v1alpha1.LoadBalancerPolicy, backend string) string {
	return p.Namespace + "/" + p.Name + "/" + backend
}

func addPolicy(c *ir.Config, p *v1alpha1.LoadBalancerPolicy, r *PolicyResult) {
	s := &p.Spec
	g, ok := c.Groups[s.ProxyGroup]
	if !ok {
		g = &ir.Group{Name: s.ProxyGroup}
		c.Groups[s.ProxyGroup] = g
	}
	r.ResolvedRefs, r.ResolvedRefsReason, r.ResolvedRefsMessage = true, ReasonResolvedRefs, "all backends resolved"
	var missing []string
	hashKeys := map[string][]ir.HashKey{}
	for i := range s.Backends {
		b := &s.Backends[i]
		cl := &ir.Cluster{
			Name:           clusterName(p, b.Name),
			Algorithm:      ir.Algorithm(b.LoadBalancing.Algorithm),
			ConnectTimeout: b.ConnectTimeout.Duration,
			CircuitBreakers: ir.CircuitBreakers{
				MaxConnections:     uint32(*b.CircuitBreakers.MaxConnections),
				MaxPendingRequests: uint32(*b.CircuitBreakers.MaxPendingRequests),
				MaxRequests:        uint32(*b.CircuitBreakers.MaxRequests),
				MaxRetries:         uint32(*b.CircuitBreakers.MaxRetries),
			},
		}
		if lr := b.LoadBalancing.LeastRequest; lr != nil {
			cl.ChoiceCount = uint32(*lr.ChoiceCount)
		}
		if cl.Algorithm == ir.RingHash || cl.Algorithm == ir.Maglev {
			// Until configurable hash keys exist, hash on the client address (nginx's ip_hash). The key must be
			// set on the route too: a hashing cluster without a route hash policy silently picks at random.
			hashKeys[cl.Name] = []ir.HashKey{{SourceIP: true}}
		}
		for _, e := range b.Endpoints {
			cl.Endpoints = append(cl.Endpoints, ir.Endpoint{Address: e.Address, Port: uint32(e.Port), Weight: uint32(*e.Weight)})
		}
		if b.Service != nil {
			// Services are resolved by the Kubernetes source; without it the backend has no endpoints.
			missing = append(missing, fmt.Sprintf("spec.backends[%d].service: Service %s needs Kubernetes mode (lbplane serve --kubernetes)", i, b.Service.Name))
		}
		r.Endpoints += int32(len(cl.Endpoints))
		r.Clusters = append(r.Clusters, cl.Name)
		g.Clusters = append(g.Clusters, cl)
	}
	if len(missing) > 0 {
		r.ResolvedRefs, r.ResolvedRefsReason, r.ResolvedRefsMessage = false, ReasonBackendMissing, strings.Join(missing, "; ")
	}
	l := listenerFor(g, p)
	r.Listener = l.Name
	if l.Protocol == ir.TCP {
		l.TCP = &ir.TCPRoute{Clusters: allBackends(p)}
		l.TCP.HashKeys = hashKeysFor(l.TCP.Clusters, hashKeys)
		return
	}
	vh := &ir.VirtualHost{Name: p.Namespace + "/" + p.Name, Domains: domains(s.Listener.Hostnames)}
	if len(s.Routes) == 0 {
		all := allBackends(p)
		vh.Routes = []*ir.Route{{Name: vh.Name + "/default", PathType: ir.PathPrefix, Path: "/", Clusters: all,
			Timeout: v1alpha1.DefaultRouteTimeout, HashKeys: hashKeysFor(all, hashKeys)}}
	}
	for _, rt := range s.Routes {
		route := &ir.Route{Name: vh.Name + "/" + rt.Name, PathType: ir.PathPrefix, Path: "/", Timeout: rt.Timeout.Duration}
		if pm := rt.Match.Path; pm != nil {
			route.PathType, route.Path = string(pm.Type), pm.Value
		}
		for _, h := range rt.Match.Headers {
			route.Headers = append(route.Headers, ir.HeaderMatch{Name: strings.ToLower(h.Name), Type: string(h.Type), Value: h.Value, Invert: h.Invert})
		}
		for _, ref := range rt.Backends {
			if *ref.Weight > 0 {
				route.Clusters = append(route.Clusters, ir.WeightedCluster{Name: clusterName(p, ref.Name), Weight: uint32(*ref.Weight)})
			}
		}
		route.HashKeys = hashKeysFor(route.Clusters, hashKeys)
		vh.Routes = append(vh.Routes, route)
	}
	l.VirtualHosts = append(l.VirtualHosts, vh)
}

func allBackends(p *v1alpha1.LoadBalancerPolicy) []ir.WeightedCluster {
	out := make([]ir.WeightedCluster, 0, len(p.Spec.Backends))
	for _, b := range p.Spec.Backends {
		out = append(out, ir.WeightedCluster{Name: clusterName(p, b.Name), Weight: 1})
	}
	return out
}

// hashKeysFor returns the hash keys a destination set needs: those of its first hashing cluster.
func hashKeysFor(wcs []ir.WeightedCluster, keys map[string][]ir.HashKey) []ir.HashKey {
	for _, wc := range wcs {
		if k, ok := keys[wc.Name]; ok {
			return k
		}
	}
	return nil
}

func listenerFor(g *ir.Group, p *v1alpha1.LoadBalancerPolicy) *ir.Listener {
	port := uint32(p.Spec.Listener.Port)
	for _, l := range g.Listeners {
		if l.Port == port {
			return l
		}
	}
	proto := ir.HTTP
	if p.Spec.Listener.Protocol == v1alpha1.ProtocolTCP {
		proto = ir.TCP
	}
	l := &ir.Listener{Name: fmt.Sprintf("%s-%d", strings.ToLower(string(proto)), port), Address: p.Spec.Listener.Address, Port: port, Protocol: proto}
	g.Listeners = append(g.Listeners, l)
	return l
}

// domains lists the Host values Envoy matches; the listener strips any port from Host before matching.
func domains(hostnames []string) []string {
	if len(hostnames) == 0 {
		return []string{"*"}
	}
	return slices.Clone(hostnames)
}

// sortVirtualHosts puts the catch-all last; Envoy picks exact domains before wildcards on its own, but a stable
// order keeps the generated config (and its version) independent of policy order.
func sortVirtualHosts(vhs []*ir.VirtualHost) {
	slices.SortStableFunc(vhs, func(a, b *ir.VirtualHost) int {
		aw, bw := slices.Contains(a.Domains, "*"), slices.Contains(b.Domains, "*")
		switch {
		case aw && !bw:
			return 1
		case !aw && bw:
			return -1
		}
		return cmp.Compare(a.Name, b.Name)
	})
}
