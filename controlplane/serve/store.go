package serve

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/lbplane/lbplane/controlplane/rollout"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// storage is the store subsystem: where policies, endpoint overrides, rollouts and revocations are kept, and
// the push API tokens that go with it.
type storage struct {
	store.Store
	// shared is the etcd store the replicas share (--store etcd), nil with bbolt.
	shared *store.Etcd
	// token and roToken are the push API's admin and read-only tokens.
	token, roToken string
}

// newStorage opens the store --store names, reads or makes the push API tokens, and recognises lbplane's own
// keys (cfg.ownKeys). The store is closed again when anything after it fails.
func newStorage(ctx context.Context, cfg *Config) (s *storage, err error) {
	st, shared, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	if cfg.TokenSecret != "" {
		if err := tokensFromSecret(ctx, cfg); err != nil {
			return nil, fmt.Errorf("--token-secret: %w", err)
		}
	}
	token, roToken, err := loadTokens(cfg)
	if err != nil {
		return nil, fmt.Errorf("push API token: %w", err)
	}
	if cfg.ownKeys, err = openOwnKeys(cfg); err != nil {
		return nil, err
	}
	return &storage{Store: st, shared: shared, token: token, roToken: roToken}, nil
}

// follow keeps this replica in step with the others through the shared store: policies, revocations,
// rollouts, endpoint overrides, and the Envoys each replica serves. Nothing to do with bbolt.
func (s *storage) follow(ctx context.Context, g *errgroup.Group, cfg *Config, api *pushAPI, guard *xdsserver.Guard, ro *rollout.Controller) {
	if s.shared == nil {
		return
	}
	g.Go(func() error { followStore(ctx, cfg, s.shared, api.Server, guard, ro, &api.changing); return nil })
	g.Go(func() error { api.fleet.publish(ctx); return nil })
	if ro != nil {
		g.Go(func() error { followRollouts(ctx, cfg, s.shared, ro); return nil })
	}
	g.Go(func() error { followOverrides(ctx, cfg, s.shared, api.Server); return nil })
}
