// Package serve wires the standalone control plane: store and config-dir sources, the pipeline, the xDS
// server and the push API. xDS is served only once every source has loaded, so a restarted lbplane never
// hands an Envoy an empty or partial config.
package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"

	"github.com/lbplane/lbplane/controlplane/configdir"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Config of a standalone lbplane.
type Config struct {
	XDSAddress string
	APIAddress string
	DataDir    string
	ConfigDir  string
	Token      string
	// SettleTimeout bounds how long each step of a change waits for the group's Envoys to acknowledge the
	// previous one (see xdscache.Cache.Publish); an Envoy that is stuck or rejects config must not hold the
	// rest back forever.
	SettleTimeout time.Duration
	Log           *slog.Logger
	// APIRateLimit is calls per second per client address on the push API; 0 disables the limit.
	APIRateLimit float64
	// XDSTLS, when set, requires mTLS on xDS with these files (bring your own CA) instead of lbplane's own CA.
	XDSTLS *xdsserver.TLSFiles
	// XDSInsecure serves xDS in plaintext, without authentication: only on loopback unless
	// XDSInsecureListenAny is also set. Without it (and without XDSTLS) lbplane runs its own CA in
	// <data-dir>/pki and requires mTLS.
	XDSInsecure          bool
	XDSInsecureListenAny bool
	// XDSServerNames are extra DNS names or IPs for lbplane's own xDS certificate (the bind host, localhost,
	// 127.0.0.1 and ::1 are always in it).
	XDSServerNames []string
	// EnvoyCertValidity is the life of the client certificates the push API issues (pki.ClientValidity when 0).
	EnvoyCertValidity time.Duration
	// MaxXDSConnections caps xDS connections open at once (xdsserver.DefaultMaxConnections when 0, none when
	// negative).
	MaxXDSConnections int
	// AckTimeout: a proxy that leaves a response unanswered this long stops counting for settle waits.
	AckTimeout time.Duration
	// Kubernetes, when set, reads LoadBalancerPolicies, Services, EndpointSlices and TLS Secrets from this
	// API server; the push API then only reads.
	Kubernetes *rest.Config
	// AllowCrossNamespaceRefs lets a policy reference a Service in another namespace.
	AllowCrossNamespaceRefs bool
	// LeaderElectionNamespace, with Kubernetes, elects one replica to write status.
	LeaderElectionNamespace string
	// MetricsAddress serves Prometheus metrics on /metrics; empty turns them off.
	MetricsAddress string
	// ProxyStatsInterval is how often each Envoy's stats port is read for backend health and load; 0 turns
	// reading off.
	ProxyStatsInterval time.Duration
	// NoRouterDynamicStats turns Envoy's per-response upstream stats off (no per-backend latency).
	NoRouterDynamicStats bool
	// LoadStatusInterval, with Kubernetes, spaces out status writes of requests, errors and latency.
	LoadStatusInterval time.Duration
}

// TokenFile is where the push API token lives in the data directory.
const TokenFile = "token"

// loadToken returns the configured token, or the one in the data dir, generating it on first start.
func loadToken(cfg *Config) (string, error) {
	if cfg.Token != "" {
		return cfg.Token, nil
	}
	path := filepath.Join(cfg.DataDir, TokenFile)
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	t := hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", err
	}
	cfg.Log.Info("generated the push API token", "file", path)
	return t, nil
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	st, err := store.Open(cfg.DataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	token, err := loadToken(&cfg)
	if err != nil {
		return fmt.Errorf("push API token: %w", err)
	}

	cache := xdscache.New()
	tracker := xdsserver.NewTracker(cache, cfg.Log)
	tracker.AckTimeout = cfg.AckTimeout
	xdsOpts, issuer, err := xdsSecurity(&cfg)
	if err != nil {
		return err
	}
	tracker.RequireIdentity = !cfg.XDSInsecure
	var m *metrics.Metrics
	if cfg.MetricsAddress != "" {
		m = metrics.New(tracker.CountByGroup)
	}
	tracker.Metrics, st.Metrics = m, m
	cache.Settle = func(ctx context.Context, group, version string) {
		if !tracker.WaitGroupSynced(ctx, group, version, cfg.SettleTimeout) && ctx.Err() == nil {
			cfg.Log.Warn("not every proxy acknowledged a step of a change in time; going on", "group", group, "version", version)
		}
	}
	eng := engine.New(cache, cfg.Log)
	eng.Metrics = m
	eng.NoRouterDynamicStats = cfg.NoRouterDynamicStats
	eng.CrossNamespace = cfg.AllowCrossNamespaceRefs
	api := &pushapi.Server{Store: st, Engine: eng, Tracker: tracker, Token: token, Log: cfg.Log, RateLimit: cfg.APIRateLimit, Metrics: m}
	api.IssueCert = issuer
	var poller *proxystats.Poller
	if cfg.ProxyStatsInterval > 0 {
		poller = &proxystats.Poller{Interval: cfg.ProxyStatsInterval, Window: time.Minute, Log: cfg.Log,
			Proxies: func(context.Context) []xdsserver.ProxyStatus { return tracker.Proxies() },
			// Only Envoys that proved who they are over mTLS, unless xDS was explicitly made insecure (and then
			// only on loopback, by default).
			TrustUnauthenticated: cfg.XDSInsecure,
			// Never through an HTTP proxy from the environment: the Envoys are reached directly.
			Client: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}}
		api.Health = poller.Health
	}

	// Load every source before opening the xDS port.
	var watcher *configdir.Watcher
	if cfg.ConfigDir != "" {
		watcher = &configdir.Watcher{Dir: cfg.ConfigDir, Engine: eng, Log: cfg.Log}
		if err := watcher.Load(); err != nil {
			return fmt.Errorf("--config-dir: %w", err)
		}
	}
	if err := api.Load(); err != nil {
		return fmt.Errorf("loading the store: %w", err)
	}
	var kube *kubesource.Source
	if cfg.Kubernetes != nil {
		api.ReadOnly = "policies come from Kubernetes in this mode: use kubectl apply"
		kube = &kubesource.Source{Config: cfg.Kubernetes, Engine: eng, Tracker: tracker, Log: cfg.Log, LeaderElectionNamespace: cfg.LeaderElectionNamespace}
		if poller != nil {
			// The status writer speaks for every replica's Envoys, so the replica that writes status reads
			// them all, and no other does.
			poller.Proxies = kube.AllProxies
			kube.Health, kube.LoadStatusInterval, kube.ReadHealth = poller.Health, cfg.LoadStatusInterval, poller.Run
		}
		if err := kube.Start(); err != nil {
			return fmt.Errorf("kubernetes: %w", err)
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	if kube != nil {
		g.Go(func() error { return kube.Run(ctx) })
		// xDS is served only once the caches have synced and the first snapshot is built: an Envoy must never
		// get a partial config from a replica that is still starting.
		cfg.Log.Info("waiting for the Kubernetes caches to sync")
		select {
		case <-kube.Synced():
		case <-ctx.Done():
			return g.Wait()
		}
	}
	res, _ := eng.Result()
	cfg.Log.Info("sources loaded", "policies", len(res.Policies), "groups", len(res.IR.Groups))

	xdsLis, err := net.Listen("tcp", cfg.XDSAddress)
	if err != nil {
		return fmt.Errorf("xDS address: %w", err)
	}
	maxConns := cfg.MaxXDSConnections
	if maxConns == 0 {
		maxConns = xdsserver.DefaultMaxConnections()
	}
	xdsLis = xdsserver.LimitConnections(xdsLis, maxConns)
	apiLis, err := net.Listen("tcp", cfg.APIAddress)
	if err != nil {
		xdsLis.Close()
		return fmt.Errorf("API address: %w", err)
	}
	servers := []*http.Server{{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute}}
	listeners := []net.Listener{apiLis}
	if m != nil {
		metricsLis, err := net.Listen("tcp", cfg.MetricsAddress)
		if err != nil {
			xdsLis.Close()
			apiLis.Close()
			return fmt.Errorf("metrics address: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.Handler())
		servers = append(servers, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute})
		listeners = append(listeners, metricsLis)
		cfg.Log.Info("serving metrics", "address", metricsLis.Addr().String())
	}
	cfg.Log.Info("serving", "xds", xdsLis.Addr().String(), "api", apiLis.Addr().String())

	cfg.Log.Info("xDS connection limit", "max", maxConns)
	grpcServer := xdsserver.NewGRPC(ctx, cache, tracker, xdsOpts...)
	g.Go(func() error { return xdsserver.Serve(ctx, grpcServer, xdsLis) })
	for i, srv := range servers {
		g.Go(func() error {
			if err := srv.Serve(listeners[i]); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		g.Go(func() error {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		})
	}
	if watcher != nil {
		g.Go(func() error { watcher.Run(ctx); return nil })
	}
	if poller != nil && kube == nil {
		g.Go(func() error { poller.Run(ctx); return nil })
	}
	g.Go(func() error {
		// Certificates and CA bundles are re-read so that a rotated certificate reaches Envoy (over SDS)
		// without a push.
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				eng.RefreshFiles()
			}
		}
	})
	return g.Wait()
}
