package serve

import (
	"fmt"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/rollout"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// newRollouts makes the staged rollouts' controller (standalone mode: pushes start rollouts) and loads the
// stored ones, splitting their groups again before the sources load and xDS is served. It returns nil in
// Kubernetes mode.
func newRollouts(cfg *Config, eng *engine.Engine, tracker *xdsserver.Tracker, st store.Store, poller *proxystats.Poller, api *pushapi.Server) (*rollout.Controller, error) {
	switch cfg.RolloutDefault {
	case "", rollout.ModeImmediate, rollout.ModeStaged:
	default:
		return nil, fmt.Errorf("--rollout-default: must be %q or %q, got %q", rollout.ModeImmediate, rollout.ModeStaged, cfg.RolloutDefault)
	}
	if cfg.Kubernetes != nil {
		if cfg.RolloutDefault == rollout.ModeStaged {
			return nil, fmt.Errorf("--rollout-default staged is not available with --kubernetes yet")
		}
		return nil, nil
	}
	persist, ok := st.(rollout.Persist)
	if !ok {
		// The etcd store's replicas each serve their own Envoys; one rollout across all of them needs the
		// leader to decide and every replica to follow, which is not built yet. Staged pushes are refused
		// there rather than applied at once.
		const why = "staged rollouts are not available with --store etcd yet"
		if cfg.RolloutDefault == rollout.ModeStaged {
			return nil, fmt.Errorf("--rollout-default staged: %s", why)
		}
		api.RolloutsUnavailable = why
		return nil, nil
	}
	ro := &rollout.Controller{Engine: eng, Proxies: tracker.Proxies, Persist: persist, Decode: pushapi.PolicyOf, Log: cfg.Log}
	if poller != nil {
		ro.Histories = poller.Histories
	}
	if err := ro.Load(); err != nil {
		return nil, fmt.Errorf("loading the stored rollouts: %w", err)
	}
	api.Rollouts, api.RolloutDefault = ro, cfg.RolloutDefault
	if cfg.RolloutDefault == rollout.ModeStaged {
		cfg.Log.Info("every pushed change is rolled out in stages unless the push says --rollout immediate")
	}
	return ro, nil
}
