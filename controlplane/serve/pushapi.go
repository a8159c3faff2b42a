package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lbplane/lbplane/controlplane/dashboard"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// pushAPI is the push API subsystem: the server lbctl talks to, the requests it is answering, and the
// Envoys it counts (with the etcd store every replica's: fleet).
type pushAPI struct {
	*pushapi.Server
	// changing counts the push API requests being answered (changing.go).
	changing changeRequests
	// fleet publishes and reads every replica's Envoys with the etcd store; nil otherwise.
	fleet *fleetProxies
	// proxies are the Envoys rollouts and the stats reader work on: this replica's, or the fleet's.
	proxies func() []xdsserver.ProxyStatus
}

// newPushAPI makes the push API over the store and the engine; it serves nothing until serve.
func newPushAPI(cfg *Config, st *storage, x *xds, eng *engine.Engine, m *metrics.Metrics, rules reach.Rules) *pushAPI {
	tracker := x.tracker
	api := &pushAPI{Server: &pushapi.Server{Store: st.Store, Engine: eng, Tracker: tracker, Token: st.token, ReadOnlyToken: st.roToken, Log: cfg.Log, RateLimit: cfg.APIRateLimit, Metrics: m}}
	api.Settings = settings(cfg, rules)
	api.IssueCert = x.issuer
	api.PushWait = cfg.PushWait
	api.Guard = x.guard
	if st.shared != nil {
		api.StoreStatus = storeStatus(cfg, st.shared, tracker.Targets)
	}
	// With the etcd store each replica publishes its Envoys, so that rollouts place canaries and read stats
	// across the fleet.
	api.proxies = tracker.Proxies
	if st.shared != nil {
		api.fleet = &fleetProxies{st: st.shared, tracker: tracker, id: cfg.ReplicaID, log: cfg.Log}
		api.proxies = api.fleet.all
		// A policy's status and the dashboard count every replica's Envoys, as in Kubernetes mode: every
		// replica shows the same.
		api.AllProxies = api.fleet.all
	}
	return api
}

// beingMade says a change is being made: a push API request being answered, or config on its way to an
// Envoy.
func (api *pushAPI) beingMade() bool { return api.changing.any() || api.Tracker.Sending() }

// listenAPI opens the push API's port, over TLS when configured, refusing plaintext beyond loopback unless
// told.
func listenAPI(ctx context.Context, cfg *Config, serving *pki.ServingCert) (net.Listener, error) {
	lis, err := net.Listen("tcp", cfg.APIAddress)
	if err != nil {
		return nil, fmt.Errorf("API address: %w", err)
	}
	tlsConfig, err := apiTLS(ctx, cfg, serving)
	if err == nil {
		err = checkAPIListener(cfg, lis, tlsConfig != nil)
	}
	if err != nil {
		lis.Close()
		return nil, err
	}
	if tlsConfig != nil {
		lis = tls.NewListener(lis, tlsConfig)
		if cfg.APITLSAuto {
			cfg.Log.Info("the push API serves HTTPS with lbplane's own certificate", "names", serving.Names())
		} else {
			cfg.Log.Info("the push API serves HTTPS", "cert", cfg.APITLSCert)
		}
	}
	return lis, nil
}

// serve serves the push API and the dashboard on lis until ctx ends, then shuts them down gracefully.
func (api *pushAPI) serve(ctx context.Context, g *errgroup.Group, lis net.Listener, dash *dashboard.Server) {
	mux := http.NewServeMux()
	mux.Handle(dashboard.Prefix, dash.Handler())
	mux.Handle("/", api.changing.count(api.Handler()))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute}
	g.Go(func() error {
		if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error { return shutdownOnDone(ctx, srv) })
}
