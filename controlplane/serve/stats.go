package serve

import (
	"context"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/healthhistory"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// stats is the stats subsystem: what is read back from each Envoy's stats port (backend health and
// load) and the history of it. Both are nil when --proxy-stats-interval is 0.
type stats struct {
	poller  *proxystats.Poller
	history *healthhistory.Recorder
}

// newStats makes the stats reader and its history, and has the push API answer health from them.
func newStats(cfg *Config, eng *engine.Engine, x *xds, m *metrics.Metrics, api *pushAPI) *stats {
	s := &stats{}
	if cfg.ProxyStatsInterval <= 0 {
		return s
	}
	tracker, proxies := x.tracker, api.proxies
	s.poller = &proxystats.Poller{Interval: cfg.ProxyStatsInterval, Window: time.Minute, Log: cfg.Log,
		// Every replica's Envoys with the etcd store (as in Kubernetes mode): the leader judges rollouts
		// on all of them, and a replica that takes over has their history.
		Proxies: func(context.Context) []xdsserver.ProxyStatus { return proxies() },
		// Only Envoys that proved who they are over mTLS, unless xDS was explicitly made insecure (and then
		// only on loopback, by default).
		TrustUnauthenticated: cfg.XDSInsecure,
		// Never through an HTTP proxy from the environment: the Envoys are reached directly.
		Client: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}, Metrics: m,
		// Expected shares come from the traffic model of what was published, when status is read. The
		// summaries are kept until the next read or publication.
		Expect:    newExpectation(eng, proxies).expect,
		ExpectKey: func() any { r, _ := eng.Result(); return r },
		// Reading stats holds Envoy's main thread, which also applies config: everything is read only as
		// often as keeps it within a share of that thread, the busy clusters in between, and no read starts
		// while config is on its way to the Envoy.
		Clusters:      x.cache.Target,
		ClusterChunk:  cfg.ProxyStatsSlice,
		FullReadShare: cfg.ProxyStatsFullShare,
		// A change the push API is still answering is on its way too, before it reaches the xDS server.
		Busy: func(node string, quiet time.Duration) bool { return api.changing.any() || tracker.Busy(node, quiet) }}
	// Summing the stats up and keeping their history step aside for a change being made.
	s.poller.Yield = stepAside(api.beingMade)
	api.HealthByProxy = s.poller.ByProxy
	// Status reads the summary with the history's verdicts on it: an endpoint whose passive-only
	// ejection lapsed is Unknown, not healthy.
	s.history = newHistory(eng, cfg.Log)
	s.history.Yield = stepAside(api.beingMade)
	api.Health = func() proxystats.Health { return s.history.Annotate(s.poller.Health()) }
	api.History = s.history
	return s
}

// run reads the Envoys' stats and records their history until ctx ends.
func (s *stats) run(ctx context.Context, g *errgroup.Group, interval time.Duration) {
	if s.poller == nil {
		return
	}
	g.Go(func() error { s.poller.Run(ctx); return nil })
	g.Go(func() error { recordHistory(ctx, s.history, s.poller, interval); return nil })
}
