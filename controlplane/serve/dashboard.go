package serve

import (
	"context"

	"github.com/lbplane/lbplane/controlplane/dashboard"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// newDashboard makes the web dashboard over the push API: it shows the Envoys status counts (the fleet's
// with Kubernetes or the etcd store), the health history when stats are read, and lets an admin change an
// endpoint's state where the store keeps overrides (not in Kubernetes mode).
func newDashboard(cfg *Config, st *storage, api *pushAPI, kube *kubesource.Source, s *stats) *dashboard.Server {
	tracker := api.Tracker
	dash := &dashboard.Server{Token: st.token, ReadOnlyToken: st.roToken, Policies: api.Views, Explain: api.Explain, Live: api.Live, Log: cfg.Log,
		RateLimit: cfg.APIRateLimit,
		Proxies:   func(context.Context) []xdsserver.ProxyStatus { return tracker.Proxies() }}
	switch {
	case kube != nil:
		dash.Proxies = kube.AllProxies
	case api.fleet != nil:
		dash.Proxies = func(context.Context) []xdsserver.ProxyStatus { return api.fleet.all() }
	}
	if s.history != nil {
		dash.History = api.PolicyHistory
	}
	if cfg.Kubernetes == nil {
		dash.EndpointState = api.EndpointStateHandler() // overrides are kept by the store (pushapi/overrides.go)
	}
	return dash
}
