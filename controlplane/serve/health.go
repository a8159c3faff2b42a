package serve

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/kubepki"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/rollout"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// metricsMux serves /metrics, /healthz (the process answers), /readyz (sources loaded, xDS served) and,
// with --pprof, /debug/pprof/. pprof shows the heap and goroutines, which hold policies, keys and tokens:
// it wants the admin token always, on loopback too, where any local process (and anything a proxy on this
// host can be made to connect to) reaches it.
// store, when set, is this replica's role in the store shared with other replicas, or why the store cannot
// be reached (the replica is stale: not ready, though it keeps serving xDS).
func metricsMux(cfg *Config, m *metrics.Metrics, lis net.Listener, adminToken string, ready *atomic.Bool, store func() (string, error)) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready: the sources have not loaded yet", http.StatusServiceUnavailable)
			return
		}
		if store != nil {
			role, err := store()
			if err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, "ok: "+role+"\n")
			return
		}
		io.WriteString(w, "ok\n")
	})
	if !cfg.Pprof {
		return mux, nil
	}
	if adminToken == "" {
		return nil, errors.New("--pprof: no admin token to protect it with")
	}
	guard := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(adminToken)) != 1 {
				w.Header().Set("WWW-Authenticate", "Bearer")
				http.Error(w, "pprof needs the admin token (Authorization: Bearer)", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	mux.Handle("/debug/pprof/", guard(http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/cmdline", guard(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("/debug/pprof/profile", guard(http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/symbol", guard(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("/debug/pprof/trace", guard(http.HandlerFunc(pprof.Trace)))
	cfg.Log.Warn("pprof is on: /debug/pprof/ on the metrics address", "address", lis.Addr().String())
	return mux, nil
}

// tokensFromSecret fills the tokens not configured from the token Secret, creating it on first start.
func tokensFromSecret(ctx context.Context, cfg *Config) error {
	if cfg.Kubernetes == nil {
		return errors.New("needs --kubernetes")
	}
	ns, err := cfg.namespace()
	if err != nil {
		return err
	}
	client, err := corev1client.NewForConfig(cfg.Kubernetes)
	if err != nil {
		return err
	}
	admin, ro, err := kubepki.LoadOrCreateTokens(ctx, client, ns, cfg.TokenSecret)
	if err != nil {
		return err
	}
	if cfg.Token == "" {
		cfg.Token = admin
	}
	if cfg.ReadOnlyToken == "" {
		cfg.ReadOnlyToken = ro
	}
	cfg.Log.Info("push API tokens from Secret", "namespace", ns, "name", cfg.TokenSecret)
	return nil
}

// policyCounts lists every policy's conditions, Programmed included (from what the Envoys of proxies
// acknowledged: the fleet's, as status counts them), for lbplane_policies and lbplane_policy_condition: the
// same conditions status shows.
// ro, when set, runs the staged rollouts: a policy's rollout puts RolledBack on it, and turns Programmed
// False while it runs and once it rolled back, as in its status.
// Each policy's conditions are computed as the scrape is written, and dropped after.
func policyCounts(eng *engine.Engine, fleet func() []xdsserver.ProxyStatus, ro *rollout.Controller) func() iter.Seq[metrics.PolicyConditions] {
	return func() iter.Seq[metrics.PolicyConditions] {
		return func(yield func(metrics.PolicyConditions) bool) {
			res, _ := eng.Result()
			if res == nil {
				return
			}
			proxies := fleet()
			now := metav1.Now()
			for k, p := range res.Policies.All() {
				st := policystatus.Compute(p, proxies, nil, now)
				if ro != nil {
					policystatus.WithRollout(&st, ro.Status(k), now)
				}
				if !yield(metrics.PolicyConditions{Policy: k, Conditions: st.Conditions, Rollout: st.Rollout}) {
					return
				}
			}
		}
	}
}

// proxySync lists this replica's Envoys and their sync state, for lbplane_proxy_sync.
func proxySync(tracker *xdsserver.Tracker) func() []metrics.ProxySync {
	return func() []metrics.ProxySync {
		proxies := tracker.Proxies()
		out := make([]metrics.ProxySync, len(proxies))
		for i, p := range proxies {
			out[i] = metrics.ProxySync{Node: p.NodeID, Group: p.Group, State: p.State}
		}
		return out
	}
}

// clusterInfo lists the clusters of every proxy group as published, with the policy and backend each was
// built from (ir.Source; a shared cluster is listed once per policy that uses it), for lbplane_cluster_info,
// which keeps the first row of each cluster.
func clusterInfo(eng *engine.Engine) func() iter.Seq[metrics.ClusterInfo] {
	return func() iter.Seq[metrics.ClusterInfo] {
		res, _ := eng.Result()
		return func(yield func(metrics.ClusterInfo) bool) {
			if res == nil {
				return
			}
			for _, g := range res.IR.Groups {
				for _, c := range g.Clusters {
					for _, s := range g.ClusterSources(c) {
						if !yield(metrics.ClusterInfo{Cluster: c.Name, Namespace: s.Namespace, Name: s.Name, Backend: s.Backend}) {
							return
						}
					}
				}
			}
		}
	}
}
