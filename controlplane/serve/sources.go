package serve

import (
	"fmt"

	"github.com/lbplane/lbplane/controlplane/configdir"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/metrics"
)

// loadSources loads the policies of --config-dir (returning its watcher, nil without one) and of the store,
// and the store's endpoint overrides, into the engine: all before xDS is served.
func loadSources(cfg *Config, eng *engine.Engine, m *metrics.Metrics, api *pushAPI) (*configdir.Watcher, error) {
	var watcher *configdir.Watcher
	if cfg.ConfigDir != "" {
		watcher = &configdir.Watcher{Dir: cfg.ConfigDir, Engine: eng, Log: cfg.Log, Metrics: m}
		if err := watcher.Load(); err != nil {
			return nil, fmt.Errorf("--config-dir: %w", err)
		}
	}
	if err := api.Load(); err != nil {
		return nil, fmt.Errorf("loading the store: %w", err)
	}
	if cfg.Kubernetes == nil {
		// Before xDS is served: an endpoint under maintenance never reaches an Envoy after a restart.
		if err := api.LoadOverrides(); err != nil {
			return nil, fmt.Errorf("loading the endpoint overrides: %w", err)
		}
	}
	return watcher, nil
}
