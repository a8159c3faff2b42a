package serve

import (
	"context"
	"time"

	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/store"
)

// followOverrides serves the endpoint overrides the store holds whenever any replica changes them (this one
// too: unchanged overrides publish nothing). A failed read is tried again a second later, then at the next
// change.
func followOverrides(ctx context.Context, cfg *Config, st *store.Etcd, api *pushapi.Server) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.OverrideChanges():
			if err := api.LoadOverrides(); err != nil {
				cfg.Log.Error("reading the endpoint overrides other replicas wrote; trying again in a second", "error", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				if err := api.LoadOverrides(); err != nil {
					cfg.Log.Error("reading the endpoint overrides", "error", err)
				}
			}
		}
	}
}
