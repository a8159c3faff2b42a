// Package translate turns a set of policies into the IR and a status for each policy. It is a pure function:
// no I/O, no clock, no mutation of its input. User errors become status; they never stop other policies.
package translate

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/lint"
)

// Reasons set on conditions.
const (
	ReasonAccepted       = "Accepted"
	ReasonInvalid        = "Invalid"
	ReasonConflicted     = "Conflicted"
	ReasonResolvedRefs   = "ResolvedRefs"
	ReasonBackendMissing = "BackendNotFound"
	ReasonInvalidRef     = "InvalidReference"
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
	// HealthyEndpoints leaves out draining (terminating) endpoints.
	HealthyEndpoints int32
	// Warnings are lint findings on an accepted policy (see package lint).
	Warnings []string
	// Resources names the Envoy resources this policy contributes to, for status and explain.
	Listener string
	Clusters []string
	// BackendOf names the spec backend each of Clusters is; a route's session cluster, which merges several
	// backends, is not in it.
	BackendOf map[string]string
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
	c := p.DeepCopy()
	v1alpha1.Default(c)
	return c, v1alpha1.Validate(c)
}

// translateAll is the whole-set translation the incremental Translator must agree with; tests use it as
// the reference (see fragment.go).
func translateAll(policies []*v1alpha1.LoadBalancerPolicy, refs Refs) *Result {
	res := &Result{IR: &ir.Config{Groups: map[string]*ir.Group{}}, Policies: map[Key]*PolicyResult{}}
	// Order before Prepare: its copy goes through JSON, which keeps creation times to the second only, and
	// two policies created within one second must still be told apart.
	// A policy without a creation time has not been stored yet: it is the newest.
	ordered := slices.Clone(policies)
	slices.SortStableFunc(ordered, func(a, b *v1alpha1.LoadBalancerPolicy) int {
		ka, kb := KeyOf(a), KeyOf(b)
		return cmp.Or(cmp.Compare(boolInt(a.CreationTimestamp.IsZero()), boolInt(b.CreationTimestamp.IsZero())),
			a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
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
		r.Warnings = lint.Strings(lint.Check(p))
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

type portKey struct {
	group string
	port  int32
}

type portUse struct {
	address  string
	protocol v1alpha1.Protocol
	owner    Key
	hosts    map[string]Key
	sni      map[string]Key
	edge     ir.Edge // the owner's listener hardening, which the port's listener gets
}

// claim records the policy's use of its port and returns why it cannot have it, or "".
func claim(ports map[portKey]*portUse, p *v1alpha1.LoadBalancerPolicy) string {
	k := portKey{p.Spec.ProxyGroup, p.Spec.Listener.Port}
	l := &p.Spec.Listener
	use, ok := ports[k]
	if !ok {
		use = &portUse{address: l.Address, protocol: l.Protocol, owner: KeyOf(p), hosts: map[string]Key{}, sni: map[string]Key{}, edge: listenerEdge(p)}
		ports[k] = use
	} else {
		switch {
		case use.protocol != l.Protocol:
			return fmt.Sprintf("spec.listener.port: port %d is already used by policy %s with protocol %s", l.Port, use.owner, use.protocol)
		case use.protocol == v1alpha1.ProtocolTCP:
			return fmt.Sprintf("spec.listener.port: port %d is already used by TCP policy %s; a TCP port cannot be shared", l.Port, use.owner)
		case use.address != l.Address:
			return fmt.Sprintf("spec.listener.address: port %d is already bound on %s by policy %s", l.Port, use.address, use.owner)
		case edgeConflict(use.edge, p) != "":
			return edgeConflict(use.edge, p) + fmt.Sprintf(" on port %d than policy %s, which owns the listener", l.Port, use.owner)
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
	names := sniNames(p)
	for _, n := range names {
		if owner, taken := use.sni[n]; taken {
			return fmt.Sprintf("spec.listener.tls: a certificate for %q on port %d is already served by policy %s", n, l.Port, owner)
		}
	}
	for _, h := range hosts {
		use.hosts[h] = KeyOf(p)
	}
	for _, n := range names {
		use.sni[n] = KeyOf(p)
	}
	return ""
}

// sniNames are the server names the policy's certificates are chosen for; "" stands for the default chain.
func sniNames(p *v1alpha1.LoadBalancerPolicy) []string {
	t := p.Spec.Listener.TLS
	if t == nil {
		return nil
	}
	var out []string
	for _, names := range t.CertificateNames(p.Spec.Listener.Hostnames) {
		if len(names) == 0 {
			names = []string{""}
		}
		out = append(out, names...)
	}
	return out
}

// serviceEndpoints turns a Service backend into endpoints: ready addresses serve, terminating ones drain,
// and the others are left out. The message says why the reference does not resolve, if it does not.
func serviceEndpoints(p *v1alpha1.LoadBalancerPolicy, b *v1alpha1.Backend, refs Refs) ([]ir.Endpoint, string) {
	if refs.Services == nil {
		return nil, fmt.Sprintf("Service %s needs Kubernetes mode (lbplane serve --kubernetes)", b.Service.Name)
	}
	ref := ServiceRefOf(p.Namespace, b.Service)
	if ref.Namespace != p.Namespace && !refs.CrossNamespace {
		// A policy must not send traffic into another team's namespace unless the operator allows it.
		return nil, fmt.Sprintf("Service %s/%s is in another namespace, which is not allowed (lbplane serve --allow-cross-namespace-refs)", ref.Namespace, ref.Name)
	}
	se, ok := refs.Services[ref]
	if !ok {
		return nil, fmt.Sprintf("Service %s/%s was not looked up", ref.Namespace, ref.Name)
	}
	if se.Err != "" {
		return nil, se.Err
	}
	var out []ir.Endpoint
	for _, e := range se.Endpoints {
		if !e.Ready && !e.Terminating {
			continue
		}
		out = append(out, ir.Endpoint{Address: e.Address, Port: uint32(e.Port), Weight: 1, Draining: !e.Ready, Zone: e.Zone})
	}
	slices.SortFunc(out, func(a, b ir.Endpoint) int {
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port))
	})
	return out, ""
}

// resolveFiles turns the policy's file and Secret references into SDS secrets, or says what is wrong with
// them.
func resolveFiles(p *v1alpha1.LoadBalancerPolicy, refs Refs) (map[string]*ir.Secret, []string) {
	files := refs.Files
	secrets := map[string]*ir.Secret{}
	var errs []string
	if t := p.Spec.Listener.TLS; t != nil {
		for i, c := range t.Certificates {
			name := fmt.Sprintf("%s/%s/certificate-%d", p.Namespace, p.Name, i)
			if c.SecretName != "" {
				sec, ok := refs.Secrets[SecretRef{Namespace: p.Namespace, Name: c.SecretName}]
				switch {
				case refs.Secrets == nil:
					errs = append(errs, fmt.Sprintf("spec.listener.tls.certificates[%d].secretName: Secrets need Kubernetes mode (lbplane serve --kubernetes)", i))
				case !ok:
					errs = append(errs, fmt.Sprintf("spec.listener.tls.certificates[%d].secretName: Secret %s/%s not found", i, p.Namespace, c.SecretName))
				case sec.Err != "":
					errs = append(errs, fmt.Sprintf("spec.listener.tls.certificates[%d].secretName: %s", i, sec.Err))
				default:
					if _, err := tls.X509KeyPair(sec.Cert, sec.Key); err != nil {
						errs = append(errs, fmt.Sprintf("spec.listener.tls.certificates[%d].secretName: Secret %s/%s: %v", i, p.Namespace, c.SecretName, err))
					} else {
						secrets[name] = &ir.Secret{Name: name, CertificateChain: sec.Cert, PrivateKey: sec.Key}
					}
				}
				continue
			}
			cert, key, err := files.keyPair(fmt.Sprintf("spec.listener.tls.certificates[%d]", i), c.CertificateFile, c.PrivateKeyFile)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			secrets[name] = &ir.Secret{Name: name, CertificateChain: cert, PrivateKey: key}
		}
	}
	for i, b := range p.Spec.Backends {
		if b.TLS == nil || b.TLS.CAFile == "" {
			continue
		}
		ca, err := files.caBundle(fmt.Sprintf("spec.backends[%d].tls.caFile", i), b.TLS.CAFile)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		name := clusterName(p, b.Name) + "/ca"
		secrets[name] = &ir.Secret{Name: name, CA: ca}
	}
	return secrets, errs
}

func clusterName(p *v1alpha1.LoadBalancerPolicy, backend string) string {
	return p.Namespace + "/" + p.Name + "/" + backend
}

func addPolicy(c *ir.Config, p *v1alpha1.LoadBalancerPolicy, r *PolicyResult, secrets map[string]*ir.Secret, refs Refs) {
	s := &p.Spec
	g, ok := c.Groups[s.ProxyGroup]
	if !ok {
		g = &ir.Group{Name: s.ProxyGroup}
		c.Groups[s.ProxyGroup] = g
	}
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		g.Secrets = append(g.Secrets, secrets[name])
	}
	r.ResolvedRefs, r.ResolvedRefsReason, r.ResolvedRefsMessage = true, ReasonResolvedRefs, "all backends resolved"
	var missing []string
	hashKeys := map[string][]ir.HashKey{}
	byName := map[string]*ir.Cluster{}
	for i := range s.Backends {
		b := &s.Backends[i]
		cl := cluster(p, b)
		cl.Source = ir.Source{Namespace: p.Namespace, Name: p.Name, Backend: b.Name}
		byName[cl.Name] = cl.Cluster
		if b.Service != nil {
			eps, msg := serviceEndpoints(p, b, refs)
			cl.Endpoints = append(cl.Endpoints, eps...)
			if msg != "" {
				missing = append(missing, fmt.Sprintf("spec.backends[%d].service: %s", i, msg))
			}
		}
		if len(cl.HashKeysFromPolicy) > 0 {
			hashKeys[cl.Name] = cl.HashKeysFromPolicy
		}
		r.Endpoints += int32(len(cl.Endpoints))
		for _, e := range cl.Endpoints {
			if !e.Draining {
				r.HealthyEndpoints++
			}
		}
		r.Clusters = append(r.Clusters, cl.Name)
		if r.BackendOf == nil {
			r.BackendOf = map[string]string{}
		}
		r.BackendOf[cl.Name] = b.Name
		g.Clusters = append(g.Clusters, cl.Cluster)
	}
	if len(missing) > 0 {
		r.ResolvedRefs, r.ResolvedRefsReason, r.ResolvedRefsMessage = false, ReasonBackendMissing, strings.Join(missing, "; ")
	}
	l := listenerFor(g, p)
	l.NoRouterDynamicStats = refs.NoRouterDynamicStats
	r.Listener = l.Name
	if l.Protocol == ir.TCP {
		l.TCP = &ir.TCPRoute{Clusters: allBackends(p)}
		l.TCP.HashKeys = hashKeysFor(l.TCP.Clusters, hashKeys)
		return
	}
	if t := s.Listener.TLS; t != nil {
		addChains(l, p, t)
	}
	src := ir.Source{Namespace: p.Namespace, Name: p.Name}
	vh := &ir.VirtualHost{Name: p.Namespace + "/" + p.Name, Source: src, Domains: domains(s.Listener.Hostnames)}
	if len(s.Routes) == 0 {
		all := allBackends(p)
		vh.Routes = []*ir.Route{{Name: vh.Name + "/default", Source: src, PathType: ir.PathPrefix, Path: "/", Clusters: all,
			Timeout: v1alpha1.DefaultRouteTimeout, HashKeys: hashKeysFor(all, hashKeys), Retry: defaultRetry()}}
	}
	for i, rt := range s.Routes {
		route := route(p, vh.Name, &rt, hashKeys)
		route.Source = src.RouteSource(i)
		if sp := rt.SessionPersistence; sp != nil && sp.AcrossBackends && len(route.Clusters) > 1 {
			merged := mergeClusters(route.Name+"/session", route.Clusters, byName)
			merged.Source = route.Source
			g.Clusters = append(g.Clusters, merged)
			r.Clusters = append(r.Clusters, merged.Name)
			route.Clusters = []ir.WeightedCluster{{Name: merged.Name, Weight: 1}}
		}
		vh.Routes = append(vh.Routes, route)
	}
	l.VirtualHosts = append(l.VirtualHosts, vh)
}

// defaultRetry is what a route without a retry block gets: a request that never reached an endpoint (it
// refused the connection or the stream) is tried again on another. That is safe for every method, since
// nothing was sent, and it is what nginx does by default (proxy_next_upstream error). Without it, every
// request balanced to a dead endpoint failed until health checking took the endpoint out: 599 failed
// requests in 15 s at 200 requests/s with lbplane's default checks, in the health benchmark, against none
// through nginx. A retry block with attempts: 0 turns it off.
func defaultRetry() *ir.Retry {
	return &ir.Retry{On: []string{string(v1alpha1.RetryOnConnectFailure), string(v1alpha1.RetryOnRefusedStream)},
		Attempts: v1alpha1.DefaultRetryAttempts, BackoffBase: v1alpha1.DefaultRetryBackoffBase, BackoffMax: 10 * v1alpha1.DefaultRetryBackoffBase,
		AvoidPreviousHosts: true}
}

func route(p *v1alpha1.LoadBalancerPolicy, vhost string, rt *v1alpha1.Route, hashKeys map[string][]ir.HashKey) *ir.Route {
	route := &ir.Route{Name: vhost + "/" + rt.Name, PathType: ir.PathPrefix, Path: "/", Timeout: rt.Timeout.Duration}
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
	if rt.IdleTimeout != nil {
		d := rt.IdleTimeout.Duration
		route.IdleTimeout = &d
	}
	if rr := rt.Retry; rr != nil {
		ret := &ir.Retry{Attempts: uint32(*rr.Attempts), BackoffBase: rr.Backoff.Base.Duration, BackoffMax: rr.Backoff.Max.Duration,
			AvoidPreviousHosts: *rr.AvoidPreviousHosts}
		for _, on := range rr.Conditions {
			ret.On = append(ret.On, string(on))
		}
		for _, c := range rr.StatusCodes {
			ret.StatusCodes = append(ret.StatusCodes, uint32(c))
		}
		if rr.PerTryTimeout != nil {
			ret.PerTryTimeout = rr.PerTryTimeout.Duration
		}
		route.Retry = ret
	} else {
		route.Retry = defaultRetry()
	}
	if sp := rt.SessionPersistence; sp != nil {
		sess := &ir.Session{Path: sp.Path}
		if sp.Type == v1alpha1.SessionHeader {
			sess.Header = sp.Name
		} else {
			sess.Cookie = sp.Name
		}
		if sp.TTL != nil {
			d := sp.TTL.Duration
			sess.TTL = &d
		}
		route.Session = sess
	}
	return route
}

// mergeClusters builds one cluster over the endpoints of a weighted route's backends, each endpoint weighted
// by its backend's share of the route and its own share of the backend. The stateful session filter can only
// pin a client to an endpoint of the cluster the router picked, and the router picks weighted clusters at
// random, so a client pinned across backends needs them to be one cluster; new clients still follow the
// route's weights through weighted round robin. The first backend's settings apply to the merged cluster.
func mergeClusters(name string, wcs []ir.WeightedCluster, byName map[string]*ir.Cluster) *ir.Cluster {
	first := *byName[wcs[0].Name]
	merged := &first
	merged.Name = name
	merged.Endpoints = nil
	for _, wc := range wcs {
		c := byName[wc.Name]
		var sum uint64
		for _, e := range c.Endpoints {
			sum += uint64(e.Weight)
		}
		for _, e := range c.Endpoints {
			// Scaled so that the backend's endpoints add up to its route weight (times 1000 for precision).
			w := max(uint64(wc.Weight)*uint64(e.Weight)*1000/sum, 1)
			e.Weight = uint32(min(w, 1<<31))
			merged.Endpoints = append(merged.Endpoints, e)
		}
	}
	return merged
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// builtCluster is a cluster and the hash keys its policy asks routes to use.
type builtCluster struct {
	*ir.Cluster
	HashKeysFromPolicy []ir.HashKey
}

func cluster(p *v1alpha1.LoadBalancerPolicy, b *v1alpha1.Backend) builtCluster {
	cb := b.CircuitBreakers
	cl := &ir.Cluster{
		Name:           clusterName(p, b.Name),
		Algorithm:      ir.Algorithm(b.LoadBalancing.Algorithm),
		ConnectTimeout: b.ConnectTimeout.Duration,
		CircuitBreakers: ir.CircuitBreakers{
			MaxConnections:     uint32(*cb.MaxConnections),
			MaxPendingRequests: uint32(*cb.MaxPendingRequests),
			MaxRequests:        uint32(*cb.MaxRequests),
			MaxRetries:         uint32(*cb.MaxRetries),
		},
	}
	if cb.MaxConnectionsPerEndpoint != nil {
		cl.CircuitBreakers.MaxConnectionsPerEndpoint = uint32(*cb.MaxConnectionsPerEndpoint)
	}
	if rb := cb.RetryBudget; rb != nil {
		cl.CircuitBreakers.RetryBudget = &ir.RetryBudget{Percent: float64(*rb.Percent), MinConcurrency: uint32(*rb.MinConcurrency)}
	}
	lb := &b.LoadBalancing
	if lr := lb.LeastRequest; lr != nil {
		cl.ChoiceCount = uint32(*lr.ChoiceCount)
	}
	if rh := lb.RingHash; rh != nil {
		cl.RingHash = &ir.RingHashSize{Min: uint64(*rh.MinimumRingSize), Max: uint64(*rh.MaximumRingSize)}
	} else if lb.Algorithm == v1alpha1.AlgorithmRingHash {
		var weight uint64
		for _, e := range b.Endpoints {
			weight += uint64(*e.Weight)
		}
		size := min(max(weight*v1alpha1.RingEntriesPerWeight, 1), v1alpha1.DefaultMaxRingSize)
		cl.RingHash = &ir.RingHashSize{Min: size, Max: v1alpha1.DefaultMaxRingSize}
	}
	if mg := lb.Maglev; mg != nil {
		cl.MaglevTableSize = uint64(*mg.TableSize)
	}
	if ss := lb.SlowStart; ss != nil {
		agg, _ := strconv.ParseFloat(ss.Aggression, 64)
		cl.SlowStart = &ir.SlowStart{Window: ss.Window.Duration, Aggression: agg, MinWeightPercent: float64(*ss.MinWeightPercent)}
	}
	if len(lb.ZoneFailover) > 0 {
		cl.ZoneFailover = slices.Clone(lb.ZoneFailover)
	}
	var keys []ir.HashKey
	for _, k := range lb.HashKeys {
		keys = append(keys, hashKey(k))
	}
	if hc := b.HealthCheck; hc != nil {
		if hc.PanicThreshold != nil {
			v := float64(*hc.PanicThreshold)
			cl.PanicThreshold = &v
		}
		cl.HealthCheck = healthCheck(hc.Active)
		cl.Outlier = outlier(hc.Passive)
	}
	cl.BufferBytes = clusterBufferBytes(b)
	if c := b.Connection; c != nil {
		cl.HTTP2 = c.Protocol == v1alpha1.UpstreamHTTP2
		if c.MaxRequestsPerConnection != nil {
			cl.MaxRequestsPerConnection = uint32(*c.MaxRequestsPerConnection)
		}
		if c.IdleTimeout != nil {
			d := c.IdleTimeout.Duration
			cl.IdleTimeout = &d
		}
		if k := c.TCPKeepalive; k != nil {
			ka := &ir.TCPKeepalive{}
			if k.Time != nil {
				ka.Time = k.Time.Duration
			}
			if k.Interval != nil {
				ka.Interval = k.Interval.Duration
			}
			if k.Probes != nil {
				ka.Probes = uint32(*k.Probes)
			}
			cl.TCPKeepalive = ka
		}
	}
	if t := b.TLS; t != nil {
		cl.TLS = &ir.UpstreamTLS{SNI: t.SNI}
		if !t.InsecureSkipVerify {
			cl.TLS.CASecret = cl.Name + "/ca"
		}
	}
	for _, e := range b.Endpoints {
		ep := ir.Endpoint{Address: e.Address, Port: uint32(e.Port), Weight: uint32(*e.Weight), Draining: e.State == v1alpha1.EndpointDraining, Zone: e.Zone}
		if hc := cl.HealthCheck; hc != nil {
			if a := b.HealthCheck.Active; a.Port != nil {
				ep.HealthCheckPort = uint32(*a.Port)
			}
			if (hc.Type == ir.HealthHTTP && hc.Host == "") || hc.Type == ir.HealthGRPC {
				// Probes test the endpoint, not a virtual host: they carry the endpoint's own address, never
				// one of the hostnames the policy serves. Left to Envoy, the Host (or gRPC authority) would be
				// the cluster name, "namespace/policy/backend", which HTTP servers such as Go's reject.
				port := ep.Port
				if ep.HealthCheckPort != 0 {
					port = ep.HealthCheckPort
				}
				ep.HealthCheckHost = net.JoinHostPort(e.Address, strconv.Itoa(int(port)))
			}
		}
		cl.Endpoints = append(cl.Endpoints, ep)
	}
	return builtCluster{Cluster: cl, HashKeysFromPolicy: keys}
}

func hashKey(k v1alpha1.HashKey) ir.HashKey {
	out := ir.HashKey{Terminal: k.Terminal}
	switch {
	case k.SourceIP != nil:
		out.SourceIP = true
	case k.Header != nil:
		out.Header = strings.ToLower(k.Header.Name)
	case k.QueryParameter != nil:
		out.QueryParameter = k.QueryParameter.Name
	case k.Cookie != nil:
		ck := &ir.CookieKey{Name: k.Cookie.Name}
		if g := k.Cookie.Generate; g != nil {
			ck.Generate, ck.TTL, ck.Path, ck.Secure, ck.SameSite = true, g.TTL.Duration, g.Path, g.Secure, string(g.SameSite)
		}
		out.Cookie = ck
	}
	return out
}

func healthCheck(a *v1alpha1.ActiveHealthCheck) *ir.HealthCheck {
	if a == nil {
		return nil
	}
	hc := &ir.HealthCheck{Type: string(a.Type), Interval: a.Interval.Duration, Timeout: a.Timeout.Duration, Jitter: a.Jitter.Duration,
		Healthy: uint32(*a.HealthyThreshold), Unhealthy: uint32(*a.UnhealthyThreshold)}
	switch {
	case a.HTTP != nil && a.Type == v1alpha1.HealthCheckHTTP:
		hc.Path, hc.Method, hc.Host, hc.Body = a.HTTP.Path, a.HTTP.Method, a.HTTP.Host, a.HTTP.ExpectedBody
		for _, r := range a.HTTP.ExpectedStatuses {
			hc.Statuses = append(hc.Statuses, [2]int64{int64(r.Start), int64(r.End) + 1})
		}
	case a.TCP != nil:
		hc.Send, hc.Receive = a.TCP.Send, a.TCP.Receive
	case a.GRPC != nil:
		hc.Service = a.GRPC.ServiceName
	}
	return hc
}

func outlier(p *v1alpha1.PassiveHealthCheck) *ir.Outlier {
	if p == nil {
		return nil
	}
	u32 := func(v *int32) *uint32 {
		if v == nil {
			return nil
		}
		x := uint32(*v)
		return &x
	}
	o := &ir.Outlier{Consecutive5xx: u32(p.Consecutive5xx), ConsecutiveGateway: u32(p.ConsecutiveGatewayErrors),
		ConsecutiveLocalOrigin: u32(p.ConsecutiveLocalOriginFailures), Interval: p.Interval.Duration,
		BaseEjectionTime: p.BaseEjectionTime.Duration, MaxEjectionPercent: uint32(*p.MaxEjectionPercent)}
	if sr := p.SuccessRate; sr != nil {
		f, _ := strconv.ParseFloat(sr.StdevFactor, 64)
		o.SuccessRate = &ir.SuccessRate{StdevFactor: uint32(math.Round(f * 1000)), MinimumHosts: uint32(*sr.MinimumHosts), RequestVolume: uint32(*sr.RequestVolume)}
	}
	if fp := p.FailurePercentage; fp != nil {
		o.FailurePercentage = &ir.FailurePercentage{Threshold: uint32(*fp.Threshold), MinimumHosts: uint32(*fp.MinimumHosts), RequestVolume: uint32(*fp.RequestVolume)}
	}
	return o
}

// addChains adds the policy's certificates to an HTTPS listener, one filter chain each.
func addChains(l *ir.Listener, p *v1alpha1.LoadBalancerPolicy, t *v1alpha1.ListenerTLS) {
	if l.TLS == nil {
		l.TLS = &ir.ListenerTLS{Default: -1, MinVersion: tlsVersion(t.MinVersion), MaxVersion: tlsVersion(t.MaxVersion), Ciphers: t.CipherSuites}
	}
	for i, names := range t.CertificateNames(p.Spec.Listener.Hostnames) {
		chain := ir.TLSChain{ServerNames: slices.Clone(names), Secret: fmt.Sprintf("%s/%s/certificate-%d", p.Namespace, p.Name, i)}
		l.TLS.Chains = append(l.TLS.Chains, chain)
		// The certificate without hostnames answers clients without SNI (or with an unknown name); when there
		// is none, the oldest policy's first certificate does.
		if len(t.Certificates[i].Hostnames) == 0 || len(l.TLS.Chains) == 1 {
			l.TLS.Default = len(l.TLS.Chains) - 1
		}
	}
}

func tlsVersion(v v1alpha1.TLSVersion) string {
	if v == v1alpha1.TLSv13 {
		return "TLSv1_3"
	}
	return "TLSv1_2"
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
	l := &ir.Listener{Name: fmt.Sprintf("%s-%d", strings.ToLower(string(p.Spec.Listener.Protocol)), port), Address: p.Spec.Listener.Address, Port: port, Protocol: proto, Edge: listenerEdge(p)}
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
