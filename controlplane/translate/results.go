package translate

import (
	"slices"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
)

// Reasons set on conditions.
const (
	ReasonAccepted   = "Accepted"
	ReasonInvalid    = "Invalid"
	ReasonConflicted = "Conflicted"
	// ReasonHostnameConflict: a host or server name overlaps one that a policy of another namespace claimed
	// first on the same port.
	ReasonHostnameConflict = "HostnameConflict"
	// ReasonNotAllowed: the operator's tenancy rules do not let the policy's namespace use its port or a
	// name it claims (lbplane serve --tenancy-file).
	ReasonNotAllowed     = "NotAllowed"
	ReasonResolvedRefs   = "ResolvedRefs"
	ReasonBackendMissing = "BackendNotFound"
	ReasonInvalidRef     = "InvalidReference"
)

// PolicyResult is what translation concluded about one policy.
//
// The three booleans sit together after the counts: spread between the strings, each took 8 bytes of
// padding, and the struct was 264 bytes, the 288-byte size class, against 248 (the 256 class) now: 32 bytes
// per policy.
type PolicyResult struct {
	Key        objkey.Key
	Generation int64
	ProxyGroup string
	// AcceptedReason and AcceptedMessage explain Accepted (below).
	AcceptedReason  string
	AcceptedMessage string
	// ResolvedRefsReason and ResolvedRefsMessage explain ResolvedRefs (below).
	ResolvedRefsReason  string
	ResolvedRefsMessage string
	// Errors are the field errors behind an Invalid policy.
	Errors    v1alpha1.FieldErrors
	Endpoints int32
	// HealthyEndpoints leaves out draining (terminating) endpoints.
	HealthyEndpoints int32
	// Accepted is false when the policy is invalid, not allowed by the tenancy rules, or conflicts with an
	// older one; it is then not served.
	Accepted bool
	// ResolvedRefs is false when a backend references something that does not exist.
	ResolvedRefs bool
	// ResolvedByEnvoy: some backend has host-name endpoints, so Endpoints counts names, not the addresses
	// Envoy resolves them to; the counts the Envoys report replace it.
	ResolvedByEnvoy bool `json:",omitempty"`
	// algorithm is the first backend's algorithm in the defaulted spec (see Algorithm): one byte in the
	// padding after the booleans, so that the result keeps its size class.
	algorithm algorithmCode
	// Warnings are lint findings on an accepted policy (see package lint).
	Warnings []string
	// Resources names the Envoy resources this policy contributes to, for status and explain.
	Listener string
	Clusters []string
	// Backends names the spec backend of Clusters[i] at index i; "" for a route's session cluster, which
	// merges several backends. A slice beside Clusters, not a map: a map of one entry was 300 bytes per
	// policy, 5 % of lbplane's heap.
	Backends []string
	// rare holds what almost every policy lacks: a pointer, as slices or maps here would take the result
	// out of its size class.
	rare *rareResult
}

// rareResult is what few policies' results have.
type rareResult struct {
	// overrides are the endpoint overrides in force on the policy (see EndpointOverrides).
	overrides []v1alpha1.EndpointOverrideStatus
	// sessions names, in status, a route's session cluster ("<route>/session"), by its index in Clusters.
	sessions map[int]string
}

// rareFields returns r.rare, made when nil.
func (r *PolicyResult) rareFields() *rareResult {
	if r.rare == nil {
		r.rare = &rareResult{}
	}
	return r.rare
}

// Algorithm is the load-balancing algorithm of the policy's first backend with the defaults applied (the
// spec as translation read it), or "" for a policy whose algorithm is invalid. Status publishes it: no
// reader applies the default again.
func (r *PolicyResult) Algorithm() v1alpha1.Algorithm { return r.algorithm.algorithm() }

// algorithmCode is an algorithm as its place in v1alpha1.SupportedAlgorithms, plus one; 0 is none.
type algorithmCode uint8

var algorithms = v1alpha1.SupportedAlgorithms()

// algorithmOf codes the first backend's algorithm of a defaulted policy.
func algorithmOf(defaulted *v1alpha1.LoadBalancerPolicy) algorithmCode {
	if len(defaulted.Spec.Backends) == 0 {
		return 0
	}
	return algorithmCode(slices.Index(algorithms, defaulted.Spec.Backends[0].LoadBalancing.Algorithm) + 1)
}

func (c algorithmCode) algorithm() v1alpha1.Algorithm {
	if c == 0 || int(c) > len(algorithms) {
		return ""
	}
	return algorithms[c-1]
}

// BackendOf returns the spec backend cluster c is; false for a session cluster or a cluster not the policy's.
func (r *PolicyResult) BackendOf(c string) (string, bool) {
	if i := slices.Index(r.Clusters, c); i >= 0 && i < len(r.Backends) && r.Backends[i] != "" {
		return r.Backends[i], true
	}
	return "", false
}

// SessionOf returns the name status gives session cluster c ("<route>/session"); false for any other.
func (r *PolicyResult) SessionOf(c string) (string, bool) {
	if r.rare == nil {
		return "", false
	}
	name, ok := r.rare.sessions[slices.Index(r.Clusters, c)]
	return name, ok
}

// addSession records a route's session cluster.
func (r *PolicyResult) addSession(cluster, route string) {
	rare := r.rareFields()
	if rare.sessions == nil {
		rare.sessions = map[int]string{}
	}
	rare.sessions[len(r.Clusters)] = objkey.Join(route, "session")
	r.Clusters, r.Backends = append(r.Clusters, cluster), append(r.Backends, "")
}

// BackendCount counts the clusters that are spec backends (not session clusters).
func (r *PolicyResult) BackendCount() int {
	n := 0
	for _, b := range r.Backends {
		if b != "" {
			n++
		}
	}
	return n
}

// Conditions renders the result as Kubernetes conditions (without Programmed, which the server decides).
func (r *PolicyResult) Conditions(now metav1.Time) []metav1.Condition {
	var conds []metav1.Condition
	cond := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&conds, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: r.Generation, LastTransitionTime: now})
	}
	cond(v1alpha1.ConditionAccepted, r.Accepted, r.AcceptedReason, r.AcceptedMessage)
	cond(v1alpha1.ConditionResolvedRefs, r.ResolvedRefs, r.ResolvedRefsReason, r.ResolvedRefsMessage)
	return conds
}

// Result is the output of Translate.
type Result struct {
	IR       *ir.Config
	Policies PolicyResults
	// serial numbers the results a Translator hands out; parent is the serial of the one this one was
	// made from, and changed the keys whose result differs from it (see ChangedSince); log links what the
	// results before it changed.
	serial, parent uint64
	changed        []objkey.Key
	log            *changeLog
}

var serials atomic.Uint64

// changeLog is what one result changed from its parent, linked to its parent's: keys only, never a
// result, so that holding it costs little. The links are cut every maxChangeLog results.
type changeLog struct {
	parent  uint64
	changed []objkey.Key
	older   *changeLog
	depth   int
}

const maxChangeLog = 256

// logChanges links r's changes to those of the result it was made from.
func (r *Result) logChanges(parent *Result) {
	r.log = &changeLog{parent: r.parent, changed: r.changed}
	if l := parent.log; l != nil && l.depth < maxChangeLog {
		r.log.older, r.log.depth = l, l.depth+1
	}
}

// ChangedSince lists the policies whose result may differ between prev and r, when r was made from prev
// by a Translator, directly or through at most a few hundred results in between (ok is then true): a
// caller comparing two results looks at these instead of at every policy. When ok is false the caller
// compares every result.
func (r *Result) ChangedSince(prev *Result) (keys []objkey.Key, ok bool) {
	switch {
	case r == prev:
		return nil, true
	case prev == nil || r.parent == 0:
		return nil, false
	case r.parent == prev.serial:
		return r.changed, true
	}
	for l := r.log; l != nil && l.parent != 0; l = l.older {
		keys = append(keys, l.changed...)
		if l.parent == prev.serial {
			return keys, true
		}
	}
	return nil, false
}

// Prepare returns a defaulted copy of the policy and every problem found in it alone, under the server's
// rules on backend addresses: the one place where they are applied to a policy (the push API, the config
// directory, translation and lbctl lint all come here).
func Prepare(p *v1alpha1.LoadBalancerPolicy, rules reach.Rules) (*v1alpha1.LoadBalancerPolicy, v1alpha1.FieldErrors) {
	c := p.DeepCopy()
	v1alpha1.Default(c)
	errs := v1alpha1.Validate(c)
	return c, append(errs, rules.Check(c)...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
