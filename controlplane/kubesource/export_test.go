package kubesource

import (
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// StatusComputations is how many policy statuses the status writers of this process computed so far.
func StatusComputations() int64 { return computations.Load() }

// OnStatusComputed calls f with the key of every policy whose status a writer of this process computes,
// until the returned function is called.
func OnStatusComputed(f func(objkey.Key)) (stop func()) {
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
