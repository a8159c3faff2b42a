package kubesource

import (
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// StatusComputations is how many policy statuses the status writers of this process computed so far.
func StatusComputations() int64 { return computations.Load() }

// OnStatusComputed calls f with the key of every policy whose status a writer of this process computes,
// until the returned function is called.
func OnStatusComputed(f func(objkey.Key)) (stop func()) {
	return OnStatusComputedOfKind(func(kind string, k objkey.Key) {
		if kind == kindPolicy {
			f(k)
		}
	})
}

// OnStatusComputedOfKind calls f with the kind and the key of every object whose status a writer of this
// process computes (LoadBalancerPolicy, GatewayClass, Gateway, HTTPRoute, BackendLoadBalancerPolicy), until
// the returned function is called.
func OnStatusComputedOfKind(f func(kind string, k objkey.Key)) (stop func()) {
	computedHook.Store(&f)
	return func() { computedHook.Store(nil) }
}

// RouteParents is routeParents, for tests.
var RouteParents = routeParents

// PolicyAncestors is policyAncestors, for tests.
var PolicyAncestors = policyAncestors

// ServicePortsMoved is servicePortsMoved, for tests.
var ServicePortsMoved = servicePortsMoved

// SameTargets is sameTargets, for tests.
var SameTargets = sameTargets

// OnStatusTick calls f after every tick of the status writers of this process, until the returned function
// is called.
func OnStatusTick(f func()) (stop func()) {
	tickHook.Store(&f)
	return func() { tickHook.Store(nil) }
}

// The kinds OnStatusComputedOfKind names.
const (
	KindRoute   = kindRoute
	KindGateway = kindGateway
)

// ResyncsOfEverything is how many resyncs of everything the sources of this process made so far.
func ResyncsOfEverything() int64 { return resyncsOfEverything.Load() }
