package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/rollout"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// newRollouts makes the staged rollouts' controller (standalone mode: pushes start rollouts) and loads the
// stored ones, splitting their groups again before the sources load and xDS is served. It returns nil in
// Kubernetes mode. With the etcd store, proxies is every replica's Envoys (fleetProxies): canaries are
// placed and judged across the fleet, and only the leader judges.
func newRollouts(cfg *Config, eng *engine.Engine, tracker *xdsserver.Tracker, st store.Store, shared *store.Etcd,
	proxies func() []xdsserver.ProxyStatus, poller *proxystats.Poller, api *pushapi.Server) (*rollout.Controller, error) {
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
		return nil, fmt.Errorf("the %T store cannot keep rollouts", st)
	}
	ro := &rollout.Controller{Engine: eng, Proxies: tracker.Proxies, Persist: persist, Decode: pushapi.PolicyOf, Log: cfg.Log}
	if shared != nil {
		ro.Proxies, ro.Leader = proxies, shared.Leader
	}
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

// followRollouts serves what the stored rollouts say whenever any replica changes them.
func followRollouts(ctx context.Context, cfg *Config, st *store.Etcd, ro *rollout.Controller) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.RolloutChanges():
			if err := ro.Reload(); err != nil {
				cfg.Log.Error("reading the rollouts other replicas wrote; trying again in a second", "error", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				if err := ro.Reload(); err != nil {
					cfg.Log.Error("reading the rollouts", "error", err)
				}
			}
		}
	}
}

// proxiesInterval is how often a replica publishes its Envoys in etcd.
const proxiesInterval = 2 * time.Second

// fleetProxies is every replica's Envoys with the etcd store: this replica's from its tracker, the
// others' as they published them (PublishProxies), read at most once a second.
type fleetProxies struct {
	st      *store.Etcd
	tracker *xdsserver.Tracker
	id      string

	mu     sync.Mutex
	at     time.Time
	others []xdsserver.ProxyStatus
}

func (f *fleetProxies) publish(ctx context.Context) {
	f.st.PublishProxies(ctx, f.id, proxiesInterval, func() []byte {
		b, _ := json.Marshal(f.tracker.Proxies())
		return b
	})
}

// all returns every replica's Envoys; an Envoy that moved between replicas is counted once, on this
// replica when it is here.
func (f *fleetProxies) all() []xdsserver.ProxyStatus {
	own := f.tracker.Proxies()
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.at) > time.Second {
		if reports, err := f.st.Proxies(); err == nil {
			f.others = f.others[:0]
			for id, b := range reports {
				if id == f.id {
					continue
				}
				var ps []xdsserver.ProxyStatus
				if json.Unmarshal(b, &ps) == nil {
					f.others = append(f.others, ps...)
				}
			}
			f.at = time.Now()
		}
	}
	if len(f.others) == 0 {
		return own
	}
	type id struct{ node, group string }
	here := make(map[id]bool, len(own))
	for _, p := range own {
		here[id{p.NodeID, p.Group}] = true
	}
	out := slices.Clone(own)
	for _, p := range f.others {
		if k := (id{p.NodeID, p.Group}); !here[k] {
			here[k] = true
			out = append(out, p)
		}
	}
	return out
}
