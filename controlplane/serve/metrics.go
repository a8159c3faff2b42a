package serve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lbplane/lbplane/controlplane/metrics"
)

// metricsServer is the Prometheus subsystem: the metrics, and the server of /metrics, /healthz and /readyz on
// --metrics-address (none when it is empty; m is nil then, and every metrics method does nothing).
type metricsServer struct {
	m   *metrics.Metrics
	lis net.Listener
	srv *http.Server
	// ready: the sources have loaded and xDS is served (/readyz); until then the metrics port already
	// answers /healthz, so that a probe can tell a slow first sync from a dead process.
	ready atomic.Bool
}

// newMetrics makes the metrics and starts serving them at once, health included, and has the tracker and the
// store count into them. Close it on any return; a clean end shuts it down gracefully first (shutdown).
func newMetrics(cfg *Config, x *xds, st *storage) (*metricsServer, error) {
	tracker := x.tracker
	s := &metricsServer{}
	if cfg.MetricsAddress != "" {
		s.m = metrics.New(tracker.CountByGroup)
		var err error
		if s.lis, err = net.Listen("tcp", cfg.MetricsAddress); err != nil {
			return nil, fmt.Errorf("metrics address: %w", err)
		}
		mux, err := metricsMux(cfg, s.m, s.lis, st.token, &s.ready, storeHealth(cfg, st.shared))
		if err != nil {
			s.lis.Close()
			return nil, err
		}
		s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
		go s.srv.Serve(s.lis)
		cfg.Log.Info("serving metrics and health", "address", s.lis.Addr().String(), "pprof", cfg.Pprof)
	}
	tracker.Metrics = s.m
	setStoreMetrics(st.Store, s.m)
	if st.shared != nil {
		s.m.RefusedRecords(st.shared.RefusedCount)
	}
	if x.guard != nil {
		s.m.RevocationsInForce(func() int { return len(x.guard.Revocations()) })
	}
	return s, nil
}

// address is where the metrics are served, empty when they are not.
func (s *metricsServer) address() string {
	if s.lis == nil {
		return ""
	}
	return s.lis.Addr().String()
}

// shutdown shuts the metrics server down gracefully once ctx ends.
func (s *metricsServer) shutdown(ctx context.Context, g *errgroup.Group) {
	if s.srv != nil {
		g.Go(func() error { return shutdownOnDone(ctx, s.srv) })
	}
}

func (s *metricsServer) close() {
	if s.srv != nil {
		s.srv.Close()
	}
}

// shutdownOnDone shuts srv down once ctx ends, giving its requests 5 s to finish.
func shutdownOnDone(ctx context.Context, srv *http.Server) error {
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
