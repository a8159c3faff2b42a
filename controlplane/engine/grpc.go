package engine

import (
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// grpcProfiles holds the groups whose gRPC profile is published (xdsbuild.GRPC): those a gRPC client has
// connected to. Each maps to the IR its profile was built from.
type grpcProfiles map[string]*ir.Group

// ServeGRPC publishes the gRPC profile of a group from now on, with every change of the group; the cache
// calls it when the group's first gRPC client connects (xdscache.Cache.OnGRPCClient).
func (e *Engine) ServeGRPC(group string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.grpc == nil {
		e.grpc = grpcProfiles{}
	}
	if _, ok := e.grpc[group]; ok {
		return
	}
	e.grpc[group] = nil
	e.publishGRPC(group, true)
}

// publishGRPC publishes the gRPC profile of a group if it is served and its IR changed (always when force).
// A group in a staged rollout is not: its gRPC clients take the change when the rollout ends. The profile
// is built whole from the group's IR. Caller holds e.mu.
func (e *Engine) publishGRPC(name string, force bool) {
	was, ok := e.grpc[name]
	if !ok || e.split.byGroup[name] != nil {
		return
	}
	var g *ir.Group
	if a := e.builds[name]; a != nil {
		g = a.IR()
	}
	if g == was && !force {
		return
	}
	st, _ := xdscache.NewState(nil)
	if g != nil {
		var err error
		if st, err = xdsbuild.GRPC(g); err != nil {
			e.log.Error("building the gRPC profile failed; the group's gRPC clients keep their last good config", "group", name, "error", err)
			return
		}
	}
	e.grpc[name] = g
	e.cache.Publish(xdscache.GRPCKey(name), st)
}
