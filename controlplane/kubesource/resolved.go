package kubesource

import (
	"maps"
	"slices"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// serviceNameIndex indexes EndpointSlices by "namespace/service": a Service's slices are then found
// without looking at every slice of its namespace (a label selector on the cache filters them all).
const serviceNameIndex = "lbplane.serviceName"

func indexServiceName(o client.Object) []string {
	if n := o.GetLabels()[discoveryv1.LabelServiceName]; n != "" {
		return []string{n}
	}
	return nil
}

// policyServiceIndex and policySecretIndex index LoadBalancerPolicies by the Services and the Secrets
// they reference ("namespace/name"): an event on a Service, one of its EndpointSlices or a Secret finds the
// policies it touches without looking at the others.
const (
	policyServiceIndex = "lbplane.policy.services"
	policySecretIndex  = "lbplane.policy.secrets"
)

func indexPolicyServices(o client.Object) []string {
	p, ok := o.(*v1alpha1.LoadBalancerPolicy)
	if !ok {
		return nil
	}
	var out []string
	for _, ref := range serviceRefs(p) {
		out = append(out, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}.String())
	}
	return compactStrings(out)
}

func indexPolicySecrets(o client.Object) []string {
	p, ok := o.(*v1alpha1.LoadBalancerPolicy)
	if !ok {
		return nil
	}
	var out []string
	for _, ref := range translate.SecretRefs(p) {
		out = append(out, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}.String())
	}
	return compactStrings(out)
}

func compactStrings(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// serviceRefs lists the Service ports a policy's backends reference.
func serviceRefs(p *v1alpha1.LoadBalancerPolicy) []translate.ServiceRef {
	var out []translate.ServiceRef
	for _, b := range p.Spec.Backends {
		if b.Service != nil {
			out = append(out, translate.ServiceRefOf(p.Namespace, b.Service))
		}
	}
	return out
}

// changes is what events said changed since the last resync: policies, Services (an EndpointSlice event
// marks its Service) and Secrets, by namespace/name.
type changes struct {
	policies, services, secrets map[types.NamespacedName]bool
	// gateways: a Gateway API object (or a Namespace's labels, a Service's ports) changed; the next resync
	// translates the Gateway API objects again and hands on only the policies that moved.
	gateways bool
	// all is set by an event the sets cannot describe; the next resync reads everything.
	all bool
}

func newChanges(all bool) changes {
	return changes{policies: map[types.NamespacedName]bool{}, services: map[types.NamespacedName]bool{},
		secrets: map[types.NamespacedName]bool{}, all: all}
}

// resolved is what the Kubernetes source last handed the engine, kept so that a resync reads again only
// what events say changed: after one EndpointSlice event it resolves that Service alone, and after one
// policy edit it copies that policy alone. Policies that did not change keep the copy (and so the pointer)
// the engine has, which its translator takes as unchanged without looking inside.
type resolved struct {
	mu      sync.Mutex
	pending changes

	// Owned by the resync loop. services and secrets are handed to the engine as they are, so they are
	// copied before the first write after a hand-off (see round), never written in place.
	policies   map[types.NamespacedName]*v1alpha1.LoadBalancerPolicy
	services   map[translate.ServiceRef]translate.ServiceEndpoints
	secrets    map[translate.SecretRef]translate.TLSSecret
	serviceUse map[translate.ServiceRef]int // how many policies of policies reference each
	secretUse  map[translate.SecretRef]int
}

func newResolved() *resolved {
	return &resolved{pending: newChanges(true), policies: map[types.NamespacedName]*v1alpha1.LoadBalancerPolicy{},
		services: map[translate.ServiceRef]translate.ServiceEndpoints{}, secrets: map[translate.SecretRef]translate.TLSSecret{},
		serviceUse: map[translate.ServiceRef]int{}, secretUse: map[translate.SecretRef]int{}}
}

// endpointsOnly tells whether the changes pending are changes of Services and their EndpointSlices alone.
func (r *resolved) endpointsOnly() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &r.pending
	return !p.all && !p.gateways && len(p.policies) == 0 && len(p.secrets) == 0 && len(p.services) > 0
}

// mark records an event on obj.
func (r *resolved) mark(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		if n := o.Labels[discoveryv1.LabelServiceName]; n != "" {
			r.pending.services[types.NamespacedName{Namespace: o.Namespace, Name: n}] = true
		}
	case *v1alpha1.LoadBalancerPolicy:
		r.pending.policies[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}] = true
	case client.Object:
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
		if isSecret(o) {
			r.pending.secrets[key] = true
		} else {
			r.pending.services[key] = true
		}
	default:
		r.pending.all = true
	}
}

// take returns what changed since the last call and starts a new round.
func (r *resolved) take() changes {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.pending
	r.pending = newChanges(false)
	return c
}

// round is the work of one incremental resync: what it hands the engine, and what it must read.
type round struct {
	changed []*v1alpha1.LoadBalancerPolicy
	deleted []objkey.Key
	// Service ports and Secrets to read again.
	readServices map[translate.ServiceRef]bool
	readSecrets  map[translate.SecretRef]bool
	// Whether this round copied the maps it writes (the engine holds the previous ones), and whether it
	// wrote any entry.
	ownServices, ownSecrets bool
	refsChanged             bool
	// The entries of the maps this round added, modified or removed, for the translator (see
	// translate.ChangedRefs).
	refs translate.ChangedRefs
}

func newRound() *round {
	return &round{readServices: map[translate.ServiceRef]bool{}, readSecrets: map[translate.SecretRef]bool{}}
}

func (rd *round) empty() bool {
	return len(rd.changed) == 0 && len(rd.deleted) == 0 && !rd.refsChanged
}

// setPolicy makes p the policy under key (nil: deleted), counting the references it gains and loses.
// References gained first: a policy edit that keeps its Service does not drop and read it again.
func (r *resolved) setPolicy(rd *round, key types.NamespacedName, p *v1alpha1.LoadBalancerPolicy) {
	old := r.policies[key]
	if old == nil && p == nil {
		return
	}
	if p != nil {
		for _, ref := range serviceRefs(p) {
			if r.serviceUse[ref]++; r.serviceUse[ref] == 1 {
				rd.readServices[ref] = true
			}
		}
		for _, ref := range translate.SecretRefs(p) {
			if r.secretUse[ref]++; r.secretUse[ref] == 1 {
				rd.readSecrets[ref] = true
			}
		}
		r.policies[key] = p
		rd.changed = append(rd.changed, p)
	} else {
		delete(r.policies, key)
		rd.deleted = append(rd.deleted, key)
	}
	if old == nil {
		return
	}
	for _, ref := range serviceRefs(old) {
		if r.serviceUse[ref]--; r.serviceUse[ref] == 0 {
			delete(r.serviceUse, ref)
			delete(rd.readServices, ref)
			if _, ok := r.services[ref]; ok {
				r.writableServices(rd)
				delete(r.services, ref)
				rd.refs.Services = append(rd.refs.Services, ref)
			}
		}
	}
	for _, ref := range translate.SecretRefs(old) {
		if r.secretUse[ref]--; r.secretUse[ref] == 0 {
			delete(r.secretUse, ref)
			delete(rd.readSecrets, ref)
			if _, ok := r.secrets[ref]; ok {
				r.writableSecrets(rd)
				delete(r.secrets, ref)
				rd.refs.Secrets = append(rd.refs.Secrets, ref)
			}
		}
	}
}

// setService stores what a Service port resolved to, if it differs from what the engine has.
func (r *resolved) setService(rd *round, ref translate.ServiceRef, se translate.ServiceEndpoints) {
	if old, ok := r.services[ref]; ok && old.Err == se.Err && slices.Equal(old.Endpoints, se.Endpoints) && slices.Equal(old.GrantedTo, se.GrantedTo) {
		return
	}
	r.writableServices(rd)
	r.services[ref] = se
	rd.refs.Services = append(rd.refs.Services, ref)
}

func (r *resolved) setSecret(rd *round, ref translate.SecretRef, sec translate.TLSSecret) {
	if old, ok := r.secrets[ref]; ok && old.Err == sec.Err && string(old.Cert) == string(sec.Cert) && string(old.Key) == string(sec.Key) {
		return
	}
	r.writableSecrets(rd)
	r.secrets[ref] = sec
	rd.refs.Secrets = append(rd.refs.Secrets, ref)
}

// writableServices copies the map the engine holds before this round's first write: one copy of the
// map's entries (no endpoint is copied) per resync that changes any.
func (r *resolved) writableServices(rd *round) {
	rd.refsChanged = true
	if !rd.ownServices {
		r.services = maps.Clone(r.services)
		rd.ownServices = true
	}
}

func (r *resolved) writableSecrets(rd *round) {
	rd.refsChanged = true
	if !rd.ownSecrets {
		r.secrets = maps.Clone(r.secrets)
		rd.ownSecrets = true
	}
}
