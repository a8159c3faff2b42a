package serve

import (
	"context"
	"fmt"
	"net"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// xds is the xDS subsystem: the per-group cache of resources, the tracker of the Envoys' streams, and what
// secures them (lbplane's CA or the operator's files, and the guard that ends identities).
type xds struct {
	cache   *xdscache.Cache
	tracker *xdsserver.Tracker
	opts    []grpc.ServerOption
	// issuer issues Envoys' client certificates for the push API (nil without lbplane's own CA).
	issuer pushapi.CertIssuer
	// serving is lbplane's own serving certificate, ca its CA (nil when xDS is insecure or brings its own).
	serving *pki.ServingCert
	ca      *pki.CA
	// guard ends identities at certificate expiry, and at once on lbctl revoke; nil when xDS is insecure.
	guard *xdsserver.Guard
}

// newXDS makes the cache and the tracker and sets up xDS security; nothing listens yet.
func newXDS(ctx context.Context, cfg *Config, st store.Store) (*xds, error) {
	x := &xds{cache: xdscache.New()}
	x.cache.StepTimeout = cfg.SettleTimeout
	x.tracker = xdsserver.NewTracker(x.cache, cfg.Log)
	x.tracker.AckTimeout = cfg.AckTimeout
	var err error
	if x.opts, x.issuer, x.serving, x.ca, err = xdsSecurity(ctx, cfg); err != nil {
		return nil, err
	}
	x.tracker.RequireIdentity = !cfg.XDSInsecure
	if !cfg.XDSInsecure {
		if x.guard, err = newGuard(ctx, cfg, st); err != nil {
			return nil, err
		}
		x.opts = append(x.opts, x.guard.ServerOption())
	}
	return x, nil
}

// listen opens the xDS port, with its connection limit and the guard in front; it returns the limit too.
func (x *xds) listen(ctx context.Context, cfg *Config) (net.Listener, int, error) {
	lis, err := xdsserver.Listen(ctx, cfg.XDSAddress)
	if err != nil {
		return nil, 0, fmt.Errorf("xDS address: %w", err)
	}
	maxConns := cfg.MaxXDSConnections
	if maxConns == 0 {
		maxConns = xdsserver.DefaultMaxConnections()
	}
	lis = xdsserver.LimitConnections(lis, maxConns)
	if x.guard != nil {
		lis = x.guard.Listener(lis)
	}
	return lis, maxConns, nil
}

// serve serves ADS on lis until ctx ends.
func (x *xds) serve(ctx context.Context, g *errgroup.Group, lis net.Listener) {
	grpcServer := xdsserver.NewGRPC(ctx, x.cache, x.tracker, x.opts...)
	g.Go(func() error { return xdsserver.Serve(ctx, grpcServer, lis) })
}
