package serve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/fileroots"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/tenancy"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// newEngine makes the engine that translates policies into each group's resources, publishing into x's
// cache, with the flags that shape translation: access logs, cross-namespace references, the backend
// address rules, tenancy, DNS, and the roots policy files are read under (in standalone mode; close them
// with closeRoots).
func newEngine(cfg *Config, x *xds, m *metrics.Metrics) (eng *engine.Engine, rules reach.Rules, closeRoots func(), err error) {
	eng = engine.New(x.cache, cfg.Log)
	eng.Metrics = m
	// A group's gRPC profile is built once a gRPC client of it connects.
	x.cache.OnGRPCClient = eng.ServeGRPC
	// A NACK's resources are put on policies by the sources of the IR being served.
	x.tracker.Owners = func(group, typeURL string, resources []string, msg string) []apiwire.PolicyRef {
		res, _ := eng.Result()
		if res == nil {
			return nil
		}
		return policystatus.Owners(res.IR, group, typeURL, resources, msg)
	}
	m.ProxiesSync(proxySync(x.tracker), cfg.MetricsMaxProxies)
	m.Clusters(clusterInfo(eng))
	m.KnownTypes(xdsserver.ShortTypes(xdscache.Types)...)
	closeRoots = func() {}
	if cfg.EnvoyService != "" && cfg.Kubernetes == nil {
		return nil, rules, closeRoots, errors.New("--envoy-service needs --kubernetes")
	}
	eng.NoRouterDynamicStats = cfg.NoRouterDynamicStats
	if eng.AccessLog, err = accessLog(cfg.AccessLog); err != nil {
		return nil, rules, closeRoots, err
	}
	eng.CrossNamespace = cfg.AllowCrossNamespaceRefs
	if rules, err = reachRules(cfg); err != nil {
		return nil, rules, closeRoots, err
	}
	eng.Reach = rules
	if cfg.TenancyFile != "" {
		if eng.Tenancy, err = tenancy.Load(cfg.TenancyFile); err != nil {
			return nil, rules, closeRoots, err
		}
	}
	cfg.Log.Info("host names and ports of namespaces", "rules", eng.Tenancy.Describe())
	eng.Resolve = resolver(cfg)
	if rules.EnvoyDNS {
		cfg.Log.Warn("backends may have each Envoy resolve their host names (dns.resolver: Envoy): lbplane does not check what those names resolve to, so a name that answers 127.0.0.1 or 169.254.169.254 reaches the Envoy's host or a metadata server",
			"allow-envoy-dns", true)
	}
	if len(rules.Allow) > 0 {
		cfg.Log.Warn("backend addresses in loopback, link-local or unspecified ranges are allowed: a policy can reach services on the Envoy's own host",
			"allow-backend-cidrs", strings.Join(cfg.AllowBackendCIDRs, ","))
	}
	cfg.Log.Info("backend address rules", "rules", rules.Summary())
	if cfg.Kubernetes != nil {
		eng.ReadFile = fileroots.Refuse // Secrets are the way in Kubernetes mode
		return eng, rules, closeRoots, nil
	}
	roots, err := openFilesRoots(cfg)
	if err != nil {
		return nil, rules, closeRoots, fmt.Errorf("--files-root: %w", err)
	}
	roots.RefuseContent(cfg.ownKeys.Refuses)
	eng.ReadFile = roots.ReadFile
	cfg.Log.Info("policy file references resolve under", "roots", strings.Join(roots.Dirs(), ","))
	return eng, rules, func() { roots.Close() }, nil
}

// runEngine runs what the engine follows by itself: DNS names, and the certificate and CA files it re-reads
// every 2 s, so that a rotated certificate reaches Envoy (over SDS) without a push.
func runEngine(ctx context.Context, g *errgroup.Group, eng *engine.Engine) {
	g.Go(func() error { eng.RunDNS(ctx, 100*time.Millisecond); return nil })
	g.Go(func() error {
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
}
